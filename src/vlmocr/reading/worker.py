"""Work done inside pool processes: open documents, render pages, run CPU engines.

Everything here is a top-level function taking a `PageTask` and returning a `PageRecord` (or a
`Prepared` page for an HTTP engine): all of it pickles, and a document that crashes pdfium takes
down a worker, never the scheduler."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
import signal
import time
import traceback
from pathlib import Path
from typing import NamedTuple, Any

from PIL import Image

from ..engines.base import LINES_RUN_DOWN, SMALL_LETTERS, Engine, EngineOptions, PageInput, Reading
from ..engines.pick import Candidate, pick
from ..engines.languages import script_of_lang
from ..exceptions import BadInput
from ..runfolder.record import DEFAULT_DPI, JsonObject, PageRecord, PageTask, Positions, Status
from ..inputs.sources import printable
from ..positions.geometry import Step, steps_before, to_page
from ..positions.lines import text_layer_positions
from ..positions.order import SIDE_NOTES, side_notes
from ..inputs.render import (blank_and_ink, count_pages, encode, grey_if_neutral, kind_of, pdf_master, render_page,
                             text_layer, text_layer_lines, usable_text_layer)
from ..text.signal import judge

_engines: dict[str, Engine] = {}  # one per name:lang in each worker process
_engine_options: EngineOptions = {}


def init_worker(options: EngineOptions) -> None:
    """Pool initializer. Ctrl-C is the scheduler's business: workers ignore SIGINT so a
    graceful stop can let pages in flight finish."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_scheduler(options.get("scheduler_pid"))
    os.environ["OMP_THREAD_LIMIT"] = "1"  # tesseract: 10x faster with one thread per process
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    global _engine_options
    _engine_options = EngineOptions(**options)


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


def engine(name: str, lang: str | None = None) -> Any:
    """The worker's engine instance, built on first use (models load once per process).
    `lang`: Tesseract's data when not the run's (a document's language): one instance each."""
    from ..engines.registry import make_cpu_engine, reads_language

    lang = lang if reads_language(name) else None
    eng = _engines.get(f"{name}:{lang}" if lang else name)
    if eng is None:
        options: EngineOptions = {**_engine_options, "tesseract_lang": lang} if lang else _engine_options
        eng = _engines[f"{name}:{lang}" if lang else name] = make_cpu_engine(name, options)
    return eng


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


def image_digest(img) -> str:
    h = hashlib.sha256()
    h.update(f"{img.mode}:{img.width}x{img.height}:".encode())
    h.update(img.tobytes())
    return h.hexdigest()


def classify(text: str, finish_reason: str | None, blank_image: bool) -> tuple[Status, list[str]]:
    from ..text.quality import classify as quality_classify

    status, flags = quality_classify(text, finish_reason, blank_image=blank_image)
    return Status(status), list(flags)


def judge_reading(status: Status, reading: Reading, engine: str, *, ink: float | None = None,
                  lang: str | None = None, stated_lang: str | None = None,
                  page_lang: str | None = None, known_lang: str | None = None,
                  suggested: bool = False) -> tuple[Status, JsonObject]:
    """The reading's quality signal, and its status under the calibrated rule: a reading
    classified ok whose signal says it is probably bad is `suspect` (text/signal.py). `lang`:
    the run's language (--lang, or the profile's; in a worker, from the pool's options);
    `stated_lang`: one the reading states itself; `page_lang`: the page's own (its manifest
    row, PageTask.language), which a person stated: it wins over both, and over a guess.
    `known_lang`: the run's language when a person gave it (an explicit --lang), not the default;
    with the page's own (unless `suggested`: triage's guess), an answer clearly in another language
    is suspect (`wrong_language`)."""
    if known_lang is None:
        known_lang = _engine_options.get("lang") if _engine_options.get("lang_given") else None
    expected = (None if suggested else page_lang) or known_lang  # a triage suggestion is no one's word
    lang = page_lang or (lang if lang is not None else _engine_options.get("lang"))
    stated_lang = page_lang or stated_lang
    quality, suspect = judge(reading.text, engine, lang=lang, stated_lang=stated_lang,
                             confidence=reading.confidence, line_confidences=reading.line_confidences, ink=ink,
                             expected=expected)
    if status is Status.ok and not suspect and (notes := side_notes(reading.positions)):
        # Read well, out of order: lines beside the body read as a block of their own
        # (positions/order.py). The signal sees words, not their places; a person looks, and a
        # cascade asks its next tier, whose reading is kept when it has no such doubt.
        quality = {**quality, SIDE_NOTES: len(notes)}
        suspect = True
    return (Status.suspect if suspect and status is Status.ok else status), quality


@dataclass(frozen=True)
class Judged:
    """One engine's reading of a page with its status and quality signal."""

    engine: str
    reading: Reading
    status: Status
    quality: JsonObject
    flags: list[str]
    seconds: float
    # The engine's first reading of the page when this one replaced it (Tesseract's with Otsu's
    # threshold, read again with local thresholds: `_with_local_thresholds`).
    replaced: "Judged | None" = None

    @property
    def candidate(self) -> Candidate:
        return Candidate(self.engine, self.status in (Status.ok, Status.suspect), self.quality)

    def summary(self) -> JsonObject:
        """What the record keeps of a reading it did not choose."""
        return {"engine": self.engine, "score": self.quality.get("score"), "threshold": self.quality.get("threshold"),
                "status": self.status.value, "seconds": self.seconds}


def read_judged(name: str, page: PageInput, blank_page: bool, ink: float | None,
                page_lang: str | None = None, ocr_lang: str | None = None, suggested: bool = False,
                local_thresholds: bool = False) -> Judged:
    """Read `page` with the engine `name` (Tesseract with `ocr_lang`'s data when given; with
    `local_thresholds`, binarised by Sauvola), classify the reading and judge it by its signal."""
    t0 = time.perf_counter()
    eng = engine(name, ocr_lang)
    reading: Reading = eng.read(page, local_thresholds=True) if local_thresholds else eng.read(page)
    if script_of_lang(ocr_lang or page_lang) not in CJK_SCRIPTS:
        reading = _cjk_punctuation_folded(reading)
    status, qflags = classify(reading.text, reading.finish_reason, blank_image=blank_page and not reading.text.strip())
    status, quality = judge_reading(status, reading, name, ink=ink, page_lang=page_lang, suggested=suggested)
    if status is Status.ok and any(f.startswith(SMALL_LETTERS + ":") for f in reading.flags):
        status = Status.suspect  # read from letters too small to read, however sure the recogniser was
    return Judged(name, reading, status, quality, qflags + ([SIDE_NOTES] if SIDE_NOTES in quality else []),
                  round(time.perf_counter() - t0, 4))


# The scripts (ISO 15924) whose pages may hold CJK punctuation as it is.
CJK_SCRIPTS = frozenset({"Hans", "Hant", "Jpan", "Kore"})


def _cjk_punctuation_folded(reading: Reading) -> Reading:
    """A reading of a page in another script with its CJK punctuation (RapidOCR's `。` for a full
    stop) folded to the marks the page holds, its words too, and the flag saying how many."""
    from ..text.cjk_punctuation import fold

    text, n = fold(reading.text)
    if not n:
        return reading
    positions = reading.positions
    if positions is not None:
        lines = [line.model_copy(update={"words": [(*w[:5], fold(w[5])[0]) for w in line.words]})
                 for line in positions.lines]
        positions = positions.model_copy(update={"lines": lines})
    return dataclasses.replace(reading, text=text, positions=positions,
                               flags=[*reading.flags, f"cjk_punctuation_folded:{n}"])


def out_of_order_only(judged: Judged) -> bool:
    """Did the reading pass its signal and fail only for side notes read out of place? Neither
    another threshold nor a turn puts lines in order."""
    return SIDE_NOTES in judged.flags


# Statuses whose page is worth an orientation check (issue 33): a sideways or upside-down page
# reads as garbage (suspect) or as nothing (empty); a page read well is upright enough.
TURN_WHEN = (Status.suspect, Status.empty)


def _is_cascade(reader: str) -> bool:
    from ..engines.registry import CPU_ENGINES

    return reader in CPU_ENGINES and CPU_ENGINES[reader].cascade


def _read_image(task: PageTask, reader: str, img: Image.Image, layer: str, dpi: float | None, flags: list[str],
                same: str | None) -> tuple[list[Judged], int, str, bool]:
    """Every engine of `reader` on one page image: (readings, the chosen one, why, blank page?).
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
        judged = read_judged(name, page, blank_page, ink, task.language, task.ocr_lang, task.language_suggested)
        readings.append(_with_local_thresholds(judged, page, blank_page, ink, task))
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
    return readings, best, why, blank_page


# OSD not sure, the readings decide: a page whose reading failed with an engine confidence this
# low (an upside-down page read by RapidOCR is fragments at ~0.6; a hard page read upright keeps
# ~0.85: ../shared/gt, benchmarks/bench_pages_as_scanned.py) is read once upside down, and kept
# so only if that reading is `ok`. A page whose lines ran down is read turned both ways.
BLIND_TURN_BELOW = 0.75
CONFIDENCE_GAIN = 0.25


def on_its_side(up: Upright, img: Image.Image) -> bool:
    """OSD sure of a quarter turn and the ink saying the page's lines run down it: two witnesses
    that the page lies on its side. Its turned reading is then kept even when the signal scores
    it no higher: Tesseract reads a page on its side by itself, words whose order it loses (a Czech
    carbon copy of ../shared/gt: 43 % CER as it lay, scored 0.882; turned 7.9 %, scored 0.873)."""
    from ..engines.osd import looks_sideways

    return up.how == "osd" and up.turn in (90, 270) and looks_sideways(img)


def _read_turned(task: PageTask, reader: str, img: Image.Image, layer: str, dpi: float | None, flags: list[str],
                 same: str | None, before: Judged
                 ) -> tuple[list[Judged], int, str, Image.Image, int, float, str, list[str]] | None:
    """The page read again turned upright: (readings, chosen, why, the turned image, degrees
    turned counter-clockwise, OSD's confidence, who decided: `osd` — OSD sure, the turned reading
    no worse — or `reading` — OSD unsure, the turned reading `ok` where the page as it lay was
    not), the flags `turn_to_upright` gave (the line classifier's word); None to keep the reading
    as it was."""
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
        readings, best, why, _blank = _read_image(task, reader, upright, layer, dpi, flags, None)
        after = readings[best]
        if LINES_RUN_DOWN in after.reading.flags or not after.candidate.readable:
            continue
        if how == "reading" and after.status is not Status.ok and (
                (after.reading.confidence or 0.0) < (before.reading.confidence or 0.0) + CONFIDENCE_GAIN):
            # OSD did not say so: only a reading that passes its signal, or that the engine is far
            # surer of (a hard page, now upright), turns the page.
            continue
        if not sideways and not on_its_side(up, img) and pick([before.candidate, after.candidate])[0] != 1:
            continue  # turned, it reads no better: OSD was wrong, or the page is hard either way
        return readings, best, why, upright, turn, up.confidence, how, up.flags
    return None


# A Tesseract reading that failed its signal is read once more binarised by Sauvola (local
# thresholds) instead of Otsu (one threshold for the page): faint carbon copies, stains and a dark
# scanner bed along the page — a page straightened from askew has the bed as slanted bands at its
# edges — are what one threshold loses (a Czech carbon copy of ../shared/gt: 51 % CER → 8 %).
# The second reading is kept only when its signal is the better (BENCHMARKS.md, "Local thresholds").
# Which engines can: CpuEngine.local_thresholds (Tesseract's Sauvola).


def bilevel(img: Image.Image) -> bool:
    """Is the page black and white already (a bitonal scan: no threshold changes it)?"""
    return img.mode == "1" or (img.mode == "L" and img.getcolors(2) is not None)


def wants_local_thresholds(judged: Judged, image: Image.Image | None, blank_page: bool) -> bool:
    """Is `judged` a reading to make again with local thresholds: its engine can, it failed its
    signal, and the page is neither blank paper nor black and white already?"""
    from ..engines.registry import CPU_ENGINES

    return (CPU_ENGINES[judged.engine].local_thresholds and judged.status in TURN_WHEN and not blank_page
            and image is not None and not bilevel(image) and not out_of_order_only(judged))


def keeps_second(first: Judged, second: Judged) -> bool:
    """Is the second reading of a page (local thresholds) the one to keep: readable, and the
    better by the signal?"""
    return second.candidate.readable and pick([first.candidate, second.candidate])[0] == 1


def _with_local_thresholds(judged: Judged, page: PageInput, blank_page: bool, ink: float | None,
                           task: PageTask) -> Judged:
    """Tesseract's reading that failed its signal, read again with local thresholds: the new
    reading (its `replaced` the first, its seconds both) when its signal is the better, else the
    first as it was."""
    if not wants_local_thresholds(judged, page.image, blank_page):
        return judged
    after = read_judged(judged.engine, page, blank_page, ink, task.language, task.ocr_lang,
                        task.language_suggested, local_thresholds=True)
    if not keeps_second(judged, after):
        return dataclasses.replace(judged, seconds=round(judged.seconds + after.seconds, 4))
    return dataclasses.replace(after, flags=[*after.flags, "local_thresholds"], replaced=judged,
                               seconds=round(judged.seconds + after.seconds, 4))


def _reads_better(a: Judged, b: Judged) -> bool:
    """Does reading `a` of a page read better than `b` of the same page otherwise turned: `ok`
    where `b` is not, or the higher signal score at the same standing. (Not `pick`, which prefers
    lines read in order: a page read upside down has no side notes to misplace.)"""
    def rank(j: Judged) -> tuple[bool, float]:
        score = j.quality.get("score") if isinstance(j.quality, dict) else None
        return j.status is Status.ok, float(score) if isinstance(score, (int, float)) else 0.0

    return rank(a) > rank(b)


def _straight_and_clean(img: Image.Image, steps: list[Step]) -> tuple[Image.Image, float | None, list[str]]:
    """The page straightened (its skew added to `steps`) and cleaned: (image, skew, cleaning flags)."""
    img, skew = straight_page(img)
    if skew is not None:
        steps.append(Step("skew", skew, *img.size))
    img, cleaned = cleaned_page(img)
    return img, skew, cleaned


def read_page(task: PageTask) -> PageRecord:
    """Read one page with a CPU engine; always returns a record (never raises for bad input)."""
    t0 = time.perf_counter()
    path = Path(task.path)
    mode = task.engine
    try:
        flags: list[str] = []
        layer = ""
        if mode in ("auto", "textlayer"):
            rec, layer, flags = from_text_layer(task, mode, t0)
            if rec is not None:
                return rec
        reader = task.reader if mode == "auto" else mode
        rendered = render_page(path, task.page, task.sizing)
        flags += rendered.flags
        img = rendered.image
        rotate = _engine_options.get("rotate_pages", "auto")
        rotation_fields: JsonObject = {}
        steps: list[Step] = []  # what was done to the page before it was read: positions go back through them
        up = None
        turn_tried = False  # a turn already read and not kept: not asked again
        if rotate == "always":
            # Every page asked of OSD before it is read (a blank page: OSD is never sure, no turn).
            up = turn_to_upright(grey_if_neutral(img))
            flags += up.flags
            if up.turn:
                steps.append(Step("turn", up.turn, *img.size))
                img = img.transpose(ROTATIONS[up.turn])
                flags += [f"rotated:{up.turn}", f"osd_confidence:{up.confidence:.1f}"]
                rotation_fields = {"rotation": up.turn, "rotation_from": up.how}
        img, skew, cleaned = _straight_and_clean(img, steps)
        flags += cleaned
        # Turned, straightened or cleaned, it is not the file's pixels any more: no engine may
        # read the file instead.
        same = (str(rendered.same_as_file) if rendered.same_as_file and skew is None and not cleaned
                and not rotation_fields else None)
        readings, best, why, blank_page = _read_image(task, reader, img, layer, rendered.dpi, flags, same)
        if up is not None and up.turn and not on_its_side(up, grey_if_neutral(rendered.image)):
            # Turned before it was read: the page as it lay is read too, and the turn kept only when
            # its reading is the better (the user guide's rule, `--rotate-pages always` included).
            lay_steps: list[Step] = []
            lay_img, lay_skew, lay_cleaned = _straight_and_clean(rendered.image, lay_steps)
            lay_flags = [f for f in flags if not f.startswith(("rotated:", "osd_confidence:")) and f not in cleaned]
            lay_flags += lay_cleaned
            lay = _read_image(task, reader, lay_img, layer, rendered.dpi, lay_flags, None)
            if _reads_better(lay[0][lay[1]], readings[best]):
                readings, best, why, blank_page = lay
                img, skew, steps = lay_img, lay_skew, lay_steps
                flags = [*lay_flags, f"turn_not_kept:{up.turn}"]
                rotation_fields = {}
                turn_tried = True
        cascade = _is_cascade(reader)
        turned = None
        if (rotate != "off" and not rotation_fields and not turn_tried and not blank_page
                and ((readings[best].status in TURN_WHEN and not out_of_order_only(readings[best]))
                     or LINES_RUN_DOWN in readings[best].reading.flags)):
            # The reading failed its signal, or its lines ran down the page: is the page on its
            # side or upside down? Tesseract's OSD (0.4–2.5 s) is asked only now, so upright pages
            # that read well pay nothing.
            turned = _read_turned(task, reader, img, layer, rendered.dpi, flags, same, readings[best])
        if turned is not None:
            steps.append(Step("turn", turned[4], *img.size))
            readings, best, why, img, turn, sure, how, said = turned
            flags = [*flags, *said, f"rotated:{turn}", f"osd_confidence:{sure:.1f}"]
            rotation_fields = {"rotation": turn, "rotation_from": how}
        chosen = readings[best]
        quality = chosen.quality
        status = chosen.status
        if status is Status.ok and LINES_RUN_DOWN in chosen.reading.flags:
            # Its lines ran down the page and no turn read better: the words are there, their
            # order is not. A person looks (the flag says why).
            status = Status.suspect
        if why and len(readings) > 1:
            quality = {**quality, "alternatives": [r.summary() for r in readings if r is not chosen]}
        if chosen.replaced is not None:  # the reading it replaced, its score beside this one's
            earlier = quality.get("alternatives")
            quality = {**quality, "alternatives": [*(earlier if isinstance(earlier, list) else []),
                                                   {**chosen.replaced.summary(), "thresholds": "otsu"}]}
        return task.record(
            status, text=chosen.reading.text, quality=quality, engine=chosen.engine,
            # The page's own reason (a document's language) before the run's.
            engine_choice=f"{chosen.engine}: {why}" if why else task.engine_choice or (
                _engine_options.get("engine_choice") if mode == "auto" else None),
            # Every tier's reading stays in the raw layer: the ones not kept with their text.
            tiers=([r.summary() if r is chosen else {**r.summary(), "text": r.reading.text} for r in readings]
                   if cascade else None),
            model=chosen.reading.model, revision=chosen.reading.revision, dpi=rendered.dpi,
            finish_reason=chosen.reading.finish_reason, seconds=round(time.perf_counter() - t0, 4),
            image_sha256=image_digest(img), width=img.width, height=img.height,
            flags=flags + chosen.flags + chosen.reading.flags, skew=skew, **rotation_fields,
            positions=(to_page(chosen.reading.positions, steps, *rendered.image.size)
                       if chosen.reading.positions is not None else None),
            master=rendered.master.to_json() if rendered.master is not None else None,
        )
    except BadInput as exc:
        return task.record(Status.bad_input, engine=mode, error=exc.reason, seconds=round(time.perf_counter() - t0, 4))
    except Exception as exc:  # an engine bug or resource failure: retried on resubmit
        return task.record(
            Status.error, engine=mode,
            # printable: a message quoting a non-UTF-8 file name would not fit in a record
            error=printable(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"[:2000]),
            seconds=round(time.perf_counter() - t0, 4),
        )


def from_text_layer(task: PageTask, mode: str, t0: float) -> tuple[PageRecord | None, str, list[str]]:
    """The page's record when its text layer serves it (always, for the textlayer engine;
    when usable, for auto); otherwise no record, the layer, and the flag saying why not."""
    layer = text_layer(Path(task.path), task.page)
    usable, why = usable_text_layer(layer)
    if mode != "textlayer" and not usable:
        # Only a PDF has a text layer that can be unusable: an image file has none to judge.
        return None, layer, [f"textlayer_unusable:{why}"] if kind_of(Path(task.path)) == "pdf" else []
    reading = engine("textlayer").read(PageInput(task.doc_id, task.page, None, layer))
    status, qflags = classify(reading.text, reading.finish_reason, blank_image=False)
    if mode == "textlayer" and status is Status.empty:
        qflags.append("no_text_layer")
    status, quality = judge_reading(status, reading, "textlayer", page_lang=task.language)
    positions = None
    if reading.text.strip():
        # Where its lines lie (issue 29): PDFium's text rectangles, in pixels at the run's dpi.
        size, rotation, rects = text_layer_lines(Path(task.path), task.page)
        positions = text_layer_positions(size, rotation, rects, (task.sizing.dpi or DEFAULT_DPI) / 72.0,
                                         reading.text)
    # A scan whose text layer serves (an earlier OCR's): its coordinates go onto the scan's image too.
    master = pdf_master(Path(task.path), task.page) if positions is not None else None
    return task.record(
        status, text=reading.text, quality=quality, engine="textlayer", finish_reason=reading.finish_reason,
        seconds=round(time.perf_counter() - t0, 4), flags=qflags + (["textlayer"] if usable else []),
        positions=positions, master=master.to_json() if master is not None else None,
    ), layer, []


@dataclass(frozen=True)
class Prepared:
    """A page rendered and encoded for an HTTP engine, ready to send."""

    image: str  # data URL
    sha256: str  # of the decoded pixels sent (as a CPU engine's image_sha256)
    width: int
    height: int
    dpi: float | None
    flags: tuple[str, ...]
    blank: bool
    ink: float | None = None  # render.ink_share of the image sent
    # Degrees the page was turned counter-clockwise before it was sent because it lay turned
    # (turn_if_not_upright / turn_to_upright); 0: sent as rendered (or as the task said).
    rotation: int = 0
    rotation_from: str = ""  # who found the turn: osd, or lines (OSD unsure, the line classifier)
    skew: float | None = None  # degrees it lay askew, straightened before it was sent (straight_page)
    master: JsonObject | None = None  # the page's master image (render.Rendered.master), as a record keeps it

    def with_flag(self, flag: str) -> "Prepared":
        return dataclasses.replace(self, flags=(*self.flags, flag))


# Degrees counter-clockwise → the transposition that turns a page image so (PageTask.rotate).
ROTATIONS = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}


def straight_page(img: Image.Image, *, for_vlm: bool = False) -> tuple[Image.Image, float | None]:
    """The page straightened when it lies askew (inputs/skew.py), and the angle it lay at; (the
    page, None) when it is read as it lies: straight, too little ink to tell (a blank page),
    `--deskew off`, or a page for a VLM under `--deskew auto` (`on` straightens those too).
    Some 10 ms a page."""
    mode = _engine_options.get("deskew", "auto")
    if mode == "off" or (for_vlm and mode != "on"):
        return img, None
    from ..inputs.skew import find_skew, straighten

    skew = find_skew(img)
    if skew is None or not skew.worth_straightening:
        return img, None
    return straighten(img, skew.angle), skew.angle


def cleaned_page(img: Image.Image) -> tuple[Image.Image, list[str]]:
    """The scan cleaned under `--clean` (inputs/clean.py), with the flags saying what was done;
    (the page, []) otherwise."""
    if not _engine_options.get("clean_scans"):
        return img, []
    from ..inputs.clean import clean_page

    return clean_page(img)


class Upright(NamedTuple):
    """How to turn a page upright: degrees counter-clockwise (0: leave it), OSD's confidence, the
    flag to record (`osd_overruled:180>0:-0.54` when the line classifier overruled OSD,
    `lines_turned:90:0.71` when OSD was unsure and the classifier found the turn), OSD's own
    answer however unsure, and who found the turn (`osd` or `lines`)."""

    turn: int
    confidence: float
    flag: str | None = None
    guess: int = 0
    how: str = "osd"

    @property
    def flags(self) -> list[str]:
        """The record's flags this answer adds, turned or not."""
        return [self.flag] if self.flag else []


def turn_to_upright(img: Image.Image) -> Upright:
    """How to turn a page upright, or (0, …) to leave it as it lies. OSD finds the axis; which way
    up, RapidOCR's line classifier checks (engines/upright.py: one sure OSD answer in eight on
    typescripts is upside down, BENCHMARKS "OSD's second opinion"). OSD unsure of a page whose ink
    says it lies on its side: the classifier picks the quarter turn when it is clear; OSD unsure of
    one that does not: turned over when the classifier clearly reads it upside down."""
    from ..engines.osd import looks_sideways, osd_image
    from ..engines.upright import lines_turn, second_opinion

    osd = osd_image(img)
    if osd.sure:
        turn, overruled = second_opinion(img, osd.turn)
        return Upright(turn, osd.turn_confidence, overruled, osd.turn)
    # OSD unsure (short or faint typescripts above all): the line classifier, sure of those,
    # says which quarter a page on its side needs, or that a page lies upside down.
    turn, score = lines_turn(img, looks_sideways(img))
    if turn:
        return Upright(turn, osd.turn_confidence, f"lines_turned:{turn}:{score:.2f}", osd.turn, "lines")
    return Upright(0, osd.turn_confidence, None, osd.turn)


# A page whose line pieces score below UPRIGHT_ABOVE as it lies is not clearly upright to the line
# classifier: OSD is asked (and checked by the classifier, so a false alarm costs OSD's second, not
# a wrong turn). The classifier is sure of typescripts and weak on Fraktur and Greek (scores near 0
# both ways), where OSD was right on every page. On the 100 pages of ../shared/gt: 11 upright pages
# ask OSD (10 of them Fraktur or Greek), 95 of 100 upside-down pages are seen (at −0.05: 1 and 84;
# at 0.2: 24 and 98; BENCHMARKS.md, "The VLM path checks a document's first page").
UPRIGHT_ABOVE = 0.1
# Scripts the line classifier cannot tell the way up of (PP-OCR's model, trained on Latin and
# Chinese print: Fraktur and Greek score near 0 both ways, an upside-down Greek page of
# ../shared/gt +0.24 at the VLM's size), where OSD was sure and right on all 160 cases: a page
# read as one of them is asked of OSD at once (BENCHMARKS.md, "OSD's second opinion").
CLASSIFIER_BLIND = frozenset({"Latf", "Grek"})


def turn_if_not_upright(img: Image.Image, script: str | None = None) -> Upright:
    """`turn_to_upright` for a page that looks turned — on its side by its ink — or that the line
    classifier does not find clearly upright, or read in a `script` (ISO 15924) the classifier is
    blind to; (0, …) for one that looks upright (no OSD)."""
    from ..engines.osd import looks_sideways
    from ..engines.upright import upright_score

    if script in CLASSIFIER_BLIND or looks_sideways(img):
        return turn_to_upright(img)
    score, n = upright_score(img)
    if n and score < UPRIGHT_ABOVE:
        return turn_to_upright(img)
    return Upright(0, 0.0)


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


def aligned_positions(task: PageTask, text: str, engine_name: str, rotation: int | None,
                      skew: float | None) -> CpuSupport:
    """Word positions for a VLM's answer `text` (`--align-with`, issue 29): the page rendered as it
    was sent (turned by `rotation`, straightened by `skew`), read by the CPU engine, its boxes
    mapped back to the page as scanned, and the answer's words placed on them
    (positions/align.py); no positions when the engine finds no words or none of the answer's align."""
    from ..positions.align import align, shared_words

    rendered = render_page(Path(task.path), task.page, task.sizing)
    img = grey_if_neutral(rendered.image)
    steps = steps_before(rotation, skew, img.size)
    if rotation:
        img = img.transpose(ROTATIONS[rotation])
    if skew is not None:
        from ..inputs.skew import straighten

        img = straighten(img, skew)
    blank, ink = blank_and_ink(img)
    judged = read_judged(engine_name, PageInput(task.doc_id, task.page, img, "", rendered.dpi, [], None), blank, ink,
                         task.language, task.ocr_lang, task.language_suggested)
    found = judged.reading.positions
    positions = align(text, to_page(found, steps, *rendered.image.size)) if found is not None else None
    # A reading whose only doubt is its lines' order still says which words the page holds.
    return CpuSupport(positions, judged.status is Status.ok or out_of_order_only(judged),
                      shared_words(text, judged.reading.text)[2])


def prepare_for_http(task: PageTask) -> Prepared | PageRecord:
    """For an HTTP engine: a finished record when the text layer serves the page (auto) or the
    page is bad input; otherwise the page rendered and encoded as a data URL, ready to send."""
    import base64

    t0 = time.perf_counter()
    try:
        flags: list[str] = []
        if task.engine == "auto":
            rec, _, flags = from_text_layer(task, "auto", t0)
            if rec is not None:
                return rec
        rendered = render_page(Path(task.path), task.page, task.sizing)
        flags = [*flags, *rendered.flags]
        img = grey_if_neutral(rendered.image)
        blank, ink = blank_and_ink(img)
        turned, turned_by = 0, ""
        rotate = _engine_options.get("rotate_pages", "auto")
        if task.rotate:
            img = img.transpose(ROTATIONS[task.rotate])
        elif not blank and (rotate == "always" or (task.look_before and rotate == "auto")):
            # Issue 33: the GPU should not read a page on its side or upside down. The first page
            # of each document, and every page of a document that had a page turned, is looked
            # at first: the ink (~1.5 ms) for a page on its side, RapidOCR's line classifier
            # (~60 ms) for one not clearly upright; OSD only when either says so. `always`: OSD
            # is asked of every page.
            up = turn_to_upright(img) if rotate == "always" else turn_if_not_upright(
                img, script_of_lang(task.read_as()[0]))
            flags += up.flags
            if up.turn:
                turned, turned_by = up.turn, up.how
                img = img.transpose(ROTATIONS[turned])
                flags += [f"rotated:{turned}", f"osd_confidence:{up.confidence:.1f}"]
        img, skew = straight_page(img, for_vlm=True) if not blank else (img, None)
        img, cleaned = cleaned_page(img) if not blank else (img, [])
        flags += cleaned
        fmt = task.image_format
        data = encode(img, fmt, task.jpeg_quality)
        mime = "image/jpeg" if fmt in ("jpeg", "jpg") else "image/png"
        return Prepared(image=f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}",
                        sha256=image_digest(img), width=img.width, height=img.height, dpi=rendered.dpi,
                        flags=tuple(flags), blank=blank, ink=ink, rotation=turned, rotation_from=turned_by,
                        skew=skew, master=rendered.master.to_json() if rendered.master is not None else None)
    except BadInput as exc:
        return task.record(Status.bad_input, engine=task.engine, error=exc.reason,
                           seconds=round(time.perf_counter() - t0, 4))

