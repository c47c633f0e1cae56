"""How far a page is askew, and the page straightened (`--deskew auto|on|off`).

A scanner's feeder or a hand on a flatbed leaves pages a few degrees askew. RapidOCR reads its
lines as boxes of any slant and hardly notices; Tesseract does: on the development pages turned
by 4 degrees its CER doubled, by 8 degrees it read almost nothing (BENCHMARKS.md, "Pages as
scanned"). A VLM reads a slanted line too: a page is straightened before it is sent only under
`--deskew on` (measuring every page costs the client ~10 % of its feed rate).

The angle is the one at which the page's ink, projected across the page, piles up in the
sharpest rows: lines of text are rows of ink with white between them, sharpest when the
projection runs along them. The ink is taken from the page shrunk to `SIDE` pixels (Otsu's
threshold, OpenCV; only parts of letter size: a dark border, a photograph or a ruled line
does not count) and sampled (`POINTS`, a fixed seed: the same page gives the same angle); the
projection of the sampled points is counted for every angle within `LIMIT` degrees, coarsely then
finely, which costs a few milliseconds where rotating the image for every angle would cost
hundreds. The page is straightened only when the sharpest projection is clearly sharper than the
page as it lies (`GAIN`): a photograph, a blank page, a table of ruled lines and a page already
straight are left as they are.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from PIL import Image

LIMIT = 15.0  # degrees either way: beyond that a page is turned, not askew (engines/osd.py)
SIDE = 700  # the longest side the ink is measured at (px)
POINTS = 20_000  # ink pixels sampled
MIN_POINTS = 500  # fewer: too little ink to tell (a blank page, a stamp)
LETTER_HEIGHT, LETTER_WIDTH = 0.04, 0.12  # the largest letter (or run of touching letters), of SIDE
COARSE, FINE = 1.0, 0.1  # degrees between the angles tried
# The sharpest projection must beat the page as it lies by this factor, and the angle must be at
# least MIN_ANGLE, for the page to be straightened (on the development pages a straight scan gains ~1.0,
# scans lying 0.5–1.7 degrees askew up to 1.8, pages set askew by 3–8 degrees at least 1.44;
# benchmarks/bench_pages_as_scanned.py).
GAIN = 1.15
MIN_ANGLE = 0.3


@dataclass(frozen=True)
class Skew:
    """The page's slant: `angle` degrees counter-clockwise (its lines rise to the right when
    positive); `gain`: how much sharper the rows are straightened than as the page lies."""

    angle: float
    gain: float
    seconds: float

    @property
    def worth_straightening(self) -> bool:
        return abs(self.angle) >= MIN_ANGLE and self.gain >= GAIN


def _ink_points(img: Image.Image) -> np.ndarray | None:
    """(x, y) of sampled ink pixels of the page shrunk to SIDE, centred; None: too little ink."""
    import cv2

    grey = img.convert("L")
    scale = SIDE / max(grey.size)
    if scale < 1:
        grey = grey.resize((max(1, round(grey.width * scale)), max(1, round(grey.height * scale))),
                           Image.Resampling.BOX)
    a = np.asarray(grey)
    # Otsu's threshold from the middle of the page: a dark scanner bed around it would set the
    # threshold between bed and paper, and shrunk letters (grey, not black) would fall on the
    # paper's side.
    rows, cols = a.shape
    middle = np.ascontiguousarray(a[rows // 8: rows - rows // 8, cols // 8: cols - cols // 8])
    level, _ = cv2.threshold(middle, 0, 255, cv2.THRESH_BINARY_INV | cv2.THRESH_OTSU)
    ink = np.where(a <= level, 255, 0).astype(np.uint8)
    # Letters only: the parts of ink no taller than a line and no wider than a word. A scanner's
    # dark border, a photograph, a ruled line or a stain would pull the rows their own way.
    _, labels, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    wide, tall, area = stats[:, cv2.CC_STAT_WIDTH], stats[:, cv2.CC_STAT_HEIGHT], stats[:, cv2.CC_STAT_AREA]
    letter = (tall <= LETTER_HEIGHT * SIDE) & (wide <= LETTER_WIDTH * SIDE) & (area >= 3)
    letter[0] = False  # the background
    ys, xs = np.nonzero(letter[labels])
    if len(xs) < MIN_POINTS:
        return None
    if len(xs) > POINTS:
        pick = np.random.default_rng(0).choice(len(xs), POINTS, replace=False)
        xs, ys = xs[pick], ys[pick]
    return np.stack([xs - cols / 2.0, ys - rows / 2.0]).astype(np.float32)


def _sharpness(points: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """For each angle: the sum of squared row counts of the points projected across the page
    along lines rising at that angle (highest when the rows fall on the lines of text)."""
    rad = np.deg2rad(angles).astype(np.float32)
    rows = np.outer(np.cos(rad), points[1]) + np.outer(np.sin(rad), points[0])  # angles × points
    rows = np.rint(rows - rows.min()).astype(np.int64)
    out = np.empty(len(angles))
    for i, r in enumerate(rows):
        counts = np.bincount(r)
        out[i] = float(np.dot(counts, counts))
    return out


def find_skew(img: Image.Image) -> Skew | None:
    """The page's slant within ±LIMIT degrees; None when it has too little ink to tell."""
    t0 = time.perf_counter()
    points = _ink_points(img)
    if points is None:
        return None
    coarse = np.arange(-LIMIT, LIMIT + COARSE / 2, COARSE)  # 0 among them: the page as it lies
    scores = _sharpness(points, coarse)
    best = float(coarse[int(np.argmax(scores))])
    fine = np.arange(best - COARSE, best + COARSE + FINE / 2, FINE)
    fine_scores = _sharpness(points, fine)
    angle = float(fine[int(np.argmax(fine_scores))])
    flat = float(scores[int(np.argmin(np.abs(coarse)))])
    gain = float(fine_scores.max()) / flat if flat else 1.0
    return Skew(round(angle, 2), round(gain, 3), time.perf_counter() - t0)


def paper(img: Image.Image) -> int | tuple[int, ...]:
    """The colour of the page's paper: its brighter pixels (the 90th percentile of each band, of
    the page shrunk to 200 px). A turned page's new corners are filled with it: a dark wedge
    (the scanner's bed, a grey card) would make Tesseract see no text at all."""
    thumb = img.copy()
    thumb.thumbnail((200, 200))
    a = np.asarray(thumb)
    bright = np.percentile(a.reshape(-1, *a.shape[2:]), 90, axis=0)
    return int(bright) if np.ndim(bright) == 0 else tuple(int(v) for v in bright)


def straighten(img: Image.Image, angle: float) -> Image.Image:
    """The page turned by -`angle` degrees about its centre, the corners filled with its paper
    (the size kept: a page a few degrees askew loses only margin)."""
    if img.mode not in ("L", "RGB"):
        img = img.convert("RGB")
    return img.rotate(-angle, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=paper(img))
