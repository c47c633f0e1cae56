"""Repairing a degraded scan whose reading failed: what the image says is wrong, measured, and put
right with OpenCV before the page is read once more (reading/worker.py keeps the better reading by
the signal, so a repair that does not help costs only its time).

Measured, not guessed (`diagnose`), each a number a person can check on the page:

  speckle  the share of pixels that are isolated specks: darker than every one of their eight
           neighbours, or lighter than every one, by more than SPECK_LEVELS (salt-and-pepper
           noise, dust, the grain of a bad photocopy). A stroke's pixel has a neighbour along the
           stroke, however thin: the 100 clean development pages have at most 0.008 % (0.09 % at a
           quarter of their size), pages with 6 % salt and pepper 2.0–2.7 %.
  layers   a second, lighter layer of strokes apart from the ink (the verso bleeding through, a
           stamp, a pencil note): the page flattened (its paper shade divided out) falls into
           three levels — ink, the lighter strokes, paper — by multi-level Otsu (scikit-image);
           the figure is the lighter-level pixels further than a stroke's edge from any ink, per
           ink pixel (anti-aliased edges of the ink itself are next to it and do not count).
  line_px  how tall the engine found the page's lines (the median of its line boxes, pixels) in
           the reading that failed; none found: the page's long side says whether it is small.

Specks are measured on every scan before a CPU engine reads it (~10 ms): a page covered in them
(SPECKLE_AT) is despeckled before its first reading — a reading of a speckled page can pass
its signal with whole lines missing (the detector loses lines among the specks; the words it does
read are sure), so the signal alone would never ask for it. The other repairs wait for a reading
that fails.

Repairs, in this order, each only when its measure says so (`repair`):

  despeckle  a 3×3 median (OpenCV): a speck is one pixel, a stroke is wider;
  layers     the lighter layer taken out: pixels of the middle level that lie apart from the ink
             turn to paper, the ink and its edges keep their grey (the verso's strokes, lighter
             than the ink, are what Sauvola's local threshold keeps: `run --clean` makes
             bleed-through worse);
  enlarge    the page twice its size (bicubic) when its lines are under LINES_BELOW pixels tall:
             a scan at 100–150 dpi, or a page shrunk to fit (Tesseract reads letters of under
             ~10 pixels badly, twice their size well). The worker maps the word boxes back.
 Measured on the degraded pages
(benchmarks/bench_degraded.py; BENCHMARKS.md, "Degraded scans").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from .clean import flatten

# A speck differs from each of its eight neighbours by more than this many grey levels (of 255).
SPECK_LEVELS = 96
# Despeckle from this share of speck pixels (0.5 %): 6 times the most a clean development page has
# at a quarter of its size, a quarter of the least a page with 6 % salt and pepper has (half the
# noise is white on white paper, and specks that touch are no longer alone).
SPECKLE_AT = 0.005
# Take out a lighter layer from this many of its pixels apart from the ink per ink pixel: the clean
# development pages range 0.26–5.3 (a scanner's shading, a faint carbon under the ribbon's ink), so
# this measure only says a repair may help; the signal decides whether it did.
LAYERS_AT = 0.3
# Lighter-level pixels within this many pixels of ink are the ink's own edge.
EDGE_PX = 2
# Enlarge a page whose failed reading found lines under this many pixels tall: on the degraded
# development pages read by Tesseract, those shrunk to 40 % had lines of 9–17 px (at scan size
# 24–60; a clean page that read well, 17 at the least); twice the size read them at 6–53 % CER
# where they had read at 16–100 %.
LINES_BELOW = 20
# A reading that found no lines at all: enlarged when the page's long side is under this.
SMALL_PAGE = 1000
ENLARGE = 2


@dataclass(frozen=True)
class Diagnosis:
    speckle: float
    layers: float | None  # None: the page has fewer than three grey levels to tell apart
    line_px: float | None = None  # None: the reading found no lines (or was not asked)
    long_side: int = 0

    def repairs(self) -> list[str]:
        """The repairs this diagnosis asks for, in the order they are made."""
        steps = []
        if self.speckle >= SPECKLE_AT:
            steps.append("despeckle")
        if self.layers is not None and self.layers >= LAYERS_AT:
            steps.append("layers")
        if (self.line_px < LINES_BELOW if self.line_px is not None else 0 < self.long_side < SMALL_PAGE):
            steps.append("enlarge")
        return steps

    def as_dict(self) -> dict[str, float]:
        found = {"speckle": round(self.speckle, 4)}
        if self.layers is not None:
            found["layers"] = round(self.layers, 2)
        if self.line_px is not None:
            found["line_px"] = round(self.line_px, 1)
        return found


def _grey(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"))


def _levels(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The flattened page's three levels by multi-level Otsu as boolean masks — the ink, the
    middle level, and the middle level's pixels apart from the ink (further than its edge) — or
    None when the page has fewer than three grey levels."""
    import cv2
    from skimage.filters import threshold_multiotsu

    if np.unique(flat).size < 3:
        return None
    try:
        low, high = threshold_multiotsu(flat, classes=3)
    except ValueError:  # too few levels once binned
        return None
    ink = flat <= low  # (a bitonal page with grey strokes on it has its ink at 0 and `low` there too)
    middle = (flat > low) & (flat <= high)
    size = 2 * EDGE_PX + 1
    near_ink = cv2.dilate(ink.astype(np.uint8), np.ones((size, size), np.uint8)) > 0
    return ink, middle, middle & ~near_ink


def _speckle(grey: np.ndarray) -> float:
    import cv2

    ring = np.ones((3, 3), np.uint8)
    ring[1, 1] = 0  # the eight neighbours, not the pixel itself
    g = grey.astype(np.int16)
    darkest, lightest = cv2.erode(grey, ring).astype(np.int16), cv2.dilate(grey, ring).astype(np.int16)
    return float(((darkest - g > SPECK_LEVELS) | (g - lightest > SPECK_LEVELS)).mean())


def despeckled_first(img: Image.Image) -> tuple[Image.Image, float] | None:
    """The page despeckled (grey) and its speckle share when it is clearly covered in specks
    (SPECKLE_AT); None to read it as it is."""
    import cv2

    grey = _grey(img)
    speckle = _speckle(grey)
    return (Image.fromarray(cv2.medianBlur(grey, 3), mode="L"), speckle) if speckle >= SPECKLE_AT else None


def diagnose(img: Image.Image, line_px: float | None = None) -> Diagnosis:
    """What is wrong with the page `img`; `line_px`: the median height of the line boxes the
    engine found in its reading (None: it found none)."""
    import cv2

    grey = _grey(img)
    speckle = _speckle(grey)
    levels = _levels(flatten(cv2.medianBlur(grey, 3)))
    layers = None
    if levels is not None:
        ink, _, apart = levels
        layers = float(apart.sum()) / max(int(ink.sum()), 1)
    return Diagnosis(speckle, layers, line_px, max(img.size))


def _lighter_strokes(flat: np.ndarray) -> np.ndarray | None:
    """The lighter layer's strokes (a boolean mask): each connected piece of the middle level whose
    pixels lie mostly apart from the ink — where the verso's stroke runs past a letter it is taken
    out whole, where the middle level only rings the ink (its anti-aliased edge) it stays."""
    import cv2

    levels = _levels(flat)
    if levels is None:
        return None
    _, middle, apart = levels
    count, labels = cv2.connectedComponents(middle.astype(np.uint8), connectivity=8)
    share = np.bincount(labels[apart], minlength=count) / np.maximum(np.bincount(labels.ravel(), minlength=count), 1)
    strokes = share >= 0.5
    strokes[0] = False  # the background label
    return strokes[labels]


def repair(img: Image.Image, steps: list[str]) -> Image.Image:
    """The page (grey) with `steps` (Diagnosis.repairs) made, in their order; the same size but
    under `enlarge` (ENLARGE times it)."""
    import cv2

    grey = _grey(img)
    if "despeckle" in steps:
        grey = cv2.medianBlur(grey, 3)
    if "layers" in steps:
        flat = flatten(grey)
        strokes = _lighter_strokes(flat)
        if strokes is not None:
            grey = np.where(strokes, 255, flat).astype(np.uint8)
    if "enlarge" in steps:
        grey = cv2.resize(grey, (grey.shape[1] * ENLARGE, grey.shape[0] * ENLARGE), interpolation=cv2.INTER_CUBIC)
    return Image.fromarray(grey, mode="L")
