"""Work done inside pool processes: open documents, read pages with the CPU engines.

Everything here is a top-level function taking a `PageTask` and the run's `PageContext` (handed
with every page: a worker keeps no settings of its own) and returning a `PageRecord` — or, for an
HTTP engine, a page prepared to send (prepare.py): all of it pickles, and a document that crashes
pdfium takes down a worker, never the scheduler. `read_page` reads as OCRmyPDF's per-page step
does: the text layer when it serves → the page prepared (prepare.py) → read by the engine(s) →
turned and read again when the reading failed its signal → the record."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from ..engines.base import LINES_RUN_DOWN, PageInput, Reading
from ..engines.pick import pick
from ..engines.registry import cpu_engine
from ..exceptions import BadInput
from ..inputs.render import blank_and_ink, count_pages, grey_if_neutral, render_page
from ..inputs.repair import diagnose, repair
from ..inputs.sources import printable
from ..languages import script_of_lang
from ..positions.geometry import Step, scaled, to_page
from ..positions.order import SIDE_NOTES
from ..runfolder.flags import Flag
from ..runfolder.record import PageRecord, PageTask, Positions, Status
from .context import PageContext
from .judging import (
    CJK_SCRIPTS,
    TURN_WHEN,
    Judged,
    cjk_punctuation_folded,
    classify,
    judge_reading,
    keeps_second,
    out_of_order_only,
    reads_better,
    wants_local_thresholds,
    wants_repair,
)
from .orientation import BLIND_TURN_BELOW, CONFIDENCE_GAIN, ROTATIONS, Upright, on_its_side, turn_to_upright
from .prepare import image_digest, prepare_image
from .textlayer import from_text_layer


def init_worker(scheduler_pid: int | None = None) -> None:
    """Pool initializer: the process's own set-up, nothing of the run's (PageContext comes with
    each page). Ctrl-C is the scheduler's business: workers ignore SIGINT so a graceful stop can
    let pages in flight finish."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_scheduler(scheduler_pid)
    os.environ["OMP_THREAD_LIMIT"] = "1"  # tesseract: 10x faster with one thread per process
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def warm() -> int:
    """A no-op task: submitting it starts a worker process."""
    return os.getpid()


def _die_with_scheduler(pid: int | None) -> None:
    """Exit when the scheduler is gone (even by kill -9). Workers are children of the
    forkserver, and the forkserver lives as long as any worker holds its pipe: without this
    watch, every killed run would leave the whole family idling as orphans."""
    import threading

    if not pid:
        return

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                pass  # alive, another user's (never ours to judge)

    threading.Thread(target=watch, name="vlmocr-scheduler-watch", daemon=True).start()


def engine(name: str, ctx: PageContext, lang: str | None = None) -> Any:
    """The process's engine `name`, built on first use (its models load once per process).
    `lang`: Tesseract's data when not the run's (a document's language): one instance each."""
    from ..engines.registry import reads_language

    return cpu_engine(name, ctx.engine_options(lang if reads_language(name) else None))


def inspect_doc(path: str) -> tuple[int | None, str | None]:
    """(page count, None) or (None, reason) for a document that cannot be read."""
    try:
        return count_pages(Path(path)), None
    except BadInput as exc:
        return None, exc.reason


def inspect_docs(paths: list[str]) -> list[tuple[int | None, str | None]]:
    """`inspect_doc` of several documents in one call: the progress total is counted ahead of the
    reading through a pool whose queue holds pages, so one call per document would wait a page
    each."""
    return [inspect_doc(path) for path in paths]


def read_judged(name: str, page: PageInput, blank_page: bool, ink: float | None,
                page_lang: str | None = None, ocr_lang: str | None = None, suggested: bool = False,
                local_thresholds: bool = False, ctx: PageContext | None = None) -> Judged:
    """Read `page` with the engine `name` (Tesseract with `ocr_lang`'s data when given; with
    `local_thresholds`, binarised by Sauvola), classify the reading and judge it by its signal."""
    t0 = time.perf_counter()
    ctx = ctx or PageContext()
    eng = engine(name, ctx, ocr_lang)
    reading: Reading = eng.read(page, local_thresholds=True) if local_thresholds else eng.read(page)
    if script_of_lang(ocr_lang or page_lang) not in CJK_SCRIPTS:
        reading = cjk_punctuation_folded(reading)
    status, qflags = classify(reading.text, reading.finish_reason, blank_image=blank_page and not reading.text.strip())
    status, quality = judge_reading(status, reading, name, ink=ink, page_lang=page_lang, suggested=suggested, ctx=ctx)
    if status is Status.ok and Flag.small_letters.found(reading.flags):
        status = Status.suspect  # read from letters too small to read, however sure the recogniser was
    return Judged(name, reading, status, quality, qflags + ([SIDE_NOTES] if SIDE_NOTES in quality else []),
                  round(time.perf_counter() - t0, 4))


def _is_cascade(reader: str) -> bool:
    from ..engines.registry import CPU_ENGINES

    return reader in CPU_ENGINES and CPU_ENGINES[reader].cascade


@dataclass(frozen=True)
class Readings:
    """Every reading of one page image: the one chosen, why (a composite's or cascade's word), and
    whether the page is blank paper."""

    readings: list[Judged]
    best: int
    why: str
    blank: bool

    @property
    def chosen(self) -> Judged:
        return self.readings[self.best]


def _read_image(task: PageTask, ctx: PageContext, reader: str, img: Image.Image, layer: str, dpi: float | None,
                flags: list[str], same: str | None) -> Readings:
    """Every engine of `reader` on one page image.
    A composite engine (tesseract+rapidocr) keeps the reading with the better signal; the
    others' scores stay in `quality.alternatives`."""
    from ..engines.registry import CPU_ENGINES, engine_parts  # as engine(): the registry pulls in rundir

    page = PageInput(task.doc_id, task.page, img, layer, dpi, flags, same)
    # The ink says whether an empty reading is right (a blank page) and how much text the page
    # should give (the quality signal).
    blank_page, ink = blank_and_ink(img)
    parts = engine_parts(reader)
    cascade = _is_cascade(reader)
    script = script_of_lang(task.read_as()[0]) if cascade else None
    readings: list[Judged] = []
    cannot: list[str] = []  # later tiers with no model for the page's script
    for name in parts:
        if cascade and readings and not CPU_ENGINES[name].reads_script(script):
            cannot.append(name)
            continue
        judged = read_judged(name, page, blank_page, ink, task.language, task.ocr_lang, task.language_suggested,
                             ctx=ctx)
        judged = _with_local_thresholds(judged, page, blank_page, ink, task, ctx)
        readings.append(_repaired(judged, page, blank_page, ink, task, ctx))
        if cascade and readings[-1].status is Status.ok:
            break  # a tier whose reading passes its signal ends the cascade
    best, why = pick([r.candidate for r in readings]) if len(readings) > 1 else (0, "")
    if cascade:
        tier = f"tier {len(readings)} of {len(parts)}"
        # Every reading before the last failed its signal; the last too when a tier after it was skipped.
        failed = readings if cannot else readings[:-1]
        why = (f"{tier}: passed its signal" if not failed else
               f"{tier}, {', '.join(r.engine for r in failed)} failed the signal" + (f"; {why}" if why else "")
               + "".join(f"; {name} has no {script} model" for name in cannot))
    return Readings(readings, best, why, blank_page)


@dataclass(frozen=True)
class Turned:
    """A page read again turned upright: its readings, the turned image, the degrees turned
    counter-clockwise, OSD's confidence, who decided — `osd` (OSD sure, the turned reading no
    worse) or `reading` (OSD unsure, the turned reading `ok` where the page as it lay was not) —
    and the flags orientation detection gave (the line classifier's word)."""

    read: Readings
    image: Image.Image
    turn: int
    confidence: float
    how: str
    flags: list[str]


def _read_turned(task: PageTask, ctx: PageContext, reader: str, img: Image.Image, layer: str, dpi: float | None,
                 flags: list[str], before: Judged) -> Turned | None:
    """The page read again turned upright; None to keep the reading as it was."""
    # OSD, checked by the line classifier: a sure OSD answer that is upside down (one in eight on
    # typescripts) is not read for nothing.
    up = turn_to_upright(img)
    sideways = LINES_RUN_DOWN in before.reading.flags
    if up.turn and (not sideways or up.turn in (90, 270)):
        tries = [(up.turn, up.how)]
    elif sideways:
        tries = [(t, "reading") for t in sorted((90, 270), key=lambda t: t != up.guess)]
    elif (before.reading.confidence or 0.0) < BLIND_TURN_BELOW:
        tries = [(180, "reading")]
    else:
        return None
    for turn, how in tries:
        upright = img.transpose(ROTATIONS[turn])
        # Not the file's pixels any more: no engine may read the file in its place (same_as_file).
        read = _read_image(task, ctx, reader, upright, layer, dpi, flags, None)
        after = read.chosen
        if LINES_RUN_DOWN in after.reading.flags or not after.candidate.readable:
            continue
        if how == "reading" and after.status is not Status.ok and (
                (after.reading.confidence or 0.0) < (before.reading.confidence or 0.0) + CONFIDENCE_GAIN):
            # OSD did not say so: only a reading that passes its signal, or that the engine is far
            # surer of (a hard page, now upright), turns the page.
            continue
        if not sideways and not on_its_side(up, img) and pick([before.candidate, after.candidate])[0] != 1:
            continue  # turned, it reads no better: OSD was wrong, or the page is hard either way
        return Turned(read, upright, turn, up.confidence, how, up.flags)
    return None


def _with_local_thresholds(judged: Judged, page: PageInput, blank_page: bool, ink: float | None,
                           task: PageTask, ctx: PageContext) -> Judged:
    """Tesseract's reading that failed its signal, read again with local thresholds (why and when:
    judging.wants_local_thresholds): the new reading (its `replaced` the first, its seconds both)
    when its signal is the better, else the first as it was."""
    if not wants_local_thresholds(judged, page.image, blank_page):
        return judged
    after = read_judged(judged.engine, page, blank_page, ink, task.language, task.ocr_lang,
                        task.language_suggested, local_thresholds=True, ctx=ctx)
    if not keeps_second(judged, after):
        return dataclasses.replace(judged, seconds=round(judged.seconds + after.seconds, 4))
    return dataclasses.replace(after, flags=[*after.flags, Flag.local_thresholds.of()], replaced=judged,
                               replaced_as={"thresholds": "otsu"}, seconds=round(judged.seconds + after.seconds, 4))


def _repaired(judged: Judged, page: PageInput, blank_page: bool, ink: float | None, task: PageTask,
              ctx: PageContext) -> Judged:
    """A reading that failed its signal, read again from the scan repaired by what its image says is
    wrong (inputs/repair.py; when: judging.wants_repair): every repair found, together; when that
    reading still fails and more than one was found, each alone too (a lighter layer measured on a
    small page is often its letters' own grey edge). The best repaired reading (its `replaced` the
    first) when its signal is the better, else the first with a flag saying what was tried. Either
    way the record's quality keeps what was measured (`diagnosis`). The page's ink is the scan's
    for every reading: a repair that took away text is not judged by the little it left."""
    if not wants_repair(judged, page.image, blank_page, ctx):
        return judged
    assert page.image is not None  # wants_repair
    t0 = time.perf_counter()
    seen = judged.reading.positions
    heights = sorted(line.box[3] - line.box[1] for line in seen.lines) if seen is not None else []
    found = diagnose(page.image, heights[len(heights) // 2] if heights else None)
    steps = found.repairs()
    diagnosis = {**judged.quality, "diagnosis": found.as_dict()}
    if not steps:
        return dataclasses.replace(judged, quality=diagnosis, seconds=round(judged.seconds + time.perf_counter() - t0, 4))
    tries = [steps] + ([[step] for step in steps] if len(steps) > 1 else [])
    best: tuple[Judged, list[str]] | None = None
    for repairs in tries:
        # Not the file's pixels any more: no engine may read the file in its place.
        fixed = dataclasses.replace(page, image=repair(page.image, repairs), file=None)
        after = read_judged(judged.engine, fixed, blank_page, ink, task.language, task.ocr_lang,
                            task.language_suggested, ctx=ctx)
        if after.reading.positions is not None:  # an enlarged page's boxes, on the page as it was
            after.reading.positions = scaled(after.reading.positions, *page.image.size)
        if best is None or keeps_second(best[0], after):
            best = (after, repairs)
        if best[0].status is Status.ok:
            break
    assert best is not None
    after, repairs = best
    seconds = round(judged.seconds + time.perf_counter() - t0, 4)
    if not keeps_second(judged, after):
        return dataclasses.replace(judged, quality=diagnosis, seconds=seconds,
                                   flags=[*judged.flags, Flag.repair_not_kept.of(how="+".join(steps))])
    return dataclasses.replace(after, quality={**after.quality, "diagnosis": found.as_dict()},
                               flags=[*after.flags, Flag.repaired.of(how="+".join(repairs))], replaced=judged,
                               replaced_as={"image": "as scanned"}, seconds=seconds)


def read_page(task: PageTask, ctx: PageContext | None = None) -> PageRecord:
    """Read one page with a CPU engine; always returns a record (never raises for bad input)."""
    t0 = time.perf_counter()
    ctx = ctx or PageContext()
    mode = task.engine
    try:
        layer_flags: list[str] = []
        layer = ""
        if mode in ("auto", "textlayer"):
            rec, layer, layer_flags = from_text_layer(task, ctx, mode, t0)
            if rec is not None:
                return rec
        reader = task.reader if mode == "auto" else mode
        page = prepare_image(task, ctx, for_vlm=False)
        flags = [*layer_flags, *page.flags]
        img, skew, steps = page.image, page.skew, list(page.steps)
        rotation_fields = {"rotation": page.rotation, "rotation_from": page.rotation_from} if page.rotation else {}
        read = _read_image(task, ctx, reader, img, layer, page.rendered.dpi, flags, page.same_as_file)
        turn_tried = False  # a turn already read and not kept: not asked again
        up = page.up
        if up is not None and up.turn and not on_its_side(up, grey_if_neutral(page.rendered.image)):
            # Turned before it was read: the page as it lay is read too, and the turn kept only when
            # its reading is the better (the user guide's rule, `--rotate-pages always` included).
            lay = prepare_image(task, ctx, for_vlm=False, rendered=page.rendered, look=False)
            lay_flags = [*layer_flags, *page.rendered.flags, *up.flags, *lay.cleaned]
            lay_read = _read_image(task, ctx, reader, lay.image, layer, page.rendered.dpi, lay_flags, None)
            if reads_better(lay_read.chosen, read.chosen):
                read, img, skew, steps = lay_read, lay.image, lay.skew, list(lay.steps)
                flags = [*lay_flags, Flag.turn_not_kept.of(turn=up.turn)]
                rotation_fields = {}
                turn_tried = True
        chosen = read.chosen
        turned = None
        if (ctx.rotate_pages != "off" and not rotation_fields and not turn_tried and not read.blank
                and ((chosen.status in TURN_WHEN and not out_of_order_only(chosen))
                     or LINES_RUN_DOWN in chosen.reading.flags)):
            # The reading failed its signal, or its lines ran down the page: is the page on its
            # side or upside down? Tesseract's OSD (0.4–2.5 s) is asked only now, so upright pages
            # that read well pay nothing.
            turned = _read_turned(task, ctx, reader, img, layer, page.rendered.dpi, flags, chosen)
        if turned is not None:
            steps.append(Step("turn", turned.turn, *img.size))
            read, img = turned.read, turned.image
            flags = [*flags, *turned.flags, Flag.rotated.of(turn=turned.turn),
                     Flag.osd_confidence.of(confidence=f"{turned.confidence:.1f}")]
            rotation_fields = {"rotation": turned.turn, "rotation_from": turned.how}
        return _record(task, ctx, mode, reader, read, img, flags, steps, skew, rotation_fields, page, t0)
    except BadInput as exc:
        return task.record(Status.bad_input, engine=mode, error=exc.reason, seconds=round(time.perf_counter() - t0, 4))
    except Exception as exc:  # an engine bug or resource failure: retried on resubmit
        return task.record(
            Status.error, engine=mode,
            # printable: a message quoting a non-UTF-8 file name would not fit in a record
            error=printable(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"[:2000]),
            seconds=round(time.perf_counter() - t0, 4),
        )


def _record(task: PageTask, ctx: PageContext, mode: str, reader: str, read: Readings, img: Image.Image,
            flags: list[str], steps: list[Step], skew: float | None, rotation_fields: dict[str, Any],
            page: Any, t0: float) -> PageRecord:
    """The record of the reading chosen, the others' scores beside it."""
    chosen = read.chosen
    quality = chosen.quality
    status = chosen.status
    if status is Status.ok and LINES_RUN_DOWN in chosen.reading.flags:
        # Its lines ran down the page and no turn read better: the words are there, their
        # order is not. A person looks (the flag says why).
        status = Status.suspect
    if read.why and len(read.readings) > 1:
        quality = {**quality, "alternatives": [r.summary() for r in read.readings if r is not chosen]}
    replaced = []  # the readings it replaced (local thresholds, a repaired scan), their scores beside this one's
    r = chosen
    while r.replaced is not None:
        replaced.append({**r.replaced.summary(), **r.replaced_as})
        r = r.replaced
    if replaced:
        earlier = quality.get("alternatives")
        quality = {**quality, "alternatives": [*(earlier if isinstance(earlier, list) else []), *replaced]}
    rendered = page.rendered
    return task.record(
        status, text=chosen.reading.text, quality=quality, engine=chosen.engine,
        # The page's own reason (a document's language) before the run's.
        engine_choice=f"{chosen.engine}: {read.why}" if read.why else task.engine_choice or (
            ctx.engine_choice if mode == "auto" else None),
        # Every tier's reading stays in the raw layer: the ones not kept with their text.
        tiers=([r.summary() if r is chosen else {**r.summary(), "text": r.reading.text} for r in read.readings]
               if _is_cascade(reader) else None),
        model=chosen.reading.model, revision=chosen.reading.revision, dpi=rendered.dpi,
        finish_reason=chosen.reading.finish_reason, seconds=round(time.perf_counter() - t0, 4),
        image_sha256=image_digest(img), width=img.width, height=img.height,
        flags=flags + chosen.flags + chosen.reading.flags, skew=skew, **rotation_fields,
        positions=(to_page(chosen.reading.positions, steps, *rendered.image.size)
                   if chosen.reading.positions is not None else None),
        master=rendered.master.to_json() if rendered.master is not None else None,
    )


def orientation_of_page(task: PageTask) -> Upright:
    """For a VLM reading that failed its signal: how its page lies, by OSD and the line classifier
    (not the cheap look of `turn_if_not_upright`: an upside-down page looks upright to the ink)."""
    rendered = render_page(Path(task.path), task.page, task.sizing)
    return turn_to_upright(grey_if_neutral(rendered.image))


@dataclass(frozen=True)
class CpuSupport:
    """A CPU engine's reading of a page a VLM answered (`--align-with`): the answer's words placed
    on its boxes, and whether that reading passed its own signal (only then does it speak for
    what is on the page: RapidOCR's Greek is no evidence against a VLM's)."""

    positions: Positions | None
    cpu_ok: bool
    # The longest run of the answer's words in a row the CPU reading has no trace of.
    unshared_run: int = 0


def aligned_positions(task: PageTask, ctx: PageContext | None, text: str, engine_name: str, rotation: int | None,
                      skew: float | None) -> CpuSupport:
    """Word positions for a VLM's answer `text` (`--align-with`): the page prepared again as it was
    sent (turned by `rotation`, straightened by `skew`), read by the CPU engine, its boxes mapped
    back to the page as scanned, and the answer's words placed on them (positions/align.py); no
    positions when the engine finds no words or none of the answer's align."""
    from ..positions.align import align, shared_words

    ctx = ctx or PageContext()
    page = prepare_image(task, ctx, for_vlm=True, sent=(rotation, skew))
    judged = read_judged(engine_name, PageInput(task.doc_id, task.page, page.image, "", page.rendered.dpi, [], None),
                         page.blank, page.ink, task.language, task.ocr_lang, task.language_suggested, ctx=ctx)
    found = judged.reading.positions
    positions = align(text, to_page(found, page.steps, *page.rendered.image.size)) if found is not None else None
    # A reading whose only doubt is its lines' order still says which words the page holds.
    return CpuSupport(positions, judged.status is Status.ok or out_of_order_only(judged),
                      shared_words(text, judged.reading.text)[2])
