"""The VLM page reader: render in the process pool, ask an OpenAI-compatible endpoint, classify
the answer, climb the retry ladder for review pages, and fall back to the embedded engines.

Rendering and encoding (the CPU work) never run on the event loop, so one client process can
keep a GPU server full; the loop only moves bytes and bookkeeping."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, cast

from ..engines.base import Reading
from ..exceptions import EndpointUnavailable, UsageError
from ..positions.geometry import steps_before
from ..positions.lines import block_positions
from ..profiles import Profile, load_profile
from ..runfolder.flags import Flag
from ..runfolder.record import LADDER, JsonObject, PageRecord, PageTask, Positions, Sizing, Status
from ..settings.config import RunConfig
from ..text.postprocess import is_figure_block, postprocess, rotation_asked, split_pages
from .base import PageReader
from .client import (
    LONE_SURROGATES_FLAG,
    ChatResult,
    ModelEntry,
    OpenAIClient,
    RequestFailed,
    parse_metrics,
    public_url,
    queue_depth,
)
from .judging import TURN_WHEN, classify, judge_reading
from .limiter import Limiter, next_limit, render_ahead
from .orientation import Upright
from .pagefit import fit_note, page_cost
from .plan import RunPlan
from .pool import WorkerPool
from .prepare import Prepared, prepare_for_http
from .request import build_chat_request, ladder_overrides
from .served import VERSION_PATHS, resolve_revision, server_label
from .worker import CpuSupport, aligned_positions, inspect_doc, inspect_docs, orientation_of_page, read_page

# A page's image is most of its prompt: shrunk by a side factor f, its tokens fall by about f².
# Room left for the text of the prompt and the answer's first tokens.
FIT_MARGIN = 0.8


def shrink_to_fit(factor: float, prompt_over: tuple[int, int] | None) -> float:
    """The side factor to shrink a page's image by after its prompt was over the context: the
    profile's, or smaller when the server said by how much (prompt tokens, context) — one retry
    that fits, not one that is still too long (a 300-dpi page on a 4096-token context ended
    `error` page after page, resubmit after resubmit)."""
    if not prompt_over or prompt_over[0] <= 0:
        return factor
    tokens, context = prompt_over
    return max(0.05, min(factor, math.sqrt(FIT_MARGIN * context / tokens)))


@dataclass
class Answer:
    """What `VlmReader.ask` got: the server's answer, or the reason there is none."""

    result: ChatResult | None
    error: str | None
    flags: list[str]
    image: str  # the image finally sent (smaller after a context overflow)


# Below this share of its words found in a CPU reading that passed its own signal, a VLM's answer
# is `suspect` (`--align-with`): on the development pages a perfect transcription aligns 57–99 %
# to Tesseract's reading (the 57 % on carbon copies Tesseract reads at ~40 % CER), fluent text not
# on the page 5 % (BENCHMARKS.md, "Library formats").
SUPPORT_BELOW = 0.3
# An answer holding this many words in a row that stand opposite nothing in a CPU reading of the
# page (positions/align.shared_words) is `suspect` however much of the rest it shares: a passage
# invented beside the page's own text (a continuation past the page's end, a caption for a
# picture). A transcription's longest such run on the development pages: 11 words against the
# readings a run makes; against Tesseract's bare reading (no straightening, no second threshold)
# 29 or fewer but on three pages — 51 on two faint carbon copies whose readings fail their own
# signal (`--align-with` does not judge by them), 54 on a typescript of which it dropped two
# lines, which this flags for review (BENCHMARKS.md, "Library formats"). Set lower than that:
# a page's CPU reading at a VLM's image size reads noise in a margin as words, which shortens
# an invention's bare run (73 words of it measured 40–59 in tests/reading/test_vlm_positions.py).
UNSUPPORTED_RUN = 40


def unsupported(share: float, run: int, engine: str) -> str | None:
    """The flag that makes an `ok` answer `suspect` by a CPU reading of its page (`share` of its
    words in it, `run` words in a row opposite nothing: positions/align.shared_words), or None
    when the reading supports it."""
    if share < SUPPORT_BELOW:
        return Flag.unsupported_by.of(engine=engine, share=f"{share:.2f}")  # invented, or another page's (point 0)
    if run >= UNSUPPORTED_RUN:
        return Flag.unsupported_passage_by.of(engine=engine, run=run)  # the page's text and a passage beside it
    return None


class VlmReader(PageReader):
    waits_for_pages_in_flight = True  # answers already being generated are worth their grace
    def __init__(self, plan: RunPlan, profile: Profile, client: OpenAIClient, server_kind: str,
                 model_name: str, pool: WorkerPool) -> None:
        self.plan = plan
        self.cfg = cfg = plan.cfg
        self.profile = profile
        self.client = client
        self.server_kind = server_kind
        self.model_name = model_name
        self.pool = pool
        # Documents a page of which OSD found turned: their pages are looked at before
        # they are sent (VlmHints.look_before); a book fed sideways costs one wasted request.
        self._turned_docs: set[str] = set()
        self._checked_docs: set[str] = set()  # documents whose first page was looked at (_for_http)
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
        # What serves the pages (reading/served.py; make_vlm_reader asks once per run): the
        # model's revision (in the key and on every record), "vllm 0.11.0", run.json's `server`.
        self.revision: str | None = profile.revision or None
        self.server = server_label(server_kind, None)
        self.served: JsonObject = {}
        self.adaptive_active = False
        # What the person running this should read once (stderr via `attach`, run.json's notes).
        self.notes: list[str] = []
        self._say: Callable[[str], None] = lambda message: None
        self._fit_told = False
        self._answer_cap_told = False

    # ------------------------------------------------------------------ settings

    def sizing(self, doc_dpi: float | None = None) -> Sizing:
        return self.cfg.sizing(doc_dpi, self.profile.image)

    def key_material(self, doc_dpi: float | None = None) -> JsonObject:
        # The revision served; unknown, the profile's (its "" kept: the keys of earlier runs hold).
        revision = self.revision if self.revision is not None else self.profile.revision
        return vlm_key_material(self.plan, self.profile, self.server_kind, self.model_name, revision,
                                self.pages_per_request, doc_dpi)

    def owes_retry(self, status: Status | None, attempts: int) -> bool:
        """Does a page whose last record has `status` after `attempts` still owe a ladder step
        (or the fallback)? Fallback records end the ladder."""
        return owes_ladder(self.cfg, self.profile, status, attempts)

    # ------------------------------------------------------------------ reading

    async def inspect(self, path: str) -> tuple[int | None, str | None]:
        ok, result = await self.pool.call_safely(inspect_doc, path)
        return result if ok else (None, "the document crashed the PDF reader")

    async def inspect_many(self, paths: list[str]) -> list[tuple[int | None, str | None]]:
        ok, result = await self.pool.call_safely(inspect_docs, paths)
        return result if ok else [await self.inspect(path) for path in paths]  # one of them crashed pdfium

    def _for_http(self, task: PageTask) -> PageTask:
        # The first page of each document is checked before it is sent (a scanner feeds a
        # document's pages alike: one check a document), and every page of a document found turned.
        look = task.doc_id in self._turned_docs or task.doc_id not in self._checked_docs
        self._checked_docs.add(task.doc_id)
        return task.for_vlm(image_format=self.profile.image.format, jpeg_quality=self.profile.image.jpeg_quality,
                            look_before=look)

    async def _prepare(self, task: PageTask) -> Prepared | PageRecord:
        ok, prep = await self.pool.call_safely(prepare_for_http, self._for_http(task), self.pool.context)
        if not ok:
            return self._record(task, Status.bad_input, time.monotonic(), error="the page crashed the renderer twice")
        return prep

    async def process(self, task: PageTask) -> PageRecord | list[PageRecord]:
        """The first pass (or a resumed attempt): one read at the ladder step of this attempt.
        A task with several `pages` is read in one request (records for each page)."""
        if len(task.pages) > 1:
            return await self._multi(task)
        step = max(0, task.attempt - 1)
        overrides = ladder_overrides(self.profile, self.server_kind, step)
        if overrides is None:
            return await self.fallback(task, "ladder exhausted")
        return await self._attempt(task, overrides, step)

    async def _multi(self, task: PageTask) -> list[PageRecord]:
        """Several consecutive pages in one request, split on the profile's separator. When
        the split does not give one part per page, those pages are read one by one."""
        t0 = time.monotonic()
        singles = task.singles()
        preps = await asyncio.gather(*(self._prepare(s) for s in singles))
        done: list[PageRecord] = []
        batch: list[tuple[PageTask, Prepared]] = []
        for s, prep in zip(singles, preps):
            if isinstance(prep, PageRecord):
                done.append(prep)
            else:
                batch.append((s, prep))
        if not batch:
            return done
        for group in self._fit_context(batch):
            done += await self._multi_request(group, t0)
        return done

    def _fit_context(self, batch: list[tuple[PageTask, Prepared]]) -> list[list[tuple[PageTask, Prepared]]]:
        """Pack pages into requests that fit the context: the server's max_model_len (from
        /v1/models) or the profile's context_length. Image tokens are estimated at one per
        28×28 patch (Qwen-style ViTs); a page that fits nowhere goes alone and meets the
        server's own 400, which the single-page path answers with a smaller image."""
        budget = self.max_model_len or self.profile.context_length
        if not budget:
            return [batch]
        per_page_out = self.profile.max_tokens
        groups: list[list[tuple[PageTask, Prepared]]] = [[]]
        used = 0
        for item in batch:
            prep = item[1]
            cost = page_cost(prep.width, prep.height, per_page_out)
            if groups[-1] and used + cost > budget:
                groups.append([])
                used = 0
            groups[-1].append(item)
            used += cost
        if len(groups) > 1:
            self._fit_said(batch, max(len(g) for g in groups), budget)
        return groups

    def _fit_said(self, batch: list[tuple[PageTask, Prepared]], fit: int, budget: int) -> None:
        """Say once that the context estimate sends fewer pages per request than asked, and the
        size at which they would fit (instead of quietly sending them in smaller requests)."""
        if self._fit_told:
            return
        self._fit_told = True
        task, prep = batch[0]
        by_dpi = not task.sizing.longest_side and task.path.lower().endswith((".pdf", ".djvu", ".djv"))
        self.note(fit_note(len(batch), [(p.width, p.height) for _, p in batch], fit, budget, self.profile.max_tokens,
                           dpi=prep.dpi, by_dpi=by_dpi,
                           budget_from="the server's max_model_len" if self.max_model_len
                           else f"profile {self.profile.name}'s context_length"))

    async def _multi_request(self, batch: list[tuple[PageTask, Prepared]], t0: float) -> list[PageRecord]:
        if len(batch) == 1:
            return [await self._attempt(batch[0][0], {}, 0)]
        body = self._request(self.profile, [p.image for _, p in batch], None)
        try:
            async with self.requests:
                result = await self.client.chat(body)
        except RequestFailed:
            result = None
        parts = split_pages(self.profile, result.text, len(batch)) if result is not None else None
        if parts is None or result is None:
            why = (Flag.multipage_failed if result is None else Flag.multipage_split_mismatch).of()
            done = []
            for s, _ in batch:
                rec = await self._attempt(s, {}, 0)
                done.append(rec.model_copy(update={"flags": [*rec.flags, why]}))
            return done
        n = len(batch)
        share = lambda v: (v + n - 1) // n if v is not None else None  # noqa: E731
        done = []
        for (s, prep), part in zip(batch, parts):
            text, blocks, fields = postprocess(self.profile, part)
            status, qflags = classify(text, result.finish_reason, blank_image=prep.blank)
            # One answer for several pages: its token confidence is not any one page's.
            status, quality = self._judge(s, status, text, None, prep, fields, blocks)
            done.append(self._record(
                s, status, t0, prep=prep, text=text, quality=quality, finish_reason=result.finish_reason,
                tokens_in=share(result.tokens_in), tokens_out=share(result.tokens_out),
                flags=[*prep.flags, *qflags, Flag.multipage.of(pages=n)], blocks=blocks or None, fields=fields,
            ))
        return done

    async def ladder(self, task: PageTask, emit: Callable[[PageRecord], None], should_stop: Callable[[], bool]) -> None:
        """Continue a review page's ladder from `task.attempt`, one record per attempt."""
        attempt = task.attempt
        while not should_stop():
            step = attempt - 1
            overrides = ladder_overrides(self.profile, self.server_kind, step)
            at = task.at(attempt=attempt)
            if overrides is None:
                emit(await self.fallback(at, "ladder exhausted"))
                return
            rec = await self._attempt(at, overrides, step)
            emit(rec)
            if rec.status not in LADDER:
                return
            attempt += 1

    def _request(self, profile: Profile, images: list[str], overrides: JsonObject | None,
                 room: int | None = None) -> JsonObject:
        body = build_chat_request(profile, [(image, "") for image in images], self.server_kind, self.model_name,
                                  overrides)
        self._fit_answer(body, room)
        if profile.logprobs and self.server_kind in ("vllm", "sglang"):
            # The token log-probabilities give the page's confidence (text/signal.py); a hosted
            # API may refuse them for a vision model, so only servers known to give them are asked.
            body.setdefault("logprobs", True)
        return body

    def _fit_answer(self, body: JsonObject, room: int | None) -> None:
        """Ask for no longer an answer than the server's context holds: a profile's max_tokens (or
        the ladder's grown budget) over the server's max_model_len is refused by vLLM >= 0.32 for
        every page alike (`max_tokens=8000 cannot be greater than max_model_len=4096`), and the
        resubmit would fail the same way. `room`: what the server said this request may ask for."""
        asked = body.get("max_tokens")
        limits = [n for n in (self.max_model_len, room) if n]
        if not isinstance(asked, int) or not limits or asked <= min(limits):
            return
        body["max_tokens"] = min(limits)
        if not self._answer_cap_told and self.max_model_len and asked > self.max_model_len:
            self._answer_cap_told = True
            self.note(f"profile {self.profile.name} asks for answers of up to {asked} tokens, but the server's "
                      f"context (max_model_len) is {self.max_model_len}: answers are asked for at most "
                      f"{body['max_tokens']} tokens; start the server with a longer --max-model-len for the "
                      "profile's full budget")

    async def ask(self, image: str, overrides: JsonObject | None, *, profile: Profile | None = None,
                  shrink: Callable[[float], Awaitable[str | None]] | None = None,
                  should_stop: Callable[[], bool] | None = None) -> Answer | None:
        """One image to the endpoint under the request limit: the answer, or why there is none.
        Over the context, one more try with a smaller image from `shrink(factor)`, as the
        profile allows. Nobody answering stops the run (EndpointUnavailable: no record, a
        resubmit reads it). None when `should_stop` says so once a request slot is free."""
        profile = profile or self.profile
        flags: list[str] = []
        shrunk = False
        room: int | None = None
        async with self.requests:
            if should_stop is not None and should_stop():
                return None
            while True:
                body = self._request(profile, [image], overrides, room)
                try:
                    return Answer(await self.client.chat(body), None, flags, image)
                except RequestFailed as exc:
                    if exc.kind == "connect":
                        raise EndpointUnavailable(f"endpoint {self.client.base} stopped answering: {exc}") from None
                    if exc.answer_room is not None and room is None:
                        # The server says how long an answer it takes (its context less this
                        # page's prompt, or its max_model_len when /v1/models did not say it).
                        room = exc.answer_room
                        self.max_model_len = self.max_model_len or exc.model_len
                        flags.append(Flag.answer_fitted_to_context.of())
                        continue
                    if exc.overflow and profile.retry.shrink_on_overflow and not shrunk and shrink is not None:
                        shrunk = True
                        smaller = await shrink(shrink_to_fit(profile.retry.shrink_factor, exc.prompt_over))
                        if smaller is not None:
                            image = smaller
                            flags.append(Flag.shrunk_for_context.of())
                            continue
                    return Answer(None, str(exc), flags + ([Flag.context_overflow.of()] if exc.overflow else []), image)

    async def _attempt(self, task: PageTask, overrides: JsonObject, step: int) -> PageRecord:
        t0 = time.monotonic()
        prep = await self._prepare(task)
        if isinstance(prep, PageRecord):
            return prep
        if prep.rotation:
            self._turned_docs.add(task.doc_id)  # found turned before it was sent: look at its next pages too
        sent = [prep]
        first = prep

        async def shrink(factor: float) -> str | None:
            side = int(max(first.width, first.height) * factor)
            smaller = await self._prepare(task.at(sizing=Sizing(dpi=None, longest_side=max(side, 64),
                                                                 max_pixels=task.sizing.max_pixels)))
            if not isinstance(smaller, Prepared):
                return None
            sent.append(smaller)
            return smaller.image

        answer = await self.ask(prep.image, overrides, shrink=shrink)
        assert answer is not None
        prep = sent[-1]
        result = answer.result
        if result is None:
            return self._record(task, Status.error, t0, error=answer.error, prep=prep,
                                flags=[*prep.flags, *answer.flags])
        text, blocks, fields = postprocess(self.profile, result.text)
        turn = rotation_asked(fields)
        if turn and not task.vlm.rotate:
            # The model says the page is not upright and by how much (olmOCR's front matter): turn
            # it and ask once more, as olmOCR's pipeline does; that answer is the page's record.
            again = await self._attempt(task.for_vlm(rotate=turn), overrides, step)
            return again.model_copy(update={"flags": [*again.flags, Flag.asked_again_rotated.of(turn=turn)]})
        status, qflags = classify(text, result.finish_reason, blank_image=prep.blank)
        status, quality = self._judge(task, status, text, result.confidence, prep, fields, blocks)
        if (status in TURN_WHEN and not step and not task.vlm.rotate and not prep.rotation and not prep.blank
                and self.cfg.rotate_pages == "auto"):  # once, at the first pass: OSD's answer stays
            # The answer failed its signal: a page upside down (the cheap look before sending
            # sees only pages on their side) or one it missed. OSD decides; sure, the page is
            # turned and asked once more, and the better answer is the page's record.
            turned, said = await self._turned(task, overrides, step)
            if turned is not None and _better(turned, status, quality):
                return turned
            qflags = [*qflags, *said]
        flags = [*prep.flags, *answer.flags, *qflags]
        if turn:
            flags.append(Flag.rotation_still_invalid.of())  # turned once already: kept, and said
        if step:
            flags.append(Flag.ladder.of(step=step))
        if result.requests > 1:
            flags.append(Flag.http_tries.of(count=result.requests))
        if result.repaired:
            flags.append(LONE_SURROGATES_FLAG)
        support = await self._aligned(task, prep, text, flags)
        positions = support.positions if support is not None else None
        if support is not None and status is Status.ok and support.cpu_ok:
            share = positions.aligned if positions is not None and positions.aligned is not None else 0.0
            # Issue 30, points 0 and 2: the CPU engine read this page well, and the answer's words
            # are not what it read, or not all of it. Never `ok`: it climbs the ladder.
            flag = unsupported(share, support.unshared_run, str(self.cfg.align_with))
            if flag is not None:
                status = Status.suspect
                flags.append(flag)
        positions = positions or self._from_blocks(task, prep, blocks)
        return self._record(task, status, t0, prep=prep, text=text, quality=quality,
                            finish_reason=result.finish_reason,
                            tokens_in=result.tokens_in, tokens_out=result.tokens_out, flags=flags,
                            blocks=blocks or None, fields=fields, positions=positions)

    def _from_blocks(self, task: PageTask, prep: Prepared, blocks: list[Any] | None) -> Positions | None:
        """A grounded answer's blocks as positions on the page as rendered (positions/lines.py):
        back through the turn and straightening made before it was sent."""
        if not blocks:
            return None
        turn = task.vlm.rotate or prep.rotation or 0
        # The page as rendered: before a quarter turn, its sides the other way round.
        page = (prep.height, prep.width) if turn in (90, 270) else (prep.width, prep.height)
        return block_positions(blocks, self.profile.postprocess.grounding_format, (prep.width, prep.height),
                               steps_before(turn, prep.skew, page), page)

    async def _aligned(self, task: PageTask, prep: Prepared, text: str, flags: list[str]) -> CpuSupport | None:
        """`--align-with`: the page read by the CPU engine (in the pool: its time, not the
        server's) and the answer's words placed on its boxes; None without it, for a blank page
        or no text."""
        if self.cfg.align_with is None or prep.blank or not text.strip():
            return None
        ok, support = await self.pool.call_safely(aligned_positions, self._for_http(task), self.pool.context, text,
                                                  self.cfg.align_with, task.vlm.rotate or prep.rotation or None,
                                                  prep.skew)
        if not ok:
            flags.append(Flag.align_failed.of())  # the CPU engine crashed on the page: the answer stands, unplaced
            return None
        return support

    async def _turned(self, task: PageTask, overrides: JsonObject, step: int) -> tuple[PageRecord | None, list[str]]:
        """The page asked again turned as OSD (or, OSD unsure, the line classifier) says it lies
        (None: left as it lies), and flags for the record either way (the classifier's word)."""
        ok, answer = await self.pool.call_safely(orientation_of_page, self._for_http(task))
        if not ok:
            return None, []
        up: Upright = answer
        if not up.turn:
            return None, up.flags
        self._turned_docs.add(task.doc_id)  # its next pages are looked at before they are sent
        again = await self._attempt(task.for_vlm(rotate=up.turn, rotate_from=up.how), overrides, step)
        return again.model_copy(update={"flags": [*again.flags, *up.flags,
                                                  Flag.asked_again_rotated.of(turn=up.turn),
                                                  Flag.osd_confidence.of(confidence=f"{up.confidence:.1f}")]}), []

    def _judge(self, task: PageTask, status: Status, text: str, confidence: float | None, prep: Prepared,
               fields: JsonObject | None, blocks: list[Any] | None = None) -> tuple[Status, JsonObject]:
        """The answer's quality signal and its status under the rule (suspect climbs the ladder).
        The language: the page's manifest row, else what the answer states, else the run's. A
        page the answer found figures on is not judged by its ink: a chart is ink, not text."""
        stated = fields.get("language") if isinstance(fields, dict) else None
        ink = None if any(is_figure_block(b) for b in blocks or ()) else prep.ink
        return judge_reading(status, Reading(text=text, confidence=confidence), "openai", ink=ink,
                             lang=self.run_language()[0], stated_lang=str(stated) if stated else None,
                             page_lang=task.language, known_lang=self.known_language,
                             suggested=task.language_suggested)

    @property
    def known_language(self) -> str | None:
        """The run's language when a person gave it (--lang), None otherwise: a profile's language
        says how its model's pages are judged, not what this collection is written in."""
        return self.cfg.lang if "lang" in self.cfg.model_fields_set else None

    def run_language(self) -> tuple[str, str]:
        """--lang when given (command line, config file, VLMOCR_LANG), else the profile's
        `language`, else the default."""
        if "lang" in self.cfg.model_fields_set:
            return self.cfg.lang, "--lang"
        if self.profile.language:
            return self.profile.language, "profile"
        return self.cfg.lang, "default"

    def _record(self, task: PageTask, status: Status, t0: float, *, prep: Prepared | None = None,
                flags: list[str] | None = None, **fields: Any) -> PageRecord:
        seen = {} if prep is None else dict(dpi=prep.dpi, image_sha256=prep.sha256, width=prep.width,
                                             height=prep.height, skew=prep.skew, master=prep.master)
        if task.vlm.rotate:
            fields.setdefault("rotation", task.vlm.rotate)
            fields.setdefault("rotation_from", task.vlm.rotate_from)
        elif prep is not None and prep.rotation:
            fields.setdefault("rotation", prep.rotation)
            fields.setdefault("rotation_from", prep.rotation_from or "osd")
        return task.record(status, engine="openai", model=self.model_name, revision=self.revision,
                           server=self.server, prompt_id=self.prompt_id, seconds=round(time.monotonic() - t0, 4),
                           flags=flags if flags is not None else list(prep.flags if prep else ()), **seen, **fields)

    async def fallback(self, task: PageTask, why: str) -> PageRecord:
        """The embedded engines: the text layer where usable, else the CPU OCR engine as a CPU
        run would read the page's document (its manifest language may choose the engine and
        Tesseract's data: a Greek document with tesseract:grc, not the run's RapidOCR). The task
        keeps its VLM settings key: the language changes the fallback, not what a page owes."""
        way = self.plan.fallback_reading(task.language)
        if way is None:
            fallback = task.at(engine="auto", reader=self.plan.ocr_choice().engine, sizing=self.cfg.sizing(task.doc_dpi))
        else:
            if way.note and way.note not in self.notes:
                self.note(way.note)  # the document's data is missing: said once, with what to install
            # A named engine reading with the document's data has no choice of its own to state.
            choice = way.choice or f"{self.plan.ocr_choice()}, with the document's language {task.language}"
            fallback = task.at(engine="auto", reader=way.reader, sizing=self.cfg.sizing(task.doc_dpi),
                               ocr_lang=way.tesseract_lang, engine_choice=choice)
        ok, rec = await self.pool.call_safely(read_page, fallback, self.pool.context)
        if not ok:
            return self._record(task, Status.bad_input, time.monotonic(), error="the page crashed the fallback engine")
        # The fallback's reading is held to the same rule: one that fails it comes back `suspect`
        # (review, exit 2), never `fallback` (a success).
        return rec.model_copy(update={
            "status": Status.fallback if rec.status is Status.ok else rec.status,
            "flags": [*rec.flags, Flag.fallback.of(), Flag.fallback_reason.of(why=why)],
        })

    async def control_concurrency(self, window: Limiter, interval: float = 0.5) -> None:
        """Resize the request limit from the server's queue gauges, and the scheduler's page
        `window` with it; a no-op without /metrics."""
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

    def attach(self, say: Callable[[str], None]) -> None:
        """Notes go to `say` from now on; multi-page reading on vLLM is said at once."""
        self._say = say
        if self.pages_per_request > 1 and self.server_kind == "vllm":
            self.note(f"--pages-per-request {self.pages_per_request} on vLLM: several pages per request read clean "
                      "documents, but on hard scans vLLM multi-page degraded to hallucination where SGLang read "
                      "real content (Unlimited-OCR's serving recipe: \"Use vLLM multi-page for clean docs; reach "
                      "for SGLang for hard scans.\"); for hard scans: --server-kind sglang (--serve PROFILE) or "
                      "an SGLang --endpoint, or --pages-per-request 1")

    def note(self, message: str) -> None:
        """Tell the person running this once; kept for run.json (final_stats' notes)."""
        self.notes.append(message)
        self._say(message)

    def final_stats(self) -> JsonObject:
        s = self.client.stats
        lim = self.requests
        concurrency = {"start": lim.history[0], "adaptive": self.adaptive_active,
                       "final": lim.limit, "min": min(lim.history), "max": max(lim.history),
                       "changes": len(lim.history) - 1,
                       "render_ahead": self.max_in_flight - lim.history[0]}
        return {"http_requests": s.requests, "http_retries": s.retries, "outcomes": s.by_outcome,
                "tokens_in": s.tokens_in, "tokens_out": s.tokens_out, "server_kind": self.server_kind,
                "model": self.model_name, "profile": self.profile.name, "concurrency": concurrency,
                **({"notes": list(self.notes)} if self.notes else {})}

    def provenance(self) -> JsonObject:
        return {"server": self.served} if self.served else {}

    async def aclose(self, abandon: bool = False) -> None:
        await self.client.aclose()
        self.pool.shutdown(abandon)


def vlm_key_material(plan: RunPlan, p: Profile, kind: str, model: str, revision: str | None,
                     pages_per_request: int, doc_dpi: float | None = None) -> JsonObject:
    """What changes a page's text under a VLM: the settings key's input. A function of the
    configuration and what serves it (kind, model, revision), so that a resumed run can tell
    what it owes before asking the endpoint (reading/settled.py)."""
    sizing = plan.cfg.sizing(doc_dpi, p.image)
    return {
        **plan.key_material(doc_dpi, sizing),
        "reader": "openai",
        "server_kind": kind,
        "model": model,
        "revision": revision,
        "prompt": None if p.image_only else p.prompt_for(kind),
        "system_prompt": p.system_prompt,
        "image_position": p.image_position,
        "format": [p.image.format, p.image.jpeg_quality if p.image.format == "jpeg" else None],
        "sampling": p.sampling.model_dump(exclude_none=True),
        "max_tokens": p.max_tokens,
        "extra_body": p.extra_body.get(kind) or {},  # type: ignore[call-overload]  # kind: a ServerKind as a str
        "postprocess": p.postprocess.model_dump(),
        **({"pages_per_request": pages_per_request, "multipage": p.multipage.model_dump()}
           if pages_per_request > 1 else {}),
    }


def owes_ladder(cfg: RunConfig, profile: Profile, status: Status | None, attempts: int) -> bool:
    """Does a page whose last record has `status` after `attempts` still owe a ladder step
    (or the fallback)? Fallback records end the ladder."""
    if status not in LADDER or cfg.no_retry:
        return False
    return attempts <= len(profile.retry.temperatures)


async def make_vlm_reader(plan: RunPlan, pool: WorkerPool) -> VlmReader:
    """Check the endpoint serves the model before any page is read."""
    cfg = plan.cfg
    if not cfg.endpoint:
        raise UsageError("the openai engine needs --endpoint URL (or --serve PROFILE)")
    profile = load_profile(cfg.profile or "generic")
    client = OpenAIClient(cfg.endpoint, api_key=plan.api_key(), timeout=cfg.request_timeout,
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
    reader = VlmReader(plan, profile, client, kind, model, pool)
    entry = next((m for m in served if m.get("id") == model), ModelEntry(id=model))
    max_len = entry.get("max_model_len")
    reader.max_model_len = max_len if isinstance(max_len, int) else None
    await _what_serves(reader, plan, entry)
    return reader


async def _what_serves(reader: VlmReader, plan: RunPlan, entry: ModelEntry) -> None:
    """Ask once what serves the run (reading/served.py): the version (a server vlmocr started
    was asked already), the model's revision and where it came from; warn once when a declared
    revision is not the one served."""
    started = plan.served or {}
    version, version_source = started.get("version"), started.get("version_source")
    if not version:
        version, version_source = await reader.client.server_version(
            VERSION_PATHS.get(reader.server_kind, VERSION_PATHS["openai"]))
    root = entry.get("root")
    root = root if isinstance(root, str) else None
    revision = resolve_revision(root, reader.profile.revision)
    reader.revision = revision["revision"]
    reader.server = server_label(reader.server_kind, str(version) if version else None)
    reader.served = {"name": reader.server_kind, "version": version, "version_source": version_source,
                     "url": public_url(plan.cfg.endpoint or ""), "model": reader.model_name, "root": root, **cast(JsonObject, revision),
                     **{k: v for k, v in started.items() if k not in ("version", "version_source")}}
    declared = revision.get("revision_declared")
    if declared:
        from ..progress import console

        console.print(f"warning: {declared['source']} says revision {declared['revision']}, but the server serves "
                      f"{root} at {revision['revision']} ({revision['revision_source']}): recording what it serves",
                      markup=False, highlight=False)


def _better(turned: PageRecord, status: Status, quality: JsonObject) -> bool:
    """Whether the page read turned is better than as it lay: a status no longer failing its
    signal, or the same status with a higher signal score."""
    if turned.status is Status.ok:
        return True
    if turned.status != status:
        return False
    before, after = quality.get("score"), (turned.quality or {}).get("score")
    return isinstance(before, (int, float)) and isinstance(after, (int, float)) and after > before
