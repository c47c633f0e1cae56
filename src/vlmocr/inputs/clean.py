"""Cleaning a scan before it is read (`run --clean`): off unless asked for.

Old paper yellows, ink fades, the verso shows through and the scanner adds dust. Three steps,
each done with a field library and each named in the page's flags when it changed the page
(`cleaned:flatten+sauvola`, `specks_removed:N`):

  flatten   the paper's own shade taken out: the page divided by its background (the page with
            its ink closed over and blurred, OpenCV), so yellowed or shadowed paper and faint
            show-through turn white and faint ink keeps its contrast to the paper around it;
  sauvola   binarised by Sauvola's local threshold (scikit-image), the method of choice for
            uneven historical scans: ink black, paper white, however the light fell;
  despeckle specks far smaller than a full stop removed (scikit-image remove_small_objects).

Measured on the development pages (BENCHMARKS.md, "Pages as scanned"): whether it helps depends on the
engine and the collection, so it stays off by default and a user turns it on for a collection
it helps (compare with `vlmocr evaluate` on a few pages with truth).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from ..runfolder.flags import Flag

# Sauvola's window spans about a line of text: the page's height over this many rows.
WINDOW_ROWS = 60
SAUVOLA_K = 0.2
# A speck: at most this many pixels on a 2200 px tall page (a full stop at 200 dpi is ~20),
# scaled with the page's size.
SPECK_PX = 4


def flatten(grey: np.ndarray) -> np.ndarray:
    """The page (grey) divided by its background, the paper's own shade: ink dark, paper white,
    however the light fell."""
    import cv2

    # The background: ink closed over (a grey dilation wider than a stroke), then smoothed.
    k = max(3, (grey.shape[0] // 150) | 1)
    background = cv2.GaussianBlur(cv2.dilate(grey, np.ones((k, k), np.uint8)), (0, 0), k)
    return np.clip(grey.astype(np.float32) / np.maximum(background.astype(np.float32), 1.0) * 255.0,
                   0, 255).astype(np.uint8)


def clean_page(img: Image.Image) -> tuple[Image.Image, list[str]]:
    """The page cleaned (grey, ink black on white) and the flags saying what was done."""
    from skimage.filters import threshold_sauvola
    from skimage.morphology import remove_small_objects

    grey = np.asarray(img.convert("L"))
    h = grey.shape[0]
    flat = flatten(grey)
    window = max(15, (h // WINDOW_ROWS) | 1)
    ink = flat < threshold_sauvola(flat, window_size=window, k=SAUVOLA_K)
    speck = max(1, round(SPECK_PX * (h / 2200) ** 2))
    kept = remove_small_objects(ink, max_size=speck)
    removed = int(ink.sum() - kept.sum())
    out = np.where(kept, 0, 255).astype(np.uint8)
    flags = [Flag.cleaned.of(how="flatten+sauvola")]
    if removed:
        flags.append(Flag.specks_removed.of(count=removed))
    return Image.fromarray(out, mode="L"), flags
