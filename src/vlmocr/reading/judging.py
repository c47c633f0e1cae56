"""How a reading of a page is judged, wherever it was made (a pool worker, the VLM reader, the
cascade): its status from its text (text/quality.py), its quality signal and the calibrated rule
(text/signal.py), lines read out of place (positions/order.py), and the rules that compare two
readings of one page. Pure: no engine is run here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from PIL import Image

from ..engines.base import LINES_RUN_DOWN, Reading
from ..engines.pick import Candidate, pick
from ..positions.order import SIDE_NOTES, side_notes
from ..runfolder.flags import Flag
from ..runfolder.record import JsonObject, Status
from ..text.signal import judge
from .context import PageContext


def classify(text: str, finish_reason: str | None, blank_image: bool) -> tuple[Status, list[str]]:
    from ..text.quality import classify as quality_classify

    status, flags = quality_classify(text, finish_reason, blank_image=blank_image)
    return Status(status), list(flags)


def judge_reading(status: Status, reading: Reading, engine: str, *, ink: float | None = None,
                  lang: str | None = None, stated_lang: str | None = None,
                  page_lang: str | None = None, known_lang: str | None = None,
                  suggested: bool = False, ctx: PageContext | None = None) -> tuple[Status, JsonObject]:
    """The reading's quality signal, and its status under the calibrated rule: a reading
    classified ok whose signal says it is probably bad is `suspect` (text/signal.py). `lang`:
    the run's language (--lang, or the profile's; in a worker, from the pool's options);
    `stated_lang`: one the reading states itself; `page_lang`: the page's own (its manifest
    row, PageTask.language), which a person stated: it wins over both, and over a guess.
    `known_lang`: the run's language when a person gave it (an explicit --lang), not the default;
    with the page's own (unless `suggested`: triage's guess), an answer clearly in another language
    is suspect (`wrong_language`)."""
    if known_lang is None and ctx is not None:
        known_lang = ctx.known_lang
    expected = (None if suggested else page_lang) or known_lang  # a triage suggestion is no one's word
    lang = page_lang or (lang if lang is not None else ctx.lang if ctx is not None else None)
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
    # threshold, read again with local thresholds; a reading of the scan before it was repaired),
    # and what tells that reading apart in the record's quality.alternatives.
    replaced: "Judged | None" = None
    replaced_as: JsonObject = dataclasses.field(default_factory=dict)

    @property
    def candidate(self) -> Candidate:
        return Candidate(self.engine, self.status in (Status.ok, Status.suspect), self.quality)

    def summary(self) -> JsonObject:
        """What the record keeps of a reading it did not choose."""
        return {"engine": self.engine, "score": self.quality.get("score"), "threshold": self.quality.get("threshold"),
                "status": self.status.value, "seconds": self.seconds}


# The scripts (ISO 15924) whose pages may hold CJK punctuation as it is.
CJK_SCRIPTS = frozenset({"Hans", "Hant", "Jpan", "Kore"})


def cjk_punctuation_folded(reading: Reading) -> Reading:
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
                               flags=[*reading.flags, Flag.cjk_punctuation_folded.of(count=n)])


def out_of_order_only(judged: Judged) -> bool:
    """Did the reading pass its signal and fail only for side notes read out of place? Neither
    another threshold nor a turn puts lines in order."""
    return SIDE_NOTES in judged.flags


# Statuses whose page is worth an orientation check: a sideways or upside-down page
# reads as garbage (suspect) or as nothing (empty); a page read well is upright enough.
TURN_WHEN = (Status.suspect, Status.empty)


# A Tesseract reading that failed its signal is read once more binarised by Sauvola (local
# thresholds) instead of Otsu (one threshold for the page): faint carbon copies, stains and a dark
# scanner bed along the page — a page straightened from askew has the bed as slanted bands at its
# edges — are what one threshold loses (a Czech carbon copy among the development pages: 51 % CER → 8 %).
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


def wants_repair(judged: Judged, image: Image.Image | None, blank_page: bool, ctx: PageContext) -> bool:
    """Is `judged` a reading to make again from the scan repaired (inputs/repair.py): repair is on,
    the reading failed its signal, and the page is not blank paper, nor only lines read out of
    place, nor lying on its side (lines running down it): no repair puts lines in order or turns a
    page, and a repaired reading of a page on its side can outscore the page read as it lay.
    Pages that read well are never measured for it."""
    return (ctx.repair != "off" and judged.status in TURN_WHEN and not blank_page and image is not None
            and not out_of_order_only(judged) and LINES_RUN_DOWN not in judged.reading.flags)


def keeps_second(first: Judged, second: Judged) -> bool:
    """Is the second reading of a page (local thresholds) the one to keep: readable, and the
    better by the signal?"""
    return second.candidate.readable and pick([first.candidate, second.candidate])[0] == 1


def reads_better(a: Judged, b: Judged) -> bool:
    """Does reading `a` of a page read better than `b` of the same page otherwise turned: `ok`
    where `b` is not, or the higher signal score at the same standing. (Not `pick`, which prefers
    lines read in order: a page read upside down has no side notes to misplace.)"""
    def rank(j: Judged) -> tuple[bool, float]:
        score = j.quality.get("score") if isinstance(j.quality, dict) else None
        return j.status is Status.ok, float(score) if isinstance(score, (int, float)) else 0.0

    return rank(a) > rank(b)
