"""Which way up a page is: Tesseract's orientation detection (engines/osd.py) checked by RapidOCR's
line classifier (engines/upright.py), and the cheap look that decides whether to ask at all. The
worker turns a page by it before or after a reading; the VLM reader before it sends a page."""

from __future__ import annotations

from typing import NamedTuple

from PIL import Image

from ..runfolder.flags import Flag

# Degrees counter-clockwise → the transposition that turns a page image so (VlmHints.rotate).
ROTATIONS = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}


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
        return Upright(turn, osd.turn_confidence, Flag.lines_turned.of(turn=turn, score=f"{score:.2f}"), osd.turn, "lines")
    return Upright(0, osd.turn_confidence, None, osd.turn)


# A page whose line pieces score below UPRIGHT_ABOVE as it lies is not clearly upright to the line
# classifier: OSD is asked (and checked by the classifier, so a false alarm costs OSD's second, not
# a wrong turn). The classifier is sure of typescripts and weak on Fraktur and Greek (scores near 0
# both ways), where OSD was right on every page. On the 100 development pages: 11 upright pages
# ask OSD (10 of them Fraktur or Greek), 95 of 100 upside-down pages are seen (at −0.05: 1 and 84;
# at 0.2: 24 and 98; BENCHMARKS.md, "The VLM path checks a document's first page").
UPRIGHT_ABOVE = 0.1
# Scripts the line classifier cannot tell the way up of (PP-OCR's model, trained on Latin and
# Chinese print: Fraktur and Greek score near 0 both ways, an upside-down Greek page of
# the development pages +0.24 at the VLM's size), where OSD was sure and right on all 160 cases: a page
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


# OSD not sure, the readings decide: a page whose reading failed with an engine confidence this
# low (an upside-down page read by RapidOCR is fragments at ~0.6; a hard page read upright keeps
# ~0.85: the development pages, benchmarks/bench_pages_as_scanned.py) is read once upside down, and kept
# so only if that reading is `ok`. A page whose lines ran down is read turned both ways.
BLIND_TURN_BELOW = 0.75
CONFIDENCE_GAIN = 0.25


def on_its_side(up: Upright, img: Image.Image) -> bool:
    """OSD sure of a quarter turn and the ink saying the page's lines run down it: two witnesses
    that the page lies on its side. Its turned reading is then kept even when the signal scores
    it no higher: Tesseract reads a page on its side by itself, words whose order it loses (a Czech
    carbon copy among the development pages: 43 % CER as it lay, scored 0.882; turned 7.9 %, scored 0.873)."""
    from ..engines.osd import looks_sideways

    return up.how == "osd" and up.turn in (90, 270) and looks_sideways(img)
