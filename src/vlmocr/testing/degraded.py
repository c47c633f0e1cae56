"""Pages degraded the ways scanners and microfilm degrade them, reproducibly: the same page and
condition give the same pixels (the seed is their names). Used by benchmarks/bench_degraded.py (the
degraded set and its figures) and by the tests of the repair (inputs/repair.py).

  blur      Gaussian blur, sigma 1/800 of the page's long side (~3 px on an A4 page at 200 dpi)
  lowres    shrunk to 40 % of its size (a 300-dpi scan becomes 120 dpi)
  jpeg      JPEG at quality 8 (blocking, ringing), decoded again
  noise     salt and pepper: 6 % of the pixels turned black or white
  faint     the ink's contrast cut to 35 % (faded typescript, a light carbon copy)
  bleed     the verso bleeding through: another page, mirrored, its strokes blended in at 40 % of
            their darkness
  turn90    a quarter turn (the page fed on its side)
"""

from __future__ import annotations

import hashlib
import io
from typing import Any, Callable

import numpy as np
from PIL import Image, ImageFilter


def seeded(name: str, condition: str) -> np.random.Generator:
    """The random numbers of `condition` on the page `name`: the same every time."""
    seed = int.from_bytes(hashlib.sha256(f"{name}/{condition}".encode()).digest()[:8], "big")
    return np.random.default_rng(seed)


def _grey(img: Image.Image) -> Image.Image:
    return img.convert("L")


def blur(img: Image.Image, **_: Any) -> Image.Image:
    return _grey(img).filter(ImageFilter.GaussianBlur(max(img.size) / 800))


def lowres(img: Image.Image, **_: Any) -> Image.Image:
    w, h = img.size
    return _grey(img).resize((max(1, round(w * 0.4)), max(1, round(h * 0.4))), Image.Resampling.LANCZOS)


def jpeg(img: Image.Image, **_: Any) -> Image.Image:
    buf = io.BytesIO()
    _grey(img).save(buf, "JPEG", quality=8)
    return Image.open(io.BytesIO(buf.getvalue())).convert("L")


def noise(img: Image.Image, rng: np.random.Generator, **_: Any) -> Image.Image:
    a = np.asarray(_grey(img)).copy()
    hit = rng.random(a.shape)
    a[hit < 0.03] = 0
    a[hit > 0.97] = 255
    return Image.fromarray(a)


def faint(img: Image.Image, **_: Any) -> Image.Image:
    a = np.asarray(_grey(img)).astype(np.float32)
    return Image.fromarray((255 - (255 - a) * 0.35).round().astype(np.uint8))


def bleed(img: Image.Image, verso: Image.Image, **_: Any) -> Image.Image:
    a = np.asarray(_grey(img)).astype(np.float32)
    back = _grey(verso).transpose(Image.Transpose.FLIP_LEFT_RIGHT).resize(img.size, Image.Resampling.BILINEAR)
    b = 255 - (255 - np.asarray(back).astype(np.float32)) * 0.4
    return Image.fromarray(np.minimum(a, b).round().astype(np.uint8))  # ink over paper: the darker wins


def turn90(img: Image.Image, **_: Any) -> Image.Image:
    return img.transpose(Image.Transpose.ROTATE_90)


CONDITIONS: dict[str, Callable[..., Image.Image] | None] = {
    "clean": None, "blur": blur, "lowres": lowres, "jpeg": jpeg, "noise": noise, "faint": faint,
    "bleed": bleed, "turn90": turn90,
}


def degrade(img: Image.Image, condition: str, name: str, verso: Image.Image | None = None) -> Image.Image:
    """The page `name` under `condition` (`verso`: the page that bleeds through, for `bleed`)."""
    fn = CONDITIONS[condition]
    if fn is None:
        return img
    if condition == "bleed" and verso is None:
        raise ValueError("bleed needs the verso")
    return fn(img, rng=seeded(name, condition), verso=verso)
