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
                         rects: list[tuple[tuple[float, float, float, float], str]], scale: float,
                         text: str) -> Positions | None:
    """A PDF page's text-layer rectangles (render.text_layer_lines: points from the top left of
    the unrotated page) as positions on the page as shown — turned by its /Rotate — in pixels at
    `scale` pixels a point (the run's dpi / 72), in the order of the page's recorded `text`
    (PDFium lists a turned page's rectangles in another)."""
    if not rects:
        return None
    at = [text.find(r[1].strip()[:30]) for r in rects]
    rects = [rects[i] for i in sorted(range(len(rects)), key=lambda i: (at[i] < 0, at[i], i))]
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


# The scale of each grounded format's boxes (text/postprocess.py): thousandths of the image sent
# (grounding tags emit 0–999; Chandra and LightOnOCR-3 0–1000; DocTags is rescaled to 0–1000), or
# None: pixels of the image sent (dots.ocr's JSON carries no scale).
BLOCK_SCALE: dict[str, float | None] = {"tags": 999.0, "chandra-html": 1000.0, "doctags": 1000.0,
                                        "lightonocr": 1000.0, "dots-json": None}
FIGURE_TYPES = frozenset({"image", "figure", "chart", "picture"})


def block_positions(blocks: list[dict[str, object]], grounding_format: str, sent: tuple[int, int],
                    steps: list[Step], page: tuple[int, int]) -> Positions | None:
    """A grounded VLM's answer as positions: each text block's lines laid down its box
    (the block's height shared by its lines), their words across each line by their letters —
    exact to the block, close to the line and word. `sent`: the size of the image the model was
    sent; `steps`: what was done to the page before (turned, straightened), mapped back through
    to the page as rendered (`page`, its size). None without a text block with a box."""
    if grounding_format not in BLOCK_SCALE:
        return None
    scale = BLOCK_SCALE[grounding_format]
    sx, sy = (sent[0] / scale, sent[1] / scale) if scale else (1.0, 1.0)
    lines: list[Line] = []
    for b, block in enumerate(blocks):
        box, text = block.get("bbox"), block.get("text")
        if str(block.get("type") or "").lower() in FIGURE_TYPES or not isinstance(text, str) or not text.strip():
            continue
        if not isinstance(box, (list, tuple)) or len(box) != 4:
            continue
        x0, y0, x1, y1 = (float(v) for v in box)  # type: ignore[arg-type]
        rows = [row for row in text.splitlines() if row.split()]
        pitch = (y1 - y0) / len(rows)
        for k, row in enumerate(rows):
            on_sent = (x0 * sx, (y0 + k * pitch) * sy, x1 * sx, (y0 + (k + 1) * pitch) * sy)
            line_box = box_back(on_sent, steps, *page)
            words = spread(line_box, row)
            if words:
                lines.append(Line(box=line_box, words=words, block=b))
    return Positions(width=page[0], height=page[1], source=f"blocks:{grounding_format}", lines=lines) if lines else None
