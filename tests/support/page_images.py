"""Page images as archives and scanners deliver them (issue 32): a few words of text drawn into
every Pillow mode and bit depth — 16-bit grey, text in the alpha channel, a negative, bilevel G4,
a palette — for the tests that prove no such page comes back `ok` and empty."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")  # fonts-dejavu-core
WORDS = ("The quick brown fox", "jumps over the lazy dog")


def text_page(lines: tuple[str, ...] = WORDS, size: tuple[int, int] = (900, 300), px: int = 40) -> Image.Image:
    """Black words on white, mode L."""
    font = ImageFont.truetype(str(FONT), px) if FONT.exists() else ImageFont.load_default(px)
    img = Image.new("L", size, 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((40, 50 + i * int(px * 2.2)), line, font=font, fill=0)
    return img


def as_mode(page: Image.Image, mode: str, *, inverted: bool = False) -> Image.Image:
    """``page`` (black on white, L) in ``mode`` as a scanner would store it: 16-bit and 32-bit
    values over their whole range, float in [0, 1], ``alpha-only`` black RGB with the text in
    the alpha channel; ``inverted``: white text on black."""
    grey = Image.eval(page, lambda v: 255 - v) if inverted else page
    if mode == "I;16":
        return Image.fromarray(np.asarray(grey).astype(np.uint16) * 257)
    if mode == "I":
        return Image.fromarray((np.asarray(grey).astype(np.int64) * 8421504).astype(np.int32))  # 31 bits
    if mode == "F":
        return Image.fromarray(np.asarray(grey).astype(np.float32) / 255.0)
    if mode == "alpha-only":
        out = Image.new("RGBA", grey.size, (0, 0, 0, 0))
        out.putalpha(Image.eval(page, lambda v: 255 - v))  # ink opaque, paper transparent
        return out
    if mode == "LA":
        return Image.merge("LA", (grey, Image.new("L", grey.size, 255)))
    if mode == "RGBA":
        return grey.convert("RGBA")
    if mode == "1":
        return grey.convert("1")
    if mode == "P":
        return grey.convert("RGB").convert("P")
    return grey.convert(mode)  # L, RGB, CMYK


def hostile_corpus(folder: Path) -> dict[str, str]:
    """The five files of issue 32's corpus: {file name: what it is}."""
    folder.mkdir(parents=True, exist_ok=True)
    page = text_page()
    as_mode(page, "I;16").save(folder / "grey16.tif", compression="tiff_lzw")
    as_mode(page, "alpha-only").save(folder / "alpha.png")
    as_mode(page, "L", inverted=True).save(folder / "negative.png")
    page.convert("1").save(folder / "bilevel.tif", compression="group4")
    as_mode(page, "P").save(folder / "palette.png")
    return {"grey16.tif": "16-bit grey TIFF", "alpha.png": "text in the alpha channel",
            "negative.png": "white on black", "bilevel.tif": "bilevel G4 TIFF", "palette.png": "palette PNG"}
