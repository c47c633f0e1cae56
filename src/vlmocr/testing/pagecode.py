"""A machine-readable page code drawn into test pages, and the text each code stands for.

Why: the fake VLM server (``openai_server.py``) must know *which* page it was sent, from the
pixels alone, so a test can tell a right answer from a swapped, duplicated or dropped page by
comparing text. Every test page therefore carries a code in its top band, and the server answers
``expected_text(code)``.

The code is a one-dimensional bar code of square modules, read along horizontal scan lines:

    [quiet] START 1 1 0 1 0 | 24 data bits | 8 CRC bits | STOP 0 1 0 1 1 [quiet]

42 modules, each 2 % of the page width, 2.5 modules tall. The reader does not rely on where the
code sits: it finds the START pattern by run lengths in each scan line, measures the module width
from the code's own ends (both are black), samples module centres and checks START, STOP and a
CRC-8. Two scan lines must agree before a code is returned, so text or scanner noise does not
produce a false code. This survives JPEG q75, grayscale, and downscaling to ~600 px.
"""

from __future__ import annotations

import functools
import io
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageColor, ImageDraw, ImageFont

__all__ = [
    "CODE_BITS",
    "MAX_CODE",
    "code_modules",
    "draw_code",
    "expected_text",
    "make_coded_image",
    "make_coded_pdf",
    "make_coded_png",
    "read_code",
    "text_top",
]

CODE_BITS = 24
CRC_BITS = 8
MAX_CODE = (1 << CODE_BITS) - 1
START = (1, 1, 0, 1, 0)
STOP = (0, 1, 0, 1, 1)
N_MODULES = len(START) + CODE_BITS + CRC_BITS + len(STOP)  # 42

# Geometry, relative to the page so the same layout works for any page size and any render DPI.
_MODULE_FRACTION_OF_WIDTH = 0.02  # 42 modules = 84 % of the width
_LEFT_FRACTION = (1.0 - N_MODULES * _MODULE_FRACTION_OF_WIDTH) / 2
_TOP_FRACTION = 0.03
_BAR_HEIGHT_MODULES = 2.5
# The reader scans this top fraction of the image only: the code lives there.
_SCAN_FRACTION = 0.35
# Decoded scan lines that must agree before a code is trusted.
_AGREEING_LINES = 2

# Common English words: a perfect reading of a test page must pass the quality signal's
# dictionary check (lorem ipsum was taken for French or Italian with half its words unknown,
# and such pages came back `suspect`).
_WORDS = (
    "the letter from our office was sent to all members of the committee last week and they "
    "agreed that the report should be printed before the next meeting in the city hall where "
    "every question about the new school and the old station will be answered by the mayor "
    "himself after a short visit to the north river bridge"
).split()


def expected_text(code: int) -> str:
    """The text a perfect reader returns for the page carrying ``code``.

    Deterministic (seeded by the code), different for every code, and short enough to draw on a
    page, so the same string serves as the page's visible text, its text layer and the fake
    server's answer.
    """
    rng = random.Random(code)
    lines = [f"PAGE {code}"]
    for _ in range(rng.randint(3, 6)):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 10))]
        lines.append(" ".join(words).capitalize() + ".")
    return "\n".join(lines)


def _crc8(data: bytes) -> int:
    """CRC-8 (poly 0x07): a misread module gives None, never the wrong page."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def code_modules(code: int) -> list[int]:
    """The 42 module values (1 = black) for ``code``, left to right."""
    if not 0 <= code <= MAX_CODE:
        raise ValueError(f"page code must be in 0..{MAX_CODE}, got {code}")
    crc = _crc8(code.to_bytes(CODE_BITS // 8, "big"))
    data = [(code >> (CODE_BITS - 1 - i)) & 1 for i in range(CODE_BITS)]
    check = [(crc >> (CRC_BITS - 1 - i)) & 1 for i in range(CRC_BITS)]
    return [*START, *data, *check, *STOP]


def _layout(width: float, height: float) -> tuple[float, float, float, float]:
    """(left, top, module, bar_height) of the code, in the page's units, origin top left."""
    module = width * _MODULE_FRACTION_OF_WIDTH
    return width * _LEFT_FRACTION, height * _TOP_FRACTION, module, module * _BAR_HEIGHT_MODULES


def _black_runs(modules: Sequence[int]) -> list[tuple[int, int]]:
    """(first module, length) of each run of black modules: one rectangle per run, no seams."""
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(modules):
        if modules[i]:
            j = i
            while j < len(modules) and modules[j]:
                j += 1
            runs.append((i, j - i))
            i = j
        else:
            i += 1
    return runs


def text_top(width: float, height: float) -> float:
    """Where page text may start (below the code and its quiet zone), top-left origin."""
    _, top, module, bar = _layout(width, height)
    return top + bar + 2 * module


def draw_code(img: Image.Image, code: int) -> None:
    """Draw ``code`` in the top band of ``img``, in place, over a white quiet zone."""
    if img.mode not in ("1", "L", "RGB", "RGBA", "LA"):
        raise ValueError(f"draw_code supports modes 1, L, LA, RGB, RGBA; got {img.mode}")
    left, top, module, bar = _layout(*img.size)
    black = ImageColor.getcolor("black", img.mode)
    white = ImageColor.getcolor("white", img.mode)
    draw = ImageDraw.Draw(img)
    # The quiet zone keeps scanner noise or page content from touching the code's ends.
    draw.rectangle(
        (left - 2 * module, top - module, left + (N_MODULES + 2) * module, top + bar + module),
        fill=white,
    )
    for start, length in _black_runs(code_modules(code)):
        x0 = round(left + start * module)
        x1 = round(left + (start + length) * module) - 1
        draw.rectangle((x0, round(top), x1, round(top + bar) - 1), fill=black)


def _decode_line(row: np.ndarray) -> int | None:
    """Decode one scan line of dark(True)/light(False) pixels, or None."""
    # Run-length encode: boundaries where the value changes.
    change = np.flatnonzero(np.diff(row.astype(np.int8))) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [row.size]))
    values = row[starts]
    lengths = ends - starts
    n = len(starts)
    for i in range(n - 3):
        if not values[i]:
            continue
        # START = 2 black, 1 white, 1 black, then a white module (possibly merged with data).
        b2, w1, b1 = lengths[i], lengths[i + 1], lengths[i + 2]
        if not (1.2 <= b2 / w1 <= 3.5 and 0.4 <= b1 / w1 <= 2.5):
            continue
        unit_guess = (b2 + w1 + b1) / 4
        if unit_guess < 2:
            continue
        x0 = starts[i]
        # The code ends with black, so its right edge is the end of a black run near x0 + 42u.
        expected_end = x0 + N_MODULES * unit_guess
        best_end = None
        for k in range(i + 2, n, 2):
            if values[k]:
                if abs(ends[k] - expected_end) <= 2.5 * unit_guess + 2 and (
                    best_end is None or abs(ends[k] - expected_end) < abs(best_end - expected_end)
                ):
                    best_end = ends[k]
                if ends[k] > expected_end + 3 * unit_guess + 2:
                    break
        if best_end is None:
            continue
        unit = (best_end - x0) / N_MODULES
        bits = []
        for m in range(N_MODULES):
            # Sample the middle half of each module: edges are blurred by JPEG and resampling.
            a = int(x0 + (m + 0.25) * unit)
            b = max(a + 1, int(x0 + (m + 0.75) * unit))
            bits.append(1 if row[a:b].mean() > 0.5 else 0)
        if tuple(bits[: len(START)]) != START or tuple(bits[-len(STOP) :]) != STOP:
            continue
        payload = bits[len(START) : len(START) + CODE_BITS]
        check = bits[len(START) + CODE_BITS : len(START) + CODE_BITS + CRC_BITS]
        code = int("".join(map(str, payload)), 2)
        if int("".join(map(str, check)), 2) == _crc8(code.to_bytes(CODE_BITS // 8, "big")):
            return code
    return None


def read_code(img: Image.Image) -> int | None:
    """The page code drawn by ``draw_code`` (or ``make_coded_pdf``) in ``img``, or None."""
    gray = np.asarray(img.convert("L"), dtype=np.uint8)
    height = gray.shape[0]
    scan_rows = max(1, int(height * _SCAN_FRACTION))
    # A threshold between the darkest and lightest pixels of the band copes with grey scans.
    band = gray[:scan_rows]
    low, high = int(band.min()), int(band.max())
    if high - low < 60:
        return None
    threshold = (low + high) / 2
    # The bars are >= 2.5 modules = 5 % of the width tall; stepping keeps big images cheap.
    step = max(1, int(gray.shape[1] * _MODULE_FRACTION_OF_WIDTH * _BAR_HEIGHT_MODULES / 8))
    votes: Counter[int] = Counter()
    for y in range(0, scan_rows, step):
        code = _decode_line(band[y] < threshold)
        if code is None:
            continue
        votes[code] += 1
        if votes[code] >= _AGREEING_LINES:
            return code
    return None


@functools.lru_cache(maxsize=16)
def _text_font(size_px: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size_px)


def make_coded_image(
    code: int, size: tuple[int, int] = (1275, 1650), *, text: str | None = None, mode: str = "L"
) -> Image.Image:
    """A page image (default: US letter at 150 dpi) showing ``code`` and its expected text."""
    img = Image.new(mode, size, "white")
    draw_code(img, code)
    width, height = size
    font_px = max(10, round(width * 0.022))
    draw = ImageDraw.Draw(img)
    y = text_top(width, height) + font_px
    for line in (expected_text(code) if text is None else text).splitlines():
        draw.text((width * _LEFT_FRACTION, y), line, fill="black", font=_text_font(font_px))
        y += font_px * 1.6
    return img


def make_coded_png(path: str | Path, code: int, size: tuple[int, int] = (1275, 1650)) -> Path:
    """Write a coded page image; the format follows the suffix (.png, .jpg, .tif …)."""
    path = Path(path)
    make_coded_image(code, size).save(path)
    return path


def make_coded_pdf(
    path: str | Path,
    codes: Sequence[int],
    size: tuple[float, float] = (612, 792),
    with_text_layer: bool = False,
) -> Path:
    """Write a real PDF whose page i shows ``codes[i]`` as vector rectangles plus visible text.

    The visible text is ``expected_text(code)``. With ``with_text_layer`` it is real PDF text (a
    text-layer engine extracts it); without, it is a raster image of the text, like a scan, so
    the page has no extractable text.
    """
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    path = Path(path)
    width, height = size
    canvas = Canvas(
        str(path), pagesize=(width, height), invariant=1
    )  # invariant: reproducible bytes
    font_pt = 11.0
    line_pt = font_pt * 1.6
    for code in codes:
        left, top, module, bar = _layout(width, height)
        canvas.setFillColorRGB(0, 0, 0)
        for start, length in _black_runs(code_modules(code)):
            # PDF's origin is bottom-left: flip y.
            canvas.rect(
                left + start * module, height - top - bar, length * module, bar, stroke=0, fill=1
            )
        lines = expected_text(code).splitlines()
        first_baseline = text_top(width, height) + font_pt
        if with_text_layer:
            canvas.setFont("Helvetica", font_pt)
            for n, line in enumerate(lines):
                canvas.drawString(left, height - first_baseline - n * line_pt, line)
        else:
            dpi = 200
            scale = dpi / 72
            box_w, box_h = width - 2 * left, line_pt * (len(lines) + 1)
            raster = Image.new("L", (round(box_w * scale), round(box_h * scale)), "white")
            draw = ImageDraw.Draw(raster)
            font = _text_font(round(font_pt * scale))
            for n, line in enumerate(lines):
                draw.text((0, n * line_pt * scale), line, fill="black", font=font)
            buffer = io.BytesIO()
            raster.save(buffer, format="PNG")
            buffer.seek(0)
            box_top = first_baseline - font_pt
            canvas.drawImage(ImageReader(buffer), left, height - box_top - box_h, box_w, box_h)
        canvas.showPage()
    canvas.save()
    return path
