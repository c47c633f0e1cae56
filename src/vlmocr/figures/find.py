"""Finding figures in grounded page records and cropping them (the crops run in pool workers).

Grounded page records carry ``blocks`` ({type, bbox [x1, y1, x2, y2] on a 0–1000 grid, text});
a block whose type is image/figure/chart/picture is a figure. Its number on the page (``figure``,
1-based, in block order, counting every figure block whatever the filters) names its crop,
``RUN/figures/<doc_id>/p<page>-f<figure>.png``, so a person can check what was sent."""


from __future__ import annotations

import base64
import hashlib
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import BadInput
from ..files import write_bytes_atomic
from ..inputs.render import DEFAULT_MAX_PIXELS, Sizing, encode, is_blank, render_page
from ..runfolder.record import Row
from ..runfolder.rundir import RunDir
from ..runfolder.store import iter_rows
from ..text.postprocess import is_figure_block

FIGURES_DIR = "figures"
# Anchors (where a figure sits in the page text) are one line of the neighbouring blocks.
ANCHOR_CHARS = 200
MIN_ANCHOR_CHARS = 4


# ============================================================================================
# Finding figures in page records
# ============================================================================================


def normalize_bbox(raw: Any, scale: tuple[float, float] | None = None) -> list[float] | None:
    """[x1, y1, x2, y2] on the 0–1000 grid, ordered and clamped; None when unusable.

    ``scale`` = (width, height) when the coordinates are pixels of the image the model saw
    (dots.ocr), converted to the grid here."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 4:
        return None
    try:
        x1, y1, x2, y2 = (float(v) for v in raw)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        return None
    if scale is not None:
        w, h = scale
        x1, x2, y1, y2 = x1 / w * 1000, x2 / w * 1000, y1 / h * 1000, y2 / h * 1000
    x1, x2 = sorted((min(max(x1, 0.0), 1000.0), min(max(x2, 0.0), 1000.0)))
    y1, y2 = sorted((min(max(y1, 0.0), 1000.0), min(max(y2, 0.0), 1000.0)))
    if x2 - x1 <= 0 or y2 - y1 <= 0:
        return None
    return [_num(x1), _num(y1), _num(x2), _num(y2)]


def _num(v: float) -> float | int:
    v = round(v, 3)
    return int(v) if float(v).is_integer() else v


def pixel_boxes(bbox: list[float], width: int, height: int, margin: float) -> tuple[list[int], list[int]]:
    """(figure box, crop box) in pixels of a ``width`` × ``height`` page image for a 0–1000
    ``bbox``: the figure box rounded outwards, the crop box that plus ``margin`` (a share of the
    longer side), both clamped to the image and at least one pixel wide."""
    x1 = math.floor(bbox[0] / 1000 * width)
    y1 = math.floor(bbox[1] / 1000 * height)
    x2 = math.ceil(bbox[2] / 1000 * width)
    y2 = math.ceil(bbox[3] / 1000 * height)
    x1, x2 = min(max(x1, 0), width - 1), min(max(x2, 1), width)
    y1, y2 = min(max(y1, 0), height - 1), min(max(y2, 1), height)
    x2, y2 = max(x2, x1 + 1), max(y2, y1 + 1)
    m = round(margin * max(width, height))
    crop = [max(0, x1 - m), max(0, y1 - m), min(width, x2 + m), min(height, y2 + m)]
    return [x1, y1, x2, y2], crop


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:ANCHOR_CHARS]
    return ""


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[-ANCHOR_CHARS:]
    return ""


@dataclass
class Figure:
    """One figure block of a final page record."""

    doc_id: str
    page: int
    figure: int  # 1-based among the page's figure blocks, in block order
    block_index: int  # 0-based index in the page record's blocks
    type: str
    bbox: list[float]  # 0–1000 grid
    source: str
    page_key: str | None
    anchor: dict[str, str]  # own text, the line before and the line after, to place it in the text
    page_width: int | None = None  # of the image the page was read from (for estimates)
    page_height: int | None = None
    page_dpi: float | None = None

    @property
    def area(self) -> float:
        """Share of the page area."""
        x1, y1, x2, y2 = self.bbox
        return (x2 - x1) * (y2 - y1) / 1_000_000

    @property
    def ident(self) -> tuple[str, int, int]:
        return self.doc_id, self.page, self.figure

    @property
    def crop_rel(self) -> str:
        return crop_path(self.doc_id, self.page, self.figure)


def crop_path(doc_id: str, page: int, figure: int) -> str:
    """Where a figure's crop lives, relative to the run directory."""
    return f"{FIGURES_DIR}/{doc_id}/p{page}-f{figure}.png"


def pixel_grounding(run_dir: Path) -> bool:
    """Were the page's boxes pixels of the sent image (dots.ocr's JSON) rather than 0–1000?"""
    post = RunDir(run_dir).run_info().key_material.get("postprocess")
    return isinstance(post, dict) and post.get("grounding_format") == "dots-json"


def page_figures(rec: Row, pixel_grounding: bool = False) -> list[Figure]:
    """Every figure block of one page record that has a usable box, numbered in block order
    (a figure without a box keeps its number: the others' crops keep their names)."""
    blocks = rec.blocks or ()
    scale = None
    if pixel_grounding and rec.width and rec.height:
        scale = (float(rec.width), float(rec.height))
    texts = [b.text for b in blocks]
    out: list[Figure] = []
    number = 0
    for i, block in enumerate(blocks):
        if not is_figure_block(block.model_dump()):
            continue
        number += 1
        bbox = normalize_bbox(block.bbox, scale)
        if bbox is None:
            continue
        before = next((_last_line(t) for t in reversed(texts[:i]) if t.strip()), "")
        after = next((_first_line(t) for t in texts[i + 1:] if t.strip()), "")
        out.append(Figure(
            doc_id=rec.doc_id, page=rec.page, figure=number, block_index=i,
            type=block.type, bbox=bbox, source=rec.source,
            page_key=rec.key, anchor={"text": _first_line(texts[i]), "before": before, "after": after},
            page_width=rec.width, page_height=rec.height, page_dpi=rec.dpi,
        ))
    return out


def count_figure_blocks(rec: Row) -> int:
    return sum(1 for b in rec.blocks or () if is_figure_block(b.model_dump()))


def find_figures(run_dir: Path) -> tuple[list[Figure], int]:
    """(figures with a usable box, figure blocks without one) in the final page records, in
    (doc_id, page, figure) order. Streams pages.jsonl keeping only the figures, not the texts."""
    pixel = pixel_grounding(run_dir)
    latest: dict[tuple[str, int], tuple[list[Figure], int]] = {}
    for rec in iter_rows(RunDir(run_dir).pages):
        ident = rec.page_id
        found = page_figures(rec, pixel) if ident[1] > 0 and rec.blocks else []
        no_box = count_figure_blocks(rec) - len(found) if rec.blocks else 0
        if found or no_box:
            latest[ident] = (found, no_box)
        else:
            latest.pop(ident, None)  # the last record of the page has no figures
    figures: list[Figure] = []
    for ident in sorted(latest):
        figures += latest[ident][0]
    return figures, sum(n for _, n in latest.values())


# ============================================================================================
# Cropping (runs in pool workers)
# ============================================================================================


def _data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _cap(img: Any, max_pixels: int | None) -> tuple[Any, list[str]]:
    from PIL import Image

    if max_pixels and img.width * img.height > max_pixels:
        s = (max_pixels / (img.width * img.height)) ** 0.5
        size = (max(1, int(img.width * s)), max(1, int(img.height * s)))
        return img.resize(size, Image.Resampling.LANCZOS), ["crop_downscaled"]
    return img, []


def crop_page(spec: dict[str, Any]) -> dict[str, Any]:
    """Render one page once and cut out its figures; each crop is saved (PNG, atomically) and
    returned as a data URL with its boxes, size and sha256. ``{"error": reason}`` when the page
    cannot be rendered.

    spec: path, page, dpi, margin, crop_max_pixels, crops: [{figure, bbox, out}]."""
    t0 = time.perf_counter()
    try:
        rendered = render_page(Path(spec["path"]), int(spec["page"]),
                               Sizing(dpi=float(spec["dpi"]), longest_side=None, max_pixels=DEFAULT_MAX_PIXELS))
    except BadInput as exc:
        return {"error": exc.reason, "bad_input": True}
    except Exception as exc:  # noqa: BLE001  (a renderer failure: transient as far as we know)
        return {"error": f"{type(exc).__name__}: {exc}"[:500], "bad_input": False}
    img = rendered.image
    width, height = img.size
    crops = []
    for c in spec["crops"]:
        box, crop_box = pixel_boxes(c["bbox"], width, height, float(spec["margin"]))
        left, top, right, bottom = crop_box
        crop, flags = _cap(img.crop((left, top, right, bottom)), spec.get("crop_max_pixels"))
        data = encode(crop, "png")
        out = Path(c["out"])
        out.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(out, data)
        crops.append({
            "figure": c["figure"], "box_px": box, "crop_px": crop_box, "width": crop.width,
            "height": crop.height, "sha256": hashlib.sha256(data).hexdigest(), "image": _data_url(data),
            "blank": is_blank(crop), "flags": list(rendered.flags) + flags,
        })
    return {"dpi": rendered.dpi, "page_width": width, "page_height": height, "crops": crops,
            "seconds": time.perf_counter() - t0}


def shrink_crop(path: str, factor: float) -> dict[str, Any]:
    """The saved crop scaled by ``factor`` (a prompt over the context gets one smaller try)."""
    from PIL import Image

    with Image.open(path) as img:
        img.load()
        small = img.resize((max(16, int(img.width * factor)), max(16, int(img.height * factor))),
                           Image.Resampling.LANCZOS)
    data = encode(small, "png")
    return {"image": _data_url(data), "width": small.width, "height": small.height}


def same_box(a: Any, b: Any) -> bool:
    return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 4 and all(
        abs(float(x) - float(y)) < 0.01 for x, y in zip(a, b))


