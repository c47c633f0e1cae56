"""Contact sheets: small labelled thumbnails of every page, so a person sees the scans.

One PNG per document, or per block of `block` pages (`<doc_id>.p0001-0024.png`). Each cell
shows the page at a low resolution (rendered through `render.render_page` with a small longest
side, never at full size), its number, and flags: "text layer", "blank", "no text" / "unusable text", "bad",
"rotN" (the page or EXIF says it is rotated), "rotated?" (landscape among portrait pages),
"spread?" (a double-width page). The frame colour repeats the class (see LEGEND)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from PIL import Image, ImageDraw, ImageFont

from ..exceptions import BadInput
from ..files import atomic_file
from ..inputs.render import Sizing, is_blank, render_page

if TYPE_CHECKING:
    from .facts import PageFacts

THUMB = 200  # longest side of a thumbnail, px
# Pages are rendered a little larger than shown, to tell sparse small type from blank paper.
CHECK_SIDE = 320
# render.is_blank looks for pixels darker than mid-grey, which a few lines of small type on a
# 300 px rendering no longer has (they blur to light grey); a page it calls blank is only
# flagged when, in addition, less than this share of pixels is clearly darker than the paper.
MAX_BLANK_INK = 0.001
COLS = 6
MARGIN = 8
CELL_W = THUMB + 2 * MARGIN
LABEL_H = 36
CELL_H = THUMB + LABEL_H + 2 * MARGIN
HEADER_H = 30
COLOURS = {
    "text": (30, 140, 60),
    "image": (110, 110, 110),
    "blank": (230, 150, 20),
    "other": (40, 90, 200),
    "bad": (200, 30, 30),
    "": (160, 160, 160),
}
LEGEND = "frame: green=text layer  grey=scan  orange=blank  blue=no text  red=unreadable"


def sheet_size(pages_in_sheet: int) -> tuple[int, int]:
    """Width and height in px of a sheet holding this many pages."""
    rows = max(1, math.ceil(pages_in_sheet / COLS))
    return COLS * CELL_W, HEADER_H + rows * CELL_H


def sheet_name(doc_id: str, first: int, last: int, pages: int, block: int) -> str:
    if pages <= block:
        return f"{doc_id}.png"
    return f"{doc_id}.p{first:04d}-{last:04d}.png"


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType
        return ImageFont.load_default()


def looks_blank(img: Image.Image) -> bool:
    """Blank paper: render.is_blank, and no faint ink either (see MAX_BLANK_INK)."""
    if not is_blank(img):
        return False
    g = img.convert("L")
    hist = g.histogram()
    total = sum(hist)
    paper, seen = 255, 0
    for level, count in enumerate(hist):  # the median grey level is the paper
        seen += count
        if seen * 2 >= total:
            paper = level
            break
    ink = sum(hist[: max(0, paper - 60)])
    return ink / total < MAX_BLANK_INK


def small_render(path: Path, page: int, side: int = CHECK_SIDE) -> Image.Image:
    """A low-resolution rendering of one page (PDF page or image frame), as displayed."""
    return render_page(path, page, Sizing(dpi=None, longest_side=side, max_pixels=side * side)).image


def _cell(draw: ImageDraw.ImageDraw, sheet: Image.Image, x: int, y: int, facts: "PageFacts",
          thumb: Image.Image | None, font, bold) -> None:
    colour = COLOURS.get(facts.kind, COLOURS[""])
    if thumb is not None:
        tx = x + MARGIN + (THUMB - thumb.width) // 2
        ty = y + MARGIN + (THUMB - thumb.height) // 2
        sheet.paste(thumb.convert("RGB"), (tx, ty))
        draw.rectangle([tx - 2, ty - 2, tx + thumb.width + 1, ty + thumb.height + 1], outline=colour, width=3)
    else:
        x0, y0 = x + MARGIN + 20, y + MARGIN + 20
        x1, y1 = x + MARGIN + THUMB - 20, y + MARGIN + THUMB - 20
        draw.rectangle([x0, y0, x1, y1], outline=colour, width=3)
        draw.line([x0, y0, x1, y1], fill=colour, width=3)
        draw.line([x0, y1, x1, y0], fill=colour, width=3)
    ly = y + MARGIN + THUMB + 4
    draw.text((x + MARGIN, ly), f"p. {facts.page}", fill=(0, 0, 0), font=bold)
    flags = facts.flags()
    if facts.dpi and facts.kind == "image":
        flags.append(f"{facts.dpi:.0f} dpi" + (" (assumed)" if facts.dpi_assumed else ""))
    draw.text((x + MARGIN, ly + 17), " · ".join(flags), fill=colour, font=font)


def write_sheets(out_dir: Path, doc_id: str, path: Path, kind: str, facts: Sequence["PageFacts"],
                 block: int = 24) -> list[Path]:
    """Render the sheets of one document; marks scanned blank paper as `blank` in `facts`."""
    font, bold = _font(12), _font(14)
    written: list[Path] = []
    n = len(facts)
    block = max(1, block)
    for start in range(0, n, block):
        chunk = facts[start:start + block]
        sheet = Image.new("RGB", sheet_size(len(chunk)), (255, 255, 255))
        draw = ImageDraw.Draw(sheet)
        first, last = chunk[0].page, chunk[-1].page
        draw.rectangle([0, 0, sheet.width, HEADER_H - 4], fill=(235, 235, 235))
        draw.text((MARGIN, 7), f"{doc_id}   pages {first}-{last} of {n}   ({kind})", fill=(0, 0, 0), font=bold)
        lw = draw.textlength(LEGEND, font=font)
        draw.text((sheet.width - lw - MARGIN, 9), LEGEND, fill=(90, 90, 90), font=font)
        for i, f in enumerate(chunk):
            thumb = None
            if f.kind != "bad":
                try:
                    thumb = small_render(path, f.page)
                except BadInput as exc:
                    f.kind, f.error = "bad", exc.reason
                if thumb is not None:
                    if f.kind in ("image", "other") and looks_blank(thumb):
                        f.kind = "blank"
                    thumb.thumbnail((THUMB, THUMB), Image.Resampling.LANCZOS)
            row, col = divmod(i, COLS)
            _cell(draw, sheet, col * CELL_W, HEADER_H + row * CELL_H, f, thumb, font, bold)
        target = out_dir / sheet_name(doc_id, first, last, n, block)
        with atomic_file(target) as tmp:
            sheet.save(tmp, format="PNG", optimize=False, compress_level=6)
        written.append(target)
    return written
