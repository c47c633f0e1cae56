"""What a page image means, as the 8-bit dark-on-light L or RGB image every engine is given:
the same for RapidOCR, Tesseract and a VLM, whatever the scanner wrote.

Pillow's own conversions keep the bits, not the meaning: a 16-bit grey master (I;16) converted
to L clips every value above 255, so the page turns pure white; dropping the alpha of a PNG whose
text lives in its transparency leaves a black page; a negative (microfilm, photostat) is light
text on a dark ground, which the blank test and most engines take for an empty page. Each of
them came back `ok` and empty. Here:

* high bit depths (I;16*, I, F) are stretched from their darkest to their lightest values
  (0.5 and 99.5 percentiles, so a speck does not set the scale), not clipped (floats, often in
  [0, 1], always; integers only when they go beyond 8 bits);
* alpha (LA, RGBA, PA, a palette's transparency) is composited onto white paper;
* 1-bit, palette, CMYK and the other modes are converted by Pillow (their meaning survives);
* a page whose ground is dark and whose marks are light is inverted (``dark_on_light``).

Every change is named in the record's flags (``scaled_16bit``, ``alpha_on_white``,
``inverted``), and an image that was changed is never handed to an engine as the file itself."""

from __future__ import annotations

from PIL import Image, ImageOps

from ..runfolder.flags import Flag

HIGH_DEPTH = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I;32", "I", "F"})
ALPHA = frozenset({"LA", "La", "RGBA", "RGBa", "PA"})
GREY = frozenset({"1", "L", "LA", "La", "I;16", "I;16L", "I;16B", "I;16N", "I;32", "I", "F"})
FLAG_SCALED = Flag.scaled_16bit.of()
FLAG_ALPHA = Flag.alpha_on_white.of()
FLAG_INVERTED = Flag.inverted.of()

# Polarity: a page is a negative when its ground (the median) is this dark, most of it lies near
# the ground (a page, not a photograph's spread of greys), and its marks are lighter than it.
DARK_GROUND = 100
NEAR_GROUND = 48
GROUND_SHARE = 0.55
MIN_MARKS = 0.0005


def engine_mode(img: Image.Image) -> tuple[Image.Image, list[str]]:
    """``img`` as L (grey sources) or RGB, by what its pixels mean; flags name what was done."""
    mode = img.mode
    if mode in ("L", "RGB"):
        return img, []
    if mode in HIGH_DEPTH:
        if mode != "F" and not _beyond_8_bits(img):  # 8-bit values in a wide integer mode: as they are
            return img.convert("L"), []
        return _stretch(img), [FLAG_SCALED]
    if mode == "P" and "transparency" in img.info:
        img, mode = img.convert("RGBA"), "RGBA"
    if mode in ALPHA:
        alpha = img.getchannel("A")
        lo, _ = alpha.getextrema()
        target = "L" if mode in GREY else "RGB"
        if lo == 255:  # opaque throughout: the alpha says nothing
            return img.convert(target), []
        paper = Image.new("RGBA", img.size, (255, 255, 255, 255))
        return Image.alpha_composite(paper, img.convert("RGBA")).convert(target), [FLAG_ALPHA]
    return img.convert("L" if mode in GREY else "RGB"), []


def _beyond_8_bits(img: Image.Image) -> bool:
    lo, hi = img.getextrema()  # one band: (min, max) numbers
    return float(lo) < 0 or float(hi) > 255  # type: ignore[arg-type]


def _stretch(img: Image.Image) -> Image.Image:
    import numpy as np

    arr = np.asarray(img, dtype=np.float32)
    step = max(1, int(max(arr.shape) // 512))
    sample = arr[::step, ::step]
    lo, hi = (float(v) for v in np.percentile(sample, (0.5, 99.5)))
    if hi - lo < 1e-6:  # one value throughout: a blank frame, white if it is the lightest there is
        lo, hi = float(arr.min()), float(arr.max())
        if hi - lo < 1e-6:
            return Image.new("L", img.size, 255 if hi > 0 else 0)
    out = np.clip((arr - lo) * (255.0 / (hi - lo)), 0, 255).round().astype(np.uint8)
    return Image.fromarray(out, mode="L")


def dark_on_light(img: Image.Image) -> tuple[Image.Image, list[str]]:
    """``img`` (L or RGB) with dark marks on a light ground: a negative page is inverted."""
    # Cheap on every page (the feed rate, BENCHMARKS.md): a sample of the pixels (nearest: marks
    # are kept as they are, not averaged into the ground), and for RGB the green band's histogram
    # (the closest to luminance) instead of a conversion.
    factor = max(1, max(img.size) // 512)
    small = img.resize((max(1, img.width // factor), max(1, img.height // factor)), Image.Resampling.NEAREST) \
        if factor > 1 else img
    hist = small.histogram()
    if small.mode == "RGB":
        hist = hist[256:512]
    elif small.mode != "L":
        hist = small.convert("L").histogram()
    total = sum(hist)
    if not total:
        return img, []
    seen, ground = 0, 255
    for i, n in enumerate(hist):
        seen += n
        if seen >= total / 2:
            ground = i
            break
    if ground >= DARK_GROUND:
        return img, []
    near = sum(hist[max(0, ground - NEAR_GROUND): ground + NEAR_GROUND + 1]) / total
    marks = sum(hist[min(255, ground + 60):]) / total
    if near < GROUND_SHARE or marks < MIN_MARKS:
        return img, []  # a dark photograph, or a dark page with nothing on it
    return ImageOps.invert(img), [FLAG_INVERTED]
