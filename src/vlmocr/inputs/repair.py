"""Repairing a degraded scan whose reading failed: what the image says is wrong, measured, and put
right with OpenCV before the page is read once more (reading/worker.py keeps the better reading by
the signal, so a repair that does not help costs only its time).

Measured, not guessed (`diagnose`), each a number a person can check on the page:

  speckle  the share of pixels that are isolated specks: darker or lighter than their 3×3
           neighbourhood's median by more than SPECK_LEVELS (salt-and-pepper noise, dust, the
           grain of a bad photocopy). A clean scan has < 1.3 %, one with 6 % salt and pepper ~3 %.
  layers   a second, lighter layer of strokes apart from the ink (the verso bleeding through, a
           stamp, a pencil note): the page flattened (its paper shade divided out) falls into
           three levels — ink, the lighter strokes, paper — by multi-level Otsu (scikit-image);
           the figure is the lighter-level pixels further than a stroke's edge from any ink, per
           ink pixel (anti-aliased edges of the ink itself are next to it and do not count).

Repairs, in this order, each only when its measure says so (`repair`):

  despeckle  a 3×3 median (OpenCV): a speck is one pixel, a stroke is wider;
  layers     the lighter layer taken out: pixels of the middle level that lie apart from the ink
             turn to paper, the ink and its edges keep their grey (the verso's strokes, lighter
             than the ink, are what Sauvola's local threshold keeps: `run --clean` makes
             bleed-through worse).

The image keeps its size, so word positions need no mapping back. Measured on the degraded pages
(benchmarks/bench_degraded.py; BENCHMARKS.md, "Degraded scans").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

# A speck differs from its 3×3 median by more than this many grey levels (of 255).
SPECK_LEVELS = 96
# Despeckle from this share of speck pixels: the clean development pages have at most 1.2 %, pages
# with 6 % salt and pepper 3.0–4.2 % (half the noise is white on white paper and differs from nothing).
SPECKLE_AT = 0.02
# Take out a lighter layer from this many of its pixels apart from the ink per ink pixel: the clean
# development pages range 0.26–5.3 (a scanner's shading, a faint carbon under the ribbon's ink), so
# this measure only says a repair may help; the signal decides whether it did.
LAYERS_AT = 0.3
# Lighter-level pixels within this many pixels of ink are the ink's own edge.
EDGE_PX = 2


@dataclass(frozen=True)
class Diagnosis:
    speckle: float
    layers: float | None  # None: the page has fewer than three grey levels to tell apart

    def repairs(self) -> list[str]:
        """The repairs this diagnosis asks for, in the order they are made."""
        steps = []
        if self.speckle >= SPECKLE_AT:
            steps.append("despeckle")
        if self.layers is not None and self.layers >= LAYERS_AT:
            steps.append("layers")
        return steps

    def as_dict(self) -> dict[str, float]:
        found = {"speckle": round(self.speckle, 4)}
        if self.layers is not None:
            found["layers"] = round(self.layers, 2)
        return found


def _grey(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"))


def _flat(grey: np.ndarray) -> np.ndarray:
    """The page divided by its background (the paper's own shade): ink dark, paper white, however
    the light fell (as inputs/clean.py flattens)."""
    import cv2

    k = max(3, (grey.shape[0] // 150) | 1)
    background = cv2.GaussianBlur(cv2.dilate(grey, np.ones((k, k), np.uint8)), (0, 0), k)
    return np.clip(grey.astype(np.float32) / np.maximum(background.astype(np.float32), 1.0) * 255.0,
                   0, 255).astype(np.uint8)


def _levels(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The ink and the lighter layer's pixels apart from it (boolean masks), or None when the page
    has fewer than three grey levels."""
    import cv2
    from skimage.filters import threshold_multiotsu

    if np.unique(flat).size < 3:
        return None
    try:
        low, high = threshold_multiotsu(flat, classes=3)
    except ValueError:  # too few levels once binned
        return None
    ink = flat <= low  # (a bitonal page with grey strokes on it has its ink at 0 and `low` there too)
    size = 2 * EDGE_PX + 1
    near_ink = cv2.dilate(ink.astype(np.uint8), np.ones((size, size), np.uint8)) > 0
    return ink, (flat > low) & (flat <= high) & ~near_ink


def diagnose(img: Image.Image) -> Diagnosis:
    import cv2

    grey = _grey(img)
    median = cv2.medianBlur(grey, 3)
    speckle = float((np.abs(grey.astype(np.int16) - median.astype(np.int16)) > SPECK_LEVELS).mean())
    levels = _levels(_flat(median))
    layers = None
    if levels is not None:
        ink, apart = levels
        layers = float(apart.sum()) / max(int(ink.sum()), 1)
    return Diagnosis(speckle, layers)


def _lighter_strokes(flat: np.ndarray) -> np.ndarray | None:
    """The lighter layer's strokes (a boolean mask): each connected piece of the middle level whose
    pixels lie mostly apart from the ink — where the verso's stroke runs past a letter it is taken
    out whole, where the middle level only rings the ink (its anti-aliased edge) it stays."""
    import cv2
    from skimage.filters import threshold_multiotsu

    if np.unique(flat).size < 3:
        return None
    try:
        low, high = threshold_multiotsu(flat, classes=3)
    except ValueError:
        return None
    ink = flat <= low
    middle = (flat > low) & (flat <= high)
    size = 2 * EDGE_PX + 1
    apart = middle & ~(cv2.dilate(ink.astype(np.uint8), np.ones((size, size), np.uint8)) > 0)
    count, labels = cv2.connectedComponents(middle.astype(np.uint8), connectivity=8)
    share = np.bincount(labels[apart], minlength=count) / np.maximum(np.bincount(labels.ravel(), minlength=count), 1)
    strokes = share >= 0.5
    strokes[0] = False  # the background label
    return strokes[labels]


def repair(img: Image.Image, steps: list[str]) -> Image.Image:
    """The page (grey) with `steps` (Diagnosis.repairs) made, in their order; the same size."""
    import cv2

    grey = _grey(img)
    if "despeckle" in steps:
        grey = cv2.medianBlur(grey, 3)
    if "layers" in steps:
        flat = _flat(grey)
        strokes = _lighter_strokes(flat)
        if strokes is not None:
            grey = np.where(strokes, 255, flat).astype(np.uint8)
    return Image.fromarray(grey, mode="L")
