"""Figure descriptions: crop the figures that layout-grounded models found on a page, ask a VLM
to describe each one, and keep one record per figure attempt in ``RUN/figures.jsonl``.

Grounded page records carry ``blocks`` ({type, bbox [x1, y1, x2, y2] on a 0–1000 grid, text});
a block whose type is image/figure/chart/picture is a figure. Its number on the page (``figure``,
1-based, in block order, counting every figure block whatever the filters) names its crop,
``RUN/figures/<doc_id>/p<page>-f<figure>.png``, so a person can check what was sent.

The figure store works like the page store: append-only JSONL (``store.RecordWriter``), the last
record of a (doc_id, page, figure) is final, and the **describe key** (a hash of what changes a
description but not of where it is asked: model, revision, prompt, crop resolution and margin,
decoding) decides what is already done. A figure is described again when it has no final record
under the key, when its last record is ``error`` (transient: resubmit retries it), when it still
owes a step of the retry ladder (loop/truncated/empty/refused, as pages), or when the page was
re-read and the figure's box moved.

Rendering and cropping run in the process pool (``reading.pool.WorkerPool``), never on the event
loop; requests go through ``reading.client.OpenAIClient`` (retries, backoff, 429, 5xx) with at
most ``--concurrency`` in flight (the page reader's request limit); answers are classified by
``text.quality.classify``.

Descriptions flow into the assembled Markdown as image links with the description as alt text,
``![description](../figures/<doc>/p3-f1.png)``, where the figure sits in the page text
(``apply_descriptions``; ``placement.rebuild_documents`` re-assembles ``docs/*.md``)."""


from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import BadInput, ExitCode, UsageError, outcome
from ..figures.find import Figure, crop_page, find_figures, pixel_boxes, same_box, shrink_crop
from ..files import RunLock
from ..inputs.finder import SourceFinder
from ..inputs.render import DEFAULT_MAX_PIXELS, Sizing, page_pixel_size
from ..machine import available_cores
from ..runfolder.flags import Flag
from ..runfolder.record import LADDER, FigureRecord, JsonObject, Status
from ..runfolder.rundir import FIGURES_FILE, RunDir
from ..runfolder.store import PAGES_FILE, RecordWriter, iter_figures
from ..settings.config import settings_key
from ..settings.figures import DescribeOptions, describe_key_material, describing_profile
from .tasks import TaskRunner

# One image token per 28×28 patch (Qwen-style ViTs); chars per text token for the estimate.
PATCH_PIXELS = 28 * 28
CHARS_PER_TOKEN = 4
# A "no text" answer is a fine description of a figure without text ("A photograph of a harbour
# at dusk; there is no text."). Only a bare statement of that kind, shorter than this, is empty.
NO_TEXT_DESCRIPTION_CHARS = 40
# The dry run lists this many figures one by one (the totals count all of them).
ESTIMATE_ROWS = 1000


FAILED_STATUSES = frozenset({Status.error, Status.refused, Status.bad_input})


# ============================================================================================
# Describing
# ============================================================================================


@dataclass
class DescribeSummary:
    run_dir: str
    key: str
    model: str | None
    prompt_id: str
    dry_run: bool = False
    figures: int = 0  # figure blocks with a usable box in the final page records
    no_box: int = 0  # figure blocks without a usable box
    small: int = 0  # below --min-area
    selected: int = 0  # figures - small
    done_before: int = 0  # already final under the key
    owed: int = 0
    over_cap: int = 0  # owed but left for later by --max-figures
    described_now: int = 0  # figures sent this time
    requests: int = 0  # HTTP requests (with retries)
    records: int = 0  # records written this time
    statuses: dict[str, int] = field(default_factory=dict)  # final status of the selected figures
    missing: int = 0  # selected figures without a final record
    estimate: JsonObject | None = None
    docs_rebuilt: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    def group(self, name: str) -> int:
        return sum(n for s, n in self.statuses.items() if Status(s).group == name)

    def exit_code(self) -> ExitCode:
        if self.dry_run:
            return ExitCode.ok
        return outcome(unfinished=bool(self.missing or self.group("failed")), review=bool(self.group("review")),
                       interrupted=self.interrupted)

    def done_line(self) -> str:
        if self.dry_run:
            est = self.estimate or {}
            return (f"Dry run: {self.figures} figures, {self.small} below --min-area, {self.done_before} already "
                    f"described, {self.owed - self.over_cap} to describe ({self.over_cap} over --max-figures), "
                    f"~{est.get('total_tokens', 0)} tokens (images {est.get('image_tokens', 0)}, prompts "
                    f"{est.get('prompt_tokens', 0)}, output budget {est.get('output_tokens', 0)})")
        rate = self.described_now / self.seconds * 3600 if self.seconds > 0 else 0.0
        return (f"Described: {self.selected} figures, records={sum(self.statuses.values())} "
                f"ok={self.statuses.get('ok', 0)} "
                f"review={self.group('review')} failed={self.group('failed')} missing={self.missing} "
                f"small={self.small} (now {self.described_now}, {rate:.0f} figures/h)")

    def as_dict(self) -> JsonObject:
        data = dict(self.__dict__)
        data["exit_code"] = int(self.exit_code())
        data["line"] = self.done_line()
        return data


def _visible_len(text: str) -> int:
    return len("".join(text.split()))


def classify_description(text: str, finish_reason: str | None, blank_crop: bool) -> tuple[Status, list[str]]:
    """``text.quality.classify`` for a description. One difference: saying the figure has no text
    is a description (figures often have none), unless that is all the answer says."""
    from ..text.quality import FLAG_NO_TEXT_ANSWER, classify

    status, flags = classify(text, finish_reason, blank_image=blank_crop)
    status = Status(status)
    if (status is Status.empty and FLAG_NO_TEXT_ANSWER in flags
            and _visible_len(text) >= NO_TEXT_DESCRIPTION_CHARS):
        status = Status.ok
    return status, list(flags)


def _clean_description(text: str) -> str:
    from ..text.postprocess import strip_fences

    return strip_fences(text or "").strip()


class _Describer:
    def __init__(self, run_dir: Path, opts: DescribeOptions, reader: Any, profile: Any, key: str,
                 writer: RecordWriter, runner: TaskRunner) -> None:
        self.run_dir = run_dir
        self.opts = opts
        self.reader = reader
        self.pool = reader.pool
        self.server_kind = reader.server_kind
        self.model = reader.model_name
        self.profile = profile
        self.key = key
        self.writer = writer
        self.runner = runner
        from ..profiles import prompt_id

        self.prompt_id = prompt_id(profile.prompt)
        self.described = 0
        self.counts: Counter[str] = Counter()

    def emit(self, rec: FigureRecord) -> None:
        if self.runner.store_broken:
            return  # not durable, so not done: described again on resume
        try:
            self.writer.append(rec)
        except OSError as exc:
            self.runner.store_failed(str(self.writer.path), exc)
            return
        self.counts[rec.status.value] += 1

    def record(self, fig: Figure, attempt: int, status: Status, t0: float, crop: JsonObject | None = None,
               page: JsonObject | None = None, *, description: str = "", finish_reason: str | None = None,
               tokens_in: int | None = None, tokens_out: int | None = None, error: str | None = None,
               flags: list[str] | None = None) -> FigureRecord:
        crop = crop or {}
        return FigureRecord(
            doc_id=fig.doc_id, source=fig.source, page=fig.page, figure=fig.figure, block_index=fig.block_index,
            type=fig.type, bbox=fig.bbox, area=round(fig.area, 6), crop=fig.crop_rel if crop else None,
            box_px=crop.get("box_px"), crop_px=crop.get("crop_px"), width=crop.get("width"),
            height=crop.get("height"), dpi=(page or {}).get("dpi"), crop_sha256=crop.get("sha256"), key=self.key,
            page_key=fig.page_key, status=status, description=description, finish_reason=finish_reason,
            model=self.model, revision=self.profile.revision or None, prompt_id=self.prompt_id, attempt=attempt,
            tokens_in=tokens_in, tokens_out=tokens_out, seconds=round(time.monotonic() - t0, 4), error=error,
            flags=flags or [], anchor=fig.anchor,
        )

    async def page(self, path: Path | None, figs: list[tuple[Figure, int, int]]) -> None:
        """Crop one page's owed figures in the pool, then describe them."""
        t0 = time.monotonic()
        first = figs[0][0]
        if path is None:
            for fig, attempt, _ in figs:
                self.emit(self.record(fig, attempt, Status.error, t0,
                                      error=f"source not found: {fig.source!r} (pass --source-root)"))
            return
        spec = {"path": str(path), "page": first.page, "dpi": self.opts.dpi, "margin": self.opts.margin,
                "crop_max_pixels": self.profile.image.max_pixels,
                "crops": [{"figure": f.figure, "bbox": f.bbox, "out": str(self.run_dir / f.crop_rel)}
                          for f, _, _ in figs]}
        ok, page = await self.pool.call_safely(crop_page, spec)
        if not ok or "error" in page:
            status = Status.bad_input if not ok or page.get("bad_input") else Status.error
            why = "the page crashed the renderer twice" if not ok else page["error"]
            for fig, attempt, _ in figs:
                self.emit(self.record(fig, attempt, status, t0, error=why))
            return
        crops = {c["figure"]: c for c in page["crops"]}
        await asyncio.gather(*(self.figure(fig, attempt, step, crops[fig.figure], page)
                               for fig, attempt, step in figs))

    async def figure(self, fig: Figure, attempt: int, step: int, crop: JsonObject, page: JsonObject) -> None:
        """Describe one figure, climbing the retry ladder while the answer needs review."""
        from .request import ladder_overrides

        sent = False
        while not self.runner.stop.is_set():
            overrides = ladder_overrides(self.profile, self.server_kind, step)
            if overrides is None:
                return  # the ladder is exhausted: the last review record stays final
            rec = await self.attempt(fig, attempt, step, crop, page, overrides)
            if rec is None:
                return
            if not sent:
                sent = True
                self.described += 1
            self.emit(rec)
            if rec.status not in LADDER or self.opts.no_retry:
                return
            attempt += 1
            step += 1

    async def attempt(self, fig: Figure, attempt: int, step: int, crop: JsonObject, page: JsonObject,
                      overrides: JsonObject) -> FigureRecord | None:
        """One request for one figure, through the page reader's own `ask` (request limit,
        context-overflow shrink, endpoint gone); None when stopping before it was sent."""
        t0 = time.monotonic()

        async def shrink(factor: float) -> str | None:
            ok, small = await self.pool.call_safely(shrink_crop, str(self.run_dir / fig.crop_rel), factor)
            return small["image"] if ok else None

        answer = await self.reader.ask(crop["image"], overrides, profile=self.profile, shrink=shrink,
                                       should_stop=self.runner.stop.is_set)
        if answer is None:
            return None  # stopping: only requests already sent may finish
        crop_flags = crop.get("flags")
        flags = [str(f) for f in crop_flags] if isinstance(crop_flags, list) else []
        flags += answer.flags
        result = answer.result
        if result is None:
            return self.record(fig, attempt, Status.error, t0, crop, page, error=answer.error, flags=flags)
        text = _clean_description(result.text)
        status, qflags = classify_description(text, result.finish_reason, bool(crop.get("blank")))
        flags += qflags
        if step:
            flags.append(Flag.ladder.of(step=step))
        if result.requests > 1:
            flags.append(Flag.http_tries.of(count=result.requests))
        return self.record(fig, attempt, status, t0, crop, page, description=text, finish_reason=result.finish_reason,
                           tokens_in=result.tokens_in, tokens_out=result.tokens_out, flags=flags)


def _estimate(figs: list[Figure], finder: SourceFinder, opts: DescribeOptions, profile: Any) -> JsonObject:
    """Tokens a describe would spend: image tokens (crop pixels / 784) + prompt (chars / 4) +
    the output budget (max_tokens), per figure. Crops are measured from the page size at the
    chosen dpi, without rendering."""
    sizes: dict[tuple[str, int], tuple[int, int] | None] = {}
    prompt_tokens = math.ceil(len(profile.prompt + profile.system_prompt) / CHARS_PER_TOKEN)
    image_tokens = 0
    unknown = 0
    rows: list[JsonObject] = []
    for fig in figs:
        page_key = (fig.doc_id, fig.page)
        if page_key not in sizes:
            path = finder.find(fig.source, fig.doc_id)
            try:
                sizing = Sizing(dpi=opts.dpi, longest_side=None, max_pixels=DEFAULT_MAX_PIXELS)
                sizes[page_key] = page_pixel_size(Path(path), fig.page, sizing) if path else None
            except BadInput:
                sizes[page_key] = None
        size = sizes[page_key]
        if size is None:
            unknown += 1
            continue
        _, crop = pixel_boxes(fig.bbox, size[0], size[1], opts.margin)
        w, h = crop[2] - crop[0], crop[3] - crop[1]
        cap = profile.image.max_pixels
        if cap and w * h > cap:
            s = (cap / (w * h)) ** 0.5
            w, h = max(1, int(w * s)), max(1, int(h * s))
        tokens = math.ceil(w * h / PATCH_PIXELS)
        image_tokens += tokens
        if len(rows) < ESTIMATE_ROWS:
            rows.append({"doc_id": fig.doc_id, "page": fig.page, "figure": fig.figure, "crop_width": w,
                         "crop_height": h, "image_tokens": tokens})
    n = len(figs) - unknown
    out = {"figures": n, "unmeasured": unknown, "image_tokens": image_tokens, "prompt_tokens": prompt_tokens * n,
           "output_tokens": profile.max_tokens * n, "max_tokens": profile.max_tokens, "per_figure": rows}
    out["input_tokens"] = out["image_tokens"] + out["prompt_tokens"]
    out["total_tokens"] = out["input_tokens"] + out["output_tokens"]
    return out


@dataclass
class FigureState:
    status: Status
    attempts: int  # highest attempt number under the key
    steps: int  # ladder steps taken (records with a ladder status) under the key
    bbox: list[float] | None


def load_state(path: Path, key: str) -> dict[tuple[str, int, int], FigureState]:
    """The last record of each figure under ``key``, with its attempt and ladder counts."""
    out: dict[tuple[str, int, int], FigureState] = {}
    for rec in iter_figures(path):
        if rec.key != key:
            continue
        ident = (rec.doc_id, rec.page, rec.figure)
        prev = out.get(ident)
        attempts = max(rec.attempt, prev.attempts if prev else 0)
        steps = (prev.steps if prev else 0) + (rec.status in LADDER)
        out[ident] = FigureState(rec.status, attempts, steps, rec.bbox)
    return out


def owes(fig: Figure, state: FigureState | None, opts: DescribeOptions, ladder_len: int) -> tuple[bool, int, int]:
    """(is the figure owed a description now, its next attempt number, its next ladder step)."""
    if state is None:
        return True, 1, 0
    if opts.force or not same_box(state.bbox, fig.bbox):
        # --force, or the page was re-read and the box moved: a new figure as far as we know.
        return True, state.attempts + 1, 0
    if state.status is Status.error:
        return True, state.attempts + 1, state.steps
    if state.status in LADDER and not opts.no_retry and state.steps <= ladder_len:
        return True, state.attempts + 1, state.steps
    return False, state.attempts, state.steps


def _select(figures: list[Figure], opts: DescribeOptions, state: dict, ladder_len: int,
            summary: DescribeSummary) -> list[tuple[Figure, int, int]]:
    owed: list[tuple[Figure, int, int]] = []
    for fig in figures:
        if fig.area < opts.min_area:
            summary.small += 1
            continue
        summary.selected += 1
        need, attempt, step = owes(fig, state.get(fig.ident), opts, ladder_len)
        if need:
            owed.append((fig, attempt, step))
        else:
            summary.done_before += 1
    summary.owed = len(owed)
    if opts.max_figures is not None and len(owed) > opts.max_figures:
        summary.over_cap = len(owed) - opts.max_figures
        owed = owed[: opts.max_figures]
    return owed


def _final_statuses(path: Path, key: str, figures: list[Figure], opts: DescribeOptions,
                    summary: DescribeSummary) -> None:
    state = load_state(path, key)
    counts: Counter[str] = Counter()
    missing = 0
    for fig in figures:
        if fig.area < opts.min_area:
            continue
        st = state.get(fig.ident)
        if st is None or not same_box(st.bbox, fig.bbox):
            missing += 1
        else:
            counts[st.status.value] += 1
    summary.statuses = dict(counts)
    summary.missing = missing


def _offline(run_dir: Path, opts: DescribeOptions, figures: list[Figure],
             no_box: int) -> tuple[DescribeSummary, list[tuple[Figure, int, int]], Any]:
    """The figures owed under the key that ``opts`` name (the profile and the model name, not
    what an endpoint says it serves), counted without asking anyone."""
    from ..profiles import load_profile, prompt_id

    base = load_profile(opts.profile or "generic")
    profile, _ = describing_profile(base, opts.prompt, opts.max_tokens)
    model = opts.model or base.model or None
    key = settings_key(describe_key_material(profile, model, opts))
    summary = DescribeSummary(str(run_dir), key, model, prompt_id(profile.prompt), dry_run=opts.dry_run,
                              figures=len(figures), no_box=no_box)
    owed = _select(figures, opts, load_state(run_dir / FIGURES_FILE, key), len(profile.retry.temperatures),
                   summary)
    return summary, owed, profile


def settled_summary(run_dir: str | Path, opts: DescribeOptions) -> DescribeSummary:
    """What a describe with ``opts`` owes, counted offline (``owed``; the model is ``opts.model``,
    for --serve the served name), with the final statuses already in figures.jsonl: what
    `describe --serve` decides by before starting a server, and reports when nothing is owed."""
    run_dir = Path(run_dir)
    if not RunDir(run_dir).pages.is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    figures, no_box = find_figures(run_dir)
    if opts.doc_ids is not None:
        figures = [f for f in figures if f.doc_id in opts.doc_ids]
    summary, _, _ = _offline(run_dir, opts.model_copy(update={"dry_run": False}), figures, no_box)
    _final_statuses(run_dir / FIGURES_FILE, summary.key, figures, opts, summary)
    return summary


async def _describe(run_dir: Path, opts: DescribeOptions, progress: Callable[[str], None],  # noqa: PLR0915 (long: to be split)
                    handle_signals: bool) -> DescribeSummary:
    from ..profiles import prompt_id
    from .pool import WorkerPool

    t_start = time.monotonic()
    figures, no_box = find_figures(run_dir)
    if opts.doc_ids is not None:  # describe --library: only the documents the library holds from this run
        figures = [f for f in figures if f.doc_id in opts.doc_ids]
    finder = SourceFinder(run_dir, opts.source_roots)
    path = run_dir / FIGURES_FILE

    if opts.dry_run:
        summary, owed, profile = _offline(run_dir, opts, figures, no_box)
        summary.estimate = _estimate([f for f, _, _ in owed], finder, opts, profile)
        summary.seconds = round(time.monotonic() - t_start, 3)
        return summary

    from ..settings.config import RunConfig
    from .limiter import Limiter
    from .plan import RunPlan
    from .vlm import make_vlm_reader

    workers = opts.workers or available_cores()
    try:
        cfg = RunConfig.model_validate({**opts.vlm_settings(), "engine": "openai", "workers": workers})
    except ValueError as exc:
        raise UsageError(f"invalid settings: {exc}") from None
    # The preflight of page reading: the endpoint answers and serves the model.
    pool = WorkerPool(workers, {})
    try:
        reader = await make_vlm_reader(RunPlan(cfg, endpoint=opts.started), pool)
    except BaseException:
        pool.shutdown(abandon=True)
        raise
    writer: RecordWriter | None = None
    runner = TaskRunner(progress)
    try:
        profile, _ = describing_profile(reader.profile, opts.prompt, opts.max_tokens)
        key = settings_key(describe_key_material(profile, reader.model_name, opts))
        summary = DescribeSummary(str(run_dir), key, reader.model_name, prompt_id(profile.prompt),
                                  figures=len(figures), no_box=no_box)
        writer = RecordWriter(path)  # repairs a torn last line first
        owed = _select(figures, opts, load_state(path, key), len(profile.retry.temperatures), summary)
        d = _Describer(run_dir, opts, reader, profile, key, writer, runner)

        by_page: dict[tuple[str, int], list[tuple[Figure, int, int]]] = {}
        for item in owed:
            by_page.setdefault((item[0].doc_id, item[0].page), []).append(item)
        if by_page:
            progress(f"describing {len(owed)} figures on {len(by_page)} pages with {reader.model_name} "
                     f"({reader.requests.limit} in flight)")

        async def pages() -> AsyncIterator[tuple[tuple[str, int], list[tuple[Figure, int, int]]]]:
            for item in by_page.items():
                yield item

        async def one_page(job: tuple[tuple[str, int], list[tuple[Figure, int, int]]]) -> None:
            (doc_id, _), items = job
            src = await asyncio.to_thread(finder.find, items[0][0].source, doc_id)
            await d.page(src, items)

        async def report() -> None:
            while True:
                await asyncio.sleep(10)
                progress(f"{d.described}/{len(owed)} figures described, "
                         + " ".join(f"{k}={v}" for k, v in sorted(d.counts.items())))

        if handle_signals:
            runner.listen()
        ticker = asyncio.create_task(report())
        try:
            # Pages in flight: enough to keep every request slot and every worker busy.
            await runner.drain(pages(), one_page, Limiter(max(reader.requests.limit, workers * 2)),
                               lambda job: f"{job[0][0]} page {job[0][1]}")
        finally:
            ticker.cancel()
            if handle_signals:
                # Puts back what was there: --serve's handler, so a SIGTERM while the Markdown is
                # rebuilt still stops the server.
                runner.stop_listening()
        summary.interrupted = runner.interrupted
        summary.described_now = d.described
        summary.records = writer.written
        summary.requests = reader.client.stats.requests
        if runner.fatal is not None:
            raise runner.fatal
    finally:
        if writer is not None:
            try:
                writer.close()
            except OSError:
                pass  # the disk is full: the run's fatal error says so
        # A second signal means the user wants out now: kill the crop workers.
        await reader.aclose(abandon=runner.abandon.is_set())
    _final_statuses(path, key, figures, opts, summary)
    if opts.markdown:
        from ..figures.placement import rebuild_with_figures

        summary.docs_rebuilt = rebuild_with_figures(run_dir)
    summary.seconds = round(time.monotonic() - t_start, 3)
    return summary


def describe_run(run_dir: str | Path, opts: DescribeOptions, *, progress: Callable[[str], None] | None = None,
                 handle_signals: bool = False) -> DescribeSummary:
    """Library entry point of `vlmocr describe`: describe every owed figure of a run."""
    run_dir = Path(run_dir)
    opts.check()
    if not RunDir(run_dir).pages.is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    note = progress or (lambda _msg: None)
    if opts.dry_run:
        return asyncio.run(_describe(run_dir, opts, note, handle_signals))
    lock = RunLock(run_dir)
    # Its own lock file: describing may go on while no one else writes figures.jsonl; a page run
    # on the same directory writes other files.
    lock.path = run_dir / ".describe.lock"
    lock.acquire()
    try:
        return asyncio.run(_describe(run_dir, opts, note, handle_signals))
    finally:
        lock.release()


