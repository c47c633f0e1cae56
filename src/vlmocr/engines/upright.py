"""Which way up a page's lines read: RapidOCR's 0°/180° text-line classifier (the PP-OCR
`ch_ppocr_mobile_v2.0_cls` model that ships in the rapidocr wheel, run on onnxruntime) asked of
pieces of the page's text lines, cut where the ink says lines are.

Why a second opinion: Tesseract's OSD, sure of itself, is wrong on typewritten pages. On the 60
typewritten development pages rendered as `vlmocr run` renders them, upright, OSD called 10
upside down at confidence 2.5–12.0 (small typewriter scans, 800 × 1000 px, most of them); each
would have been turned over and read upside down (BENCHMARKS.md, "OSD's second opinion"). The
line classifier, trained on real text lines, reads those pages as upright by a wide margin. It
is weak on Fraktur and polytonic Greek (margins near 0), where OSD is right: so it decides only
which way up, on the axis OSD found, and only when clearly of the opposite view (`OVERRULE_BELOW`).

Cost: ~5 ms a piece on one core, `PIECES` pieces: asked only of pages OSD is asked of (~1 s).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..runfolder.flags import Flag

# Pieces of lines asked, spread over the page (more cost more; 12 gave the margins measured).
PIECES = 12
# The page's ink is looked at this small to find its lines (box-reduced).
LOOK_SIDE = 1200
# A piece is this many line heights wide: the classifier's input is 48 × 192 (4 : 1).
PIECE_ASPECT = 4
# OSD's turn stands unless, turned so, the page's pieces score below −OVERRULE_BELOW (mean of
# P(upright) − P(upside down), from −1 to 1): calibrated in BENCHMARKS.md, "OSD's second opinion".
OVERRULE_BELOW = 0.3

# OSD unsure of a page whose ink says it lies on its side: the page turned a quarter one way reads
# upright above +QUARTER_ABOVE (turn it so), upside down below −QUARTER_ABOVE (the other quarter);
# between, it is left as it lies. On the development pages (BENCHMARKS.md, "OSD's second opinion"): of the
# 30 pages on their side OSD was unsure of, 26 turned right, none wrong (at 0.1: 28 and 1;
# measured before the MIN_PIECES and clearer-view guards of lines_turn, not rerun since).
QUARTER_ABOVE = 0.2
# Fewer line pieces than this (of PIECES) say too little for the classifier alone to turn a page: a
# strip of four lines turned a quarter gave 8 pieces and a wrong turn.
MIN_PIECES = 10

MODEL = "ch_ppocr_mobile_v2.0_cls_mobile.onnx"


@lru_cache(maxsize=1)
def _session() -> Any:
    """The classifier on onnxruntime, one thread (the worker pool gives the parallelism); None
    when the rapidocr wheel's model is not there."""
    import importlib.util

    import onnxruntime as ort

    spec = importlib.util.find_spec("rapidocr")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / MODEL
    if not path.is_file():
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _runs(on: Any) -> list[tuple[int, int]]:
    """[start, end) of each run of True in a 1-D boolean array."""
    import numpy as np

    edges = np.diff(np.concatenate(([0], on.astype(np.int8), [0])))
    return list(zip(np.nonzero(edges == 1)[0].tolist(), np.nonzero(edges == -1)[0].tolist()))


def line_pieces(image: Any, pieces: int = PIECES) -> list[Any]:
    """Crops (PIL, greyscale) of up to `pieces` pieces of text lines spread over the page, each
    about PIECE_ASPECT line heights wide; [] when the page shows no lines across it."""
    import numpy as np

    g = image if image.mode == "L" else image.convert("L")
    factor = max(1, int(max(g.size) / LOOK_SIDE))
    small = g.reduce(factor) if factor > 1 else g
    scale = g.size[0] / small.size[0]
    a = np.asarray(small, dtype=np.float32)
    ink = a < min(160.0, float(a.mean()) - float(a.std()))
    height, width = ink.shape
    # The line height: runs of inked rows in the middle half of the page.
    rows = ink[:, width // 4: 3 * width // 4].mean(axis=1) > 0.02
    heights = [e - s for s, e in _runs(rows) if 4 <= e - s <= 80]
    if not heights:
        return []
    line = float(np.median(heights))
    strip = max(8, int(round(PIECE_ASPECT * line)))
    n = width // strip
    if n == 0:
        return []
    # Each vertical strip's inked rows: a line piece is a run about one line high, well inked.
    per_strip = ink[:, :n * strip].reshape(height, n, strip).mean(axis=2)
    found: list[tuple[int, int, int]] = []
    for col in range(n):
        profile = per_strip[:, col]
        for s, e in _runs(profile > 0.03):
            if 0.6 * line <= e - s <= 1.6 * line and 0.08 < float(profile[s:e].mean()) < 0.6:
                found.append((s, col * strip, e))
    if not found:
        return []
    found.sort()
    if len(found) > pieces:
        found = [found[round(i * (len(found) - 1) / (pieces - 1))] for i in range(pieces)]
    crops = []
    for y0, x0, y1 in found:
        pad = int(0.25 * (y1 - y0))
        box = (int(x0 * scale), int(max(0, y0 - pad) * scale), int((x0 + strip) * scale),
               int(min(height, y1 + pad) * scale))
        crops.append(g.crop(box))
    return crops


def _tensor(crop: Any) -> Any:
    """A crop as the classifier takes it (PaddleOCR's ClsPreProcess): height 48, width up to
    192 at its own aspect, values to [−1, 1], padded with 0 on the right."""
    import numpy as np
    from PIL import Image

    w, h = crop.size
    nw = min(192, max(1, int(math.ceil(48 * w / max(1, h)))))
    x = np.asarray(crop.convert("RGB").resize((nw, 48), Image.Resampling.BILINEAR), dtype=np.float32)
    x = (x / 255.0 - 0.5) / 0.5
    out = np.zeros((3, 48, 192), np.float32)
    out[:, :, :nw] = x.transpose(2, 0, 1)
    return out


def upright_score(image: Any) -> tuple[float, int]:
    """(mean of P(upright) − P(upside down) over the pieces, pieces asked): near 1 for a page
    whose lines read upright, near −1 upside down, (0, 0) when no piece was found or the model
    is not installed."""
    import numpy as np

    session = _session()
    crops = line_pieces(image) if session is not None else []
    if not crops:
        return 0.0, 0
    probs = session.run(None, {session.get_inputs()[0].name: np.stack([_tensor(c) for c in crops])})[0]
    return float((probs[:, 0] - probs[:, 1]).mean()), len(crops)


def second_opinion(image: Any, proposed: int) -> tuple[int, str | None]:
    """OSD's answer, `proposed` degrees counter-clockwise to turn the page (0: it lies upright),
    checked by the line classifier: the turn to make, and a flag for the record when the
    classifier overruled OSD (`osd_overruled:180>0:-0.54`: OSD said 180, the page so turned read
    upside down at −0.54, so it is turned the other way up). OSD keeps the axis it found (on its
    side or not), which it rarely gets wrong; the classifier only says which way up."""
    from PIL import Image

    turned = image.transpose(getattr(Image.Transpose, f"ROTATE_{proposed}")) if proposed else image
    score, n = upright_score(turned)
    if n == 0 or score >= -OVERRULE_BELOW:
        return proposed, None
    # The pieces turned over score the opposite way (the classifier's two classes): no second call.
    other = (proposed + 180) % 360
    return other, Flag.osd_overruled.of(proposed=proposed, kept=other, score=f"{score:.2f}")


def one_line(image: Any) -> bool:
    """Is the page's ink one line of text, lying across it or down it? Its rows of ink (or its
    columns) form one run, far wider than high: a single line has no spacing between lines to say
    which axis it runs on, and turned a quarter its letters stacked down the page still look like
    short lines to the classifier — so one line never decides a turn (`lines_turn`)."""
    import numpy as np

    g = image if image.mode == "L" else image.convert("L")
    factor = max(1, int(max(g.size) / LOOK_SIDE))
    small = g.reduce(factor) if factor > 1 else g
    a = np.asarray(small, dtype=np.float32)
    ink = a < min(160.0, float(a.mean()) - float(a.std()))
    if not ink.any():
        return False
    for profile, across in ((ink.any(axis=1), ink.any(axis=0)), (ink.any(axis=0), ink.any(axis=1))):
        runs = [(s, e) for s, e in _runs(profile) if e - s >= 2]  # a speck of dust is no line
        if len(runs) == 1:
            inked = np.nonzero(across)[0]
            if (runs[0][1] - runs[0][0]) * 2 <= inked[-1] - inked[0] + 1:
                return True
    return False


def lines_turn(image: Any, sideways: bool) -> tuple[int, float]:
    """For a page OSD cannot say how it lies: (degrees counter-clockwise that make its lines read
    upright, the classifier's score for it), or (0, score) to leave it. Both views are asked — the
    page as it lies and turned a quarter — and the clearer one decides, from `MIN_PIECES` pieces
    at least: a page the ink says lies on its side (`sideways`) is turned a quarter when turned so
    it reads clearly one way up (beyond ±QUARTER_ABOVE) and more clearly than as it lies; a page
    that reads clearly upside down as it lies (below −OVERRULE_BELOW: on the 100 pages of
    the development pages no upright page scored below −0.22) is turned over. A strip of a few lines can
    look sideways to the ink; as it lies its lines then read more clearly than turned. A page of
    one line is left as it lies (`one_line`): the readings decide."""
    from PIL import Image

    if one_line(image):
        return 0, 0.0
    here, n_here = upright_score(image)
    quarter, n_quarter = upright_score(image.transpose(Image.Transpose.ROTATE_90))
    if sideways and n_quarter >= MIN_PIECES and abs(quarter) > QUARTER_ABOVE and abs(quarter) > abs(here):
        # Turned the other quarter the pieces score the opposite way: no third call.
        return (90, quarter) if quarter > 0 else (270, -quarter)
    if n_here >= MIN_PIECES and here < -OVERRULE_BELOW and abs(here) >= abs(quarter):
        return 180, here
    return 0, here
