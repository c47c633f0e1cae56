"""The VLM page reader: render in the process pool, ask an OpenAI-compatible endpoint, classify
the answer, climb the retry ladder for review pages, and fall back to the embedded engines.

Rendering and encoding (the CPU work) never run on the event loop, so one client process can
keep a GPU server full; the loop only moves bytes and bookkeeping."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ..config import READER_REVISION, RunConfig
from .client import ChatResult, OpenAIClient, RequestFailed, api_key_from_env, parse_metrics, public_url, queue_depth
from .limiter import Limiter, next_limit, render_ahead
from ..exceptions import EndpointUnavailable, UsageError
from .worker import classify, prepare_for_http, read_page
from ..text.postprocess import postprocess, split_pages
from ..profiles import Profile, load_profile
from .pool import WorkerPool
from ..record import LADDER, PageRecord, Status
from ..render import DEFAULT_MAX_PIXELS, Sizing
from .request import build_chat_request, ladder_overrides



@dataclass
class Answer:
    """What `VlmReader.ask` got: the server's answer, or the reason there is none."""

    result: ChatResult | None
    error: str | None
    flags: list[str]
    image: str  # the image finally sent (smaller after a context overflow)


class VlmReader:
    def __init__(self, cfg: RunConfig, profile: Profile, client: OpenAIClient, server_kind: str,
                 model_name: str, pool: WorkerPool) -> None:
        self.cfg = cfg
        self.profile = profile
        self.client = client
        self.server_kind = server_kind
        self.model_name = model_name
        self.pool = pool
        # Two limits: `requests` counts requests at the server (--concurrency); the scheduler's
        # page window (`max_in_flight`) adds the pages rendering or rendered and waiting.
        self.requests = Limiter(cfg.concurrency or profile.concurrency)
        self.max_in_flight = self.requests.limit + render_ahead(self.requests.limit, pool.workers)
        self.pages_per_request = cfg.pages_per_request
        if self.pages_per_request > profile.multipage.max_pages:
            raise UsageError(f"profile {profile.name} reads at most {profile.multipage.max_pages} page(s) per "
                             f"request; --pages-per-request {self.pages_per_request} is too many")
        self.prompt_id = profile.prompt_id_for(server_kind) if not profile.image_only else None
        self._t0 = time.monotonic()
        self.max_model_len: int | None = None  # from /v1/models when the server says

    # ------------------------------------------------------------------ settings

    def sizing(self, doc_dpi: float | None = None) -> Sizing:
        img = self.profile.image
        max_pixels = img.max_pixels or self.cfg.max_pixels or DEFAULT_MAX_PIXELS
        if doc_dpi is not None or self.cfg.dpi is not None:
            return Sizing(dpi=doc_dpi or self.cfg.dpi, longest_side=None, max_pixels=max_pixels)
        if self.cfg.longest_side is not None:
            return Sizing(dpi=None, longest_side=self.cfg.longest_side, max_pixels=max_pixels)
        if img.longest_side:
            return Sizing(dpi=None, longest_side=img.longest_side, max_pixels=max_pixels)
        return Sizing(dpi=float(img.dpi), longest_side=None, max_pixels=max_pixels)

    def key_material(self, doc_dpi: float | None = None) -> dict[str, Any]:
        p = self.profile
        kind = self.server_kind
        return {
            "reader_revision": READER_REVISION,
            "engine": self.cfg.engine,
            "reader": "openai",
            "server_kind": kind,
            "model": self.model_name,
            "revision": p.revision,
            "prompt": None if p.image_only else p.prompt_for(kind),
            "system_prompt": p.system_prompt,
            "image_position": p.image_position,
            "sizing": self.sizing(doc_dpi).as_dict(),
            "format": [p.image.format, p.image.jpeg_quality if p.image.format == "jpeg" else None],
            "sampling": p.sampling.model_dump(exclude_none=True),
            "max_tokens": p.max_tokens,
            "extra_body": p.extra_body.get(kind, {}),
            "postprocess": p.postprocess.model_dump(),
            **({"pages_per_request": self.pages_per_request, "multipage": p.multipage.model_dump()}
               if self.pages_per_request > 1 else {}),
        }

    def owes_retry(self, status: Status | None, attempts: int) -> bool:
        """Does a page whose last record has `status` after `attempts` still owe a ladder step
        (or the fallback)? Fallback records end the ladder."""
        if status not in LADDER or self.cfg.no_retry:
            return False
        return attempts <= len(self.profile.retry.temperatures)

    # ------------------------------------------------------------------ reading

    async def inspect(self, path: str) -> tuple[int | None, str | None]:
        from .worker import inspect_doc

        ok, result = await self.pool.call_safely(inspect_doc, path)
        return result if ok else (None, "the document crashed the PDF reader")

    def _spec_for_http(self, spec: dict[str, Any], sizing: dict[str, Any] | None = None) -> dict[str, Any]:
        return {**spec, "sizing": sizing or spec["sizing"], "format": self.profile.image.format,
                "quality": self.profile.image.jpeg_quality}

    async def process(self, spec: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        """The first pass (or a resumed attempt): one read at the ladder step of this attempt.
        A spec with several `pages` is read in one request (records for each page)."""
        if len(spec.get("pages") or ()) > 1:
            return await self._multi(spec)
        step = max(0, int(spec.get("attempt", 1)) - 1)
        overrides = ladder_overrides(self.profile, self.server_kind, step)
        if overrides is None:
            return await self.fallback(spec, "ladder exhausted")
        return await self._attempt(spec, overrides, step)

    async def _multi(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Several consecutive pages in one request, split on the profile's separator. When
        the split does not give one part per page, those pages are read one by one."""
        t0 = time.monotonic()
        singles = [{**spec, "page": p, "pages": None, "attempt": a}
                   for p, a in zip(spec["pages"], spec["attempts"])]
        preps = await asyncio.gather(*(self.pool.call_safely(prepare_for_http, self._spec_for_http(s)) for s in singles))
        done: list[dict[str, Any]] = []
        batch: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for s, (ok, prep) in zip(singles, preps):
            if not ok:
                done.append(self._record(s, Status.bad_input, t0, error="the page crashed the renderer twice"))
            elif "record" in prep:
                done.append(prep["record"])
            else:
                batch.append((s, prep))
        if not batch:
            return done
        for group in self._fit_context(batch):
            done += await self._multi_request(group, t0)
        return done

    def _fit_context(self, batch: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[list[tuple[dict, dict]]]:
        """Pack pages into requests that fit the context: the server's max_model_len (from
        /v1/models) or the profile's context_length. Image tokens are estimated at one per
        28×28 patch (Qwen-style ViTs); a page that fits nowhere goes alone and meets the
        server's own 400, which the single-page path answers with a smaller image."""
        budget = self.max_model_len or self.profile.context_length
        if not budget:
            return [batch]
        per_page_out = self.profile.max_tokens
        groups: list[list[tuple[dict, dict]]] = [[]]
        used = 0
        for item in batch:
            prep = item[1]
            cost = -(-prep["width"] // 28) * -(-prep["height"] // 28) + per_page_out + 64
            if groups[-1] and used + cost > budget:
                groups.append([])
                used = 0
            groups[-1].append(item)
            used += cost
        return groups

    async def _multi_request(self, batch: list[tuple[dict[str, Any], dict[str, Any]]], t0: float) -> list[dict[str, Any]]:
        done: list[dict[str, Any]] = []
        if len(batch) == 1:
            return [await self._attempt(batch[0][0], {}, 0)]
        body = build_chat_request(self.profile, [(p["image"], "") for _, p in batch], self.server_kind,
                                  self.model_name, None)
        try:
            async with self.requests:
                result = await self.client.chat(body)
        except RequestFailed:
            result = None
        parts = split_pages(self.profile, result.text, len(batch)) if result is not None else None
        if parts is None or result is None:
            why = "multipage_failed" if result is None else "multipage_split_mismatch"
            for s, _ in batch:
                rec = await self._attempt(s, {}, 0)
                rec["flags"] = list(rec.get("flags", [])) + [why]
                done.append(rec)
            return done
        n = len(batch)
        share = lambda v: (v + n - 1) // n if v is not None else None  # noqa: E731
        for (s, prep), part in zip(batch, parts):
            text, blocks, fields = postprocess(self.profile, part)
            status, qflags = classify(text, result.finish_reason, blank_image=bool(prep.get("blank")))
            done.append(self._record(
                s, status, t0, prep=prep, text=text, finish_reason=result.finish_reason,
                tokens_in=share(result.tokens_in), tokens_out=share(result.tokens_out),
                flags=list(prep["flags"]) + qflags + [f"multipage:{n}"],
                blocks=[b.model_dump() if hasattr(b, "model_dump") else b for b in blocks] if blocks else None,
                fields=fields,
            ))
        return done

    async def ladder(self, spec: dict[str, Any], emit: Callable[[dict[str, Any]], None],
                     should_stop: Callable[[], bool]) -> None:
        """Continue a review page's ladder from `spec['attempt']`, one record per attempt."""
        attempt = int(spec["attempt"])
        while not should_stop():
            step = attempt - 1
            overrides = ladder_overrides(self.profile, self.server_kind, step)
            s = {**spec, "attempt": attempt}
            if overrides is None:
                emit(await self.fallback(s, "ladder exhausted"))
                return
            rec = await self._attempt(s, overrides, step)
            emit(rec)
            if Status(rec["status"]) not in LADDER:
                return
            attempt += 1

    async def ask(self, image: str, overrides: dict[str, Any] | None, *, profile: Profile | None = None,
                  shrink: Callable[[float], Awaitable[str | None]] | None = None,
                  should_stop: Callable[[], bool] | None = None) -> Answer | None:
        """One image to the endpoint under the request limit: the answer, or why there is none.
        Over the context, one more try with a smaller image from `shrink(factor)`, as the
        profile allows. Nobody answering stops the run (EndpointUnavailable: no record, a
        resubmit reads it). None when `should_stop` says so once a request slot is free."""
        profile = profile or self.profile
        flags: list[str] = []
        shrunk = False
        async with self.requests:
            if should_stop is not None and should_stop():
                return None
            while True:
                body = build_chat_request(profile, [(image, "")], self.server_kind, self.model_name, overrides)
                try:
                    return Answer(await self.client.chat(body), None, flags, image)
                except RequestFailed as exc:
                    if exc.kind == "connect":
                        raise EndpointUnavailable(f"endpoint {self.client.base} stopped answering: {exc}") from None
                    if exc.overflow and profile.retry.shrink_on_overflow and not shrunk and shrink is not None:
                        shrunk = True
                        smaller = await shrink(profile.retry.shrink_factor)
                        if smaller is not None:
                            image = smaller
                            flags.append("shrunk_for_context")
                            continue
                    return Answer(None, str(exc), flags + (["context_overflow"] if exc.overflow else []), image)

    async def _attempt(self, spec: dict[str, Any], overrides: dict[str, Any], step: int) -> dict[str, Any]:
        t0 = time.monotonic()
        ok, prep = await self.pool.call_safely(prepare_for_http, self._spec_for_http(spec))
        if not ok:
            return self._record(spec, Status.bad_input, t0, error="the page crashed the renderer twice")
        if "record" in prep:
            return prep["record"]
        state = {"prep": prep}

        async def shrink(factor: float) -> str | None:
            side = int(max(prep["width"], prep["height"]) * factor)
            sizing = {**spec["sizing"], "dpi": None, "longest_side": max(side, 64)}
            ok, smaller = await self.pool.call_safely(prepare_for_http, self._spec_for_http(spec, sizing))
            if not (ok and "image" in smaller):
                return None
            state["prep"] = smaller
            return smaller["image"]

        answer = await self.ask(prep["image"], overrides, shrink=shrink)
        assert answer is not None
        prep = state["prep"]
        result = answer.result
        if result is None:
            return self._record(spec, Status.error, t0, error=answer.error, prep=prep,
                                flags=list(prep["flags"]) + answer.flags)
        text, blocks, fields = postprocess(self.profile, result.text)
        status, qflags = classify(text, result.finish_reason, blank_image=bool(prep.get("blank")))
        flags = list(prep["flags"]) + answer.flags + qflags
        if step:
            flags.append(f"ladder:{step}")
        if result.requests > 1:
            flags.append(f"http_tries:{result.requests}")
        return self._record(
            spec, status, t0, prep=prep, text=text, finish_reason=result.finish_reason,
            tokens_in=result.tokens_in, tokens_out=result.tokens_out, flags=flags,
            blocks=[b.model_dump() if hasattr(b, "model_dump") else b for b in blocks] if blocks else None,
            fields=fields,
        )

    def _record(self, spec: dict[str, Any], status: Status, t0: float, *, prep: dict | None = None,
                text: str = "", error: str | None = None, flags: list[str] | None = None, **extra: Any) -> dict[str, Any]:
        prep = prep or {}
        return PageRecord(
            doc_id=spec["doc_id"], source=spec["source"], page=spec["page"], doc_pages=spec.get("doc_pages"),
            key=spec["key"], attempt=int(spec.get("attempt", 1)), status=status, text=text, engine="openai",
            model=self.model_name, revision=self.profile.revision or None, prompt_id=self.prompt_id,
            dpi=prep.get("dpi"), image_sha256=prep.get("sha256"), width=prep.get("width"), height=prep.get("height"),
            error=error, seconds=round(time.monotonic() - t0, 4), flags=flags or list(prep.get("flags", [])),
            **extra,
        ).to_json_dict()

    async def fallback(self, spec: dict[str, Any], why: str) -> dict[str, Any]:
        """The embedded engines: the text layer where usable, else the CPU OCR engine."""
        fb = {**spec, "engine": "auto", "reader": self.cfg.ocr_engine, "sizing": self.cfg.sizing().as_dict()}
        ok, rec = await self.pool.call_safely(read_page, fb)
        if not ok:
            rec = self._record(spec, Status.bad_input, time.monotonic(), error="the page crashed the fallback engine")
            return rec
        if rec["status"] == Status.ok.value:
            rec["status"] = Status.fallback.value
        rec["flags"] = list(rec.get("flags", [])) + ["fallback", f"fallback_reason:{why}"]
        return rec

    async def control_concurrency(self, window: Limiter, interval: float = 0.5) -> None:
        """Resize the request limit from the server's queue gauges, and the scheduler's page
        `window` with it; a no-op without /metrics."""
        self.window = window
        if not self.cfg.adaptive:
            return
        text = await self.client.metrics()
        if text is None or queue_depth(parse_metrics(text)) is None:
            return
        self.adaptive_active = True
        requests = self.requests
        hi = min(1024, max(8, requests.limit * 8))
        workers = self.pool.workers
        while True:
            await asyncio.sleep(interval)
            text = await self.client.metrics()
            depth = queue_depth(parse_metrics(text)) if text else None
            if depth is None:
                continue
            running, waiting = depth
            # Requests actually at the server, not pages still rendering: when the client's own
            # CPU is the bottleneck, an idle server queue is no reason to take more pages.
            requests.set_limit(next_limit(requests.limit, requests.in_use, running, waiting, 1, hi))
            window.set_limit(requests.limit + render_ahead(requests.limit, workers))

    def live(self) -> str:
        s = self.client.stats
        elapsed = max(time.monotonic() - self._t0, 1e-6)
        return (f"in flight {self.requests.in_use}/{self.requests.limit}, {s.tokens_out / elapsed:.0f} tok/s, "
                f"retries {s.retries}")

    def final_stats(self) -> dict[str, Any]:
        s = self.client.stats
        lim = self.requests
        concurrency = {"start": lim.history[0], "adaptive": getattr(self, "adaptive_active", False),
                       "final": lim.limit, "min": min(lim.history), "max": max(lim.history),
                       "changes": len(lim.history) - 1,
                       "render_ahead": self.max_in_flight - lim.history[0]}
        return {"http_requests": s.requests, "http_retries": s.retries, "outcomes": s.by_outcome,
                "tokens_in": s.tokens_in, "tokens_out": s.tokens_out, "server_kind": self.server_kind,
                "model": self.model_name, "profile": self.profile.name, "concurrency": concurrency}

    async def aclose(self, abandon: bool = False) -> None:
        await self.client.aclose()
        self.pool.shutdown(abandon)


async def make_vlm_reader(cfg: RunConfig, pool: WorkerPool) -> VlmReader:
    """Check the endpoint serves the model before any page is read."""
    if not cfg.endpoint:
        raise UsageError("the openai engine needs --endpoint URL (or --serve PROFILE)")
    profile = load_profile(cfg.profile or "generic")
    client = OpenAIClient(cfg.endpoint, api_key=api_key_from_env(), timeout=cfg.request_timeout,
                          max_retries=cfg.max_retries)
    try:
        served = await client.models()
        endpoint = public_url(cfg.endpoint)
        ids = [m["id"] for m in served]
        model = cfg.model or (profile.model if profile.model in ids else None) or (ids[0] if len(ids) == 1 else None)
        if model is None:
            raise EndpointUnavailable(
                f"{endpoint} serves {', '.join(ids) or 'no model'}; name one with --model")
        if model not in ids:
            raise EndpointUnavailable(f"{endpoint} does not serve model {model!r} (it serves: {', '.join(ids)})")
        owner = next((str(m.get("owned_by", "")) for m in served if m.get("id") == model), "")
        kind = cfg.server_kind if cfg.server_kind != "auto" else (
            "vllm" if "vllm" in owner.lower() else "sglang" if "sglang" in owner.lower() else "openai")
    except BaseException:
        await client.aclose()
        raise
    reader = VlmReader(cfg, profile, client, kind, model, pool)
    entry = next((m for m in served if m.get("id") == model), {})
    reader.max_model_len = int(entry["max_model_len"]) if isinstance(entry.get("max_model_len"), int) else None
    return reader
