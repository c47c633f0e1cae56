"""Is the reading order of a page's lines in doubt? An engine that reads a page block by block
reads a column of short lines beside the body — margin headings ("Begrebet Jøder." beside the
paragraph it heads), the numbers of a list set apart from their items ("1)" … "5)") — as a block
of its own, before or after the body, not where each belongs. Every word is read, the quality
signal passes it, and the text is out of order (BENCHMARKS.md, "Side notes": two of Tesseract's
three bad pages of ../shared/gt the signal passed). The lines say so themselves: short lines
beside body lines, at their height, read far from them."""

from __future__ import annotations

from dataclasses import dataclass

from ..runfolder.record import Line, Positions

# A reading's flag (engines/base.py names the others): lines beside the body, read apart from it.
SIDE_NOTES = "side_notes"

# So many side notes on one side of the body make an order in doubt. One or two are a label
# beside a value ("REMISE DES RECOMPENSES:" beside its paragraph, tapus_btv1b10583138r) or a
# stamp, and cost a line's place, not the page's.
MIN_NOTES = 3
# Lines are at one height when they overlap by this share of the lower one's height.
_SAME_HEIGHT = 0.5
# A side note is at most this share of its body line's width ...
_NARROW = 0.5
# ... and at least this share of its height: smaller print beside the body — line numbers,
# a manuscript's folio marks in an edition's gutter (zonaras: 25 px marks beside 60 px lines) — is
# an apparatus, not text out of place.
_SAME_PRINT = 0.5
# A side note stands alone in its column: no line of its own column nearer above or below it than
# this many of its heights (the last, short line of a paragraph in a two-column page has its
# paragraph's line just above it).
_ALONE = 1.0


@dataclass(frozen=True)
class _Box:
    index: int
    x0: int
    y0: int
    x1: int
    y1: int
    chars: int
    alnum: bool
    number: bool

    @property
    def height(self) -> int:
        return max(self.y1 - self.y0, 1)

    @property
    def width(self) -> int:
        return max(self.x1 - self.x0, 1)


def _box(i: int, line: Line) -> _Box:
    text = " ".join(w[5] for w in line.words)
    x0, y0, x1, y1 = line.box
    return _Box(i, x0, y0, x1, y1, len(text), any(c.isalnum() for c in text), text.strip().isdigit())


def _beside(a: _Box, b: _Box) -> bool:
    """At one height, side by side (no horizontal overlap)."""
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return overlap >= _SAME_HEIGHT * min(a.height, b.height) and (a.x1 <= b.x0 or b.x1 <= a.x0)


def _alone(note: _Box, boxes: list[_Box]) -> bool:
    """No line of the note's own column (overlapping its x-range) lies close above or below it."""
    for other in boxes:
        if other.index == note.index or other.x1 <= note.x0 or note.x1 <= other.x0:
            continue
        gap = max(other.y0 - note.y1, note.y0 - other.y1)
        if gap < _ALONE * note.height:
            return False
    return True


def side_notes(positions: Positions | None) -> list[int]:
    """The lines (their indices in reading order) that are side notes read out of place: each
    short, of the body's print size, alone in its column, beside a longer line it is not read next
    to — when at least MIN_NOTES of them lie on one side of the body; else none."""
    if positions is None or len(positions.lines) < MIN_NOTES * 2:
        return []
    boxes = [_box(i, line) for i, line in enumerate(positions.lines)]
    left: set[int] = set()
    right: set[int] = set()
    for a in boxes:
        if not a.alnum or a.number:
            # A speck or a rule beside a line is not a note; nor is a bare number in the margin
            # (a verse's line numbers "5", "10", a page reference): an apparatus, not text out of
            # place. A list's "1)" or "2." belongs to its item.
            continue
        for b in boxes:
            if (abs(a.index - b.index) <= 1 or b.chars <= a.chars or not _beside(a, b)
                    or a.width > _NARROW * b.width or a.height < _SAME_PRINT * b.height):
                continue
            if _alone(a, boxes):
                (left if a.x1 <= b.x0 else right).add(a.index)
            break
    notes = max(left, right, key=len)
    return sorted(notes) if len(notes) >= MIN_NOTES else []
