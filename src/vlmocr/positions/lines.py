"""Positions from line boxes whose words have no boxes of their own (a PDF's text layer gives
runs of text on a line): each line's words laid across its box by their share of its letters —
exact to the line, close to the word."""

from __future__ import annotations

from ..runfolder.record import Line, Positions, WordBox
from .geometry import Step, box_back


def spread(box: tuple[float, float, float, float], text: str) -> list[WordBox]:
    """The words of `text` across `box`, each by its letters (a space counts as one)."""
    words = text.split()
    if not words:
        return []
    x0, y0, x1, y1 = box
    total = sum(len(w) for w in words) + len(words) - 1
    step = (x1 - x0) / max(total, 1)
    out: list[WordBox] = []
    x = x0
    for w in words:
        end = x + step * len(w)
        out.append((round(x), round(y0), max(round(x) + 1, round(end)), max(round(y0) + 1, round(y1)), None, w))
        x = end + step
    return out


def text_layer_positions(size: tuple[float, float], rotation: int,
                         rects: list[tuple[tuple[float, float, float, float], str]], scale: float) -> Positions | None:
    """A PDF page's text-layer rectangles (render.text_layer_lines: points from the top left of
    the unrotated page) as positions on the page as shown — turned by its /Rotate — in pixels at
    `scale` pixels a point (the run's dpi / 72)."""
    if not rects:
        return None
    width, height = size[0] * scale, size[1] * scale
    shown_w, shown_h = (height, width) if rotation % 180 else (width, height)
    # Shown = stored turned clockwise by `rotation`; turned back counter-clockwise by it, the
    # stored page: a box on the stored page maps back to the shown one (geometry.box_back).
    steps = [Step("turn", rotation % 360, round(shown_w), round(shown_h))] if rotation % 360 else []
    lines = []
    for (x0, y0, x1, y1), text in rects:
        box = box_back((x0 * scale, y0 * scale, x1 * scale, y1 * scale), steps, round(shown_w), round(shown_h))
        # A line that runs across the page as shown (however the page is stored) is spread across
        # it; one that runs down it (text set sideways) along its height.
        across = (box[2] - box[0]) >= (box[3] - box[1]) or len(text.strip()) <= 1
        words = spread(box, text) if across else _spread_down(box, text, upwards=rotation % 360 == 270)
        if words:
            lines.append(Line(box=box, words=words))
    return Positions(width=round(shown_w), height=round(shown_h), source="textlayer", lines=lines) if lines else None


def _spread_down(box: tuple[int, int, int, int], text: str, upwards: bool) -> list[WordBox]:
    """Words of a line that runs down the page as shown (upwards: from the bottom)."""
    x0, y0, x1, y1 = box
    along = spread((y0, x0, y1, x1), text)  # laid out along y, then x and y swapped back
    words: list[WordBox] = [(w[1], w[0], w[3], w[2], w[4], w[5]) for w in along]
    if upwards:
        words = [(a, y0 + y1 - d, c, y0 + y1 - b, conf, t) for (a, b, c, d, conf, t) in words]
    return words
