"""Is the reading order of a page's lines in doubt? An engine that reads a page block by block
reads a column of short lines beside the body — margin headings ("Begrebet Jøder." beside the
paragraph it heads), the numbers of a list set apart from their items ("1)" … "5)") — as a block
of its own, before or after the body, not where each belongs. Every word is read, the quality
signal passes it, and the text is out of order (BENCHMARKS.md, "Side notes": two of Tesseract's
three bad development pages the signal passed). The lines say so themselves: short lines
beside body lines, at their height, read far from them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..runfolder.flags import Flag
from ..runfolder.record import Line, Positions

# A reading's flag (engines/base.py names the others): lines beside the body, read apart from it.
SIDE_NOTES = Flag.side_notes.of()  # a flag, and the signal's count of them

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


# Columns (an engine that joins what lies at one height into one line — RapidOCR — reads a page
# of two columns across both, line by line: the page's words, scored well, in no order a reader
# would follow). Two columns show as rows of text with a wide gap at one place across the page.
# A row's two pieces must each be a line of text, this many times wider than the page's line
# height (a number or a label beside a line is no column: a table of contents keeps its rows) ...
_COLUMN_TEXT = 4.0
# ... the gap between them at least one line height (a tab inside a line is narrower: measured
# from the fragments' own boxes) ...
_GUTTER = 1.0
# ... and so many rows must share the gap: a form's few label-and-value rows are no columns.
MIN_ROWS = 5
# Of the boxes at the gutter's heights, at most this share may cross it (a heading over both
# columns does; a page of single-column lines with a few tabbed ones mostly does).
_CROSSING = 0.1


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def column_gutter(extents: Sequence[tuple[float, float, float, float]]) -> float | None:
    """The x of the gap between two columns of text on a page of boxes (x0, y0, x1, y1), or None
    when the page is not set in two columns: MIN_ROWS rows or more whose two lines of text lie
    either side of a gap at least a line height wide at that x, and few boxes across it."""
    if len(extents) < 2 * MIN_ROWS:
        return None
    line = _median([y1 - y0 for _, y0, _, y1 in extents]) or 1.0
    wide = [e for e in extents if e[2] - e[0] >= _COLUMN_TEXT * line]
    gaps: list[tuple[float, float, float, float]] = []  # (gap x0, gap x1, row y0, row y1)
    for a in wide:
        right = [b for b in wide if b[0] - a[2] >= _GUTTER * line and min(a[3], b[3]) > max(a[1], b[1])]
        if right:
            b = min(right, key=lambda b: b[0])  # its nearest neighbour to the right at its height
            gaps.append((a[2], b[0], min(a[1], b[1]), max(a[3], b[3])))
    if len(gaps) < MIN_ROWS:
        return None
    # The x inside the most gaps (a sweep over their edges).
    edges = sorted([(g[0], 1) for g in gaps] + [(g[1], -1) for g in gaps], key=lambda e: (e[0], -e[1]))
    best, count, at = 0, 0, 0.0
    for i, (x, step) in enumerate(edges):
        count += step
        if step > 0 and count > best:
            nxt = edges[i + 1][0] if i + 1 < len(edges) else x
            best, at = count, (x + nxt) / 2
    rows = [g for g in gaps if g[0] < at < g[1]]
    if len(rows) < MIN_ROWS:
        return None
    top, bottom = min(g[2] for g in rows), max(g[3] for g in rows)
    among = [e for e in extents if e[1] < bottom and e[3] > top]
    crossing = sum(1 for e in among if e[0] < at < e[2])
    return at if crossing <= _CROSSING * len(among) else None


def column_keys(extents: Sequence[tuple[float, float, float, float]], gutter: float) -> list[tuple[int, int]]:
    """Each box's place in reading order on a page of two columns split at `gutter`: (band, side)
    — the boxes across the gutter (headings over both columns) cut the page into bands read top to
    bottom; in each, the left column, then the right, then the box across that ends it (side 2)."""
    across = sorted((e[1] + e[3]) / 2 for e in extents if e[0] < gutter < e[2])
    keys = []
    for x0, y0, x1, y1 in extents:
        cy = (y0 + y1) / 2
        band = sum(1 for c in across if c < cy)
        if x0 < gutter < x1:
            keys.append((band, 2))  # it ends the band above it (the boxes across above it: its own number)
        else:
            keys.append((band, 0 if (x0 + x1) / 2 < gutter else 1))
    return keys
