"""From the image an engine read back to the page as rendered. vlmocr may turn a page (a quarter,
half or three quarters, counter-clockwise: PIL's transpositions) and straighten it (turned by
−skew about its centre, its size kept: inputs/skew.straighten) before an engine reads it; the
boxes the engine gives lie on that image. A user's viewer, a searchable PDF and the report show
the page as scanned, so every box is mapped back through those steps, last first."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..runfolder.record import Line, Positions, WordBox


@dataclass(frozen=True)
class Step:
    """One change made to the page image before it was read: `turn` (90, 180, 270 degrees
    counter-clockwise, PIL's transpose) or `skew` (straightened: turned by −`degrees`), and the
    size of the image the step was applied to."""

    kind: str
    degrees: float
    width: int
    height: int


def steps_before(turn: int | None, skew: float | None, page: tuple[int, int]) -> list[Step]:
    """What was done to a page of size `page` before it was sent or read: turned (counter-
    clockwise) by `turn`, then straightened by `skew` (its size kept) — either may be absent."""
    steps: list[Step] = []
    size = page
    if turn:
        steps.append(Step("turn", turn, *page))
        size = (page[1], page[0]) if turn % 180 else page
    if skew is not None:
        steps.append(Step("skew", skew, *size))
    return steps


def _back(step: Step, x: float, y: float) -> tuple[float, float]:
    """Where a point of the image after `step` lay before it (pixel edges, not centres)."""
    w, h = step.width, step.height
    if step.kind == "turn":
        turn = int(step.degrees) % 360
        if turn == 90:  # (x, y) → (y, w − x)
            return w - y, x
        if turn == 180:
            return w - x, h - y
        if turn == 270:  # (x, y) → (h − y, x)
            return y, h - x
        return x, y
    # straightened: the image turned by −degrees about its centre (PIL's rotate turns
    # counter-clockwise as seen; y grows downwards); back is +degrees.
    a = math.radians(step.degrees)
    cx, cy = w / 2, h / 2
    dx, dy = x - cx, y - cy
    return cx + dx * math.cos(a) + dy * math.sin(a), cy - dx * math.sin(a) + dy * math.cos(a)


def box_back(box: tuple[float, float, float, float], steps: list[Step], width: int, height: int
             ) -> tuple[int, int, int, int]:
    """A box of the image read, as the box that holds it on the page as rendered (`width` ×
    `height`), clipped to the page."""
    corners = [(box[0], box[1]), (box[2], box[1]), (box[2], box[3]), (box[0], box[3])]
    for step in reversed(steps):
        corners = [_back(step, x, y) for x, y in corners]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    x0, x1 = max(0, math.floor(min(xs))), min(width, math.ceil(max(xs)))
    y0, y1 = max(0, math.floor(min(ys))), min(height, math.ceil(max(ys)))
    return x0, y0, max(x0, x1), max(y0, y1)


def to_page(positions: Positions, steps: list[Step], width: int, height: int) -> Positions:
    """`positions` found on the image read, as they lie on the page as rendered (`width` ×
    `height`): unchanged when nothing was done to the page."""
    if not steps:
        return positions

    def word(w: WordBox) -> WordBox:
        return (*box_back(w[:4], steps, width, height), w[4], w[5])

    lines = [Line(box=box_back(line.box, steps, width, height), words=[word(w) for w in line.words],
                  block=line.block) for line in positions.lines]
    return positions.model_copy(update={"width": width, "height": height, "lines": lines})


def scaled(positions: Positions, width: int, height: int) -> Positions:
    """`positions` found on an image of another size (a page enlarged before it was read), as they
    lie on the image `width` × `height`: every box scaled by the ratio of the sizes, clipped to it."""
    if (positions.width, positions.height) == (width, height):
        return positions
    fx, fy = width / positions.width, height / positions.height

    def box(b: tuple[float, float, float, float]) -> tuple[int, int, int, int]:
        x0, y0 = max(0, math.floor(b[0] * fx)), max(0, math.floor(b[1] * fy))
        x1, y1 = min(width, math.ceil(b[2] * fx)), min(height, math.ceil(b[3] * fy))
        return x0, y0, max(x0, x1), max(y0, y1)

    lines = [Line(box=box(line.box), words=[(*box(w[:4]), w[4], w[5]) for w in line.words], block=line.block)
             for line in positions.lines]
    return positions.model_copy(update={"width": width, "height": height, "lines": lines})
