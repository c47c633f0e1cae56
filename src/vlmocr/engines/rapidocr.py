"""RapidOCR (PP-OCR models on onnxruntime): the embedded default. Its models ship inside the
wheel, so it reads pages with no GPU and no network."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from ..positions.order import column_gutter, column_keys
from ..runfolder.flags import Flag
from ..runfolder.record import JsonObject, Line, Positions, WordBox
from .base import (
    LINES_RUN_DOWN,
    SMALL_LETTERS_PX,
    CpuEngine,
    EngineOptions,
    PageInput,
    Reading,
    weighted_mean,
)

# The long side RapidOCR shrinks a page to before reading it (its Global.max_side_len).
MAX_SIDE = 2000

# RapidOCR's own defaults (config.yaml of rapidocr 3.x) for the settings that decide what it
# finds on a page, written out so that a reading's tag names them without importing RapidOCR.
DEFAULTS: JsonObject = {
    "Global.use_cls": True,  # the 180° line classifier
    "Global.max_side_len": MAX_SIDE,  # a larger page is shrunk to this before detection
    "Global.text_score": 0.5,  # a line recognised with a lower score is dropped
    "Det.limit_side_len": 736,
    "Det.limit_type": "min",  # "min": enlarge a page whose short side is below limit_side_len
    "Det.thresh": 0.3,  # pixel threshold of the text map
    "Det.box_thresh": 0.5,  # a box whose mean text score is lower is dropped
    "Det.unclip_ratio": 1.6,  # how far a box grows around its text
    "Rec.rec_batch_num": 6,  # lines recognised in one run of the model, padded to the widest
    # vlmocr's own (not passed to RapidOCR): the detector's size chosen per page (detection_rule).
    # None: RapidOCR's rule alone.
    "vlmocr.det_long_side": None,
}

# The settings vlmocr reads with, chosen by measurement on the development pages (BENCHMARKS.md,
# "Engines on ../shared/gt"; benchmarks/tune_rapidocr.py). The angle classifier is off: it
# judges each line on its own and turned whole upright lines over (read as `ra  t t et`),
# which cost two thirds of RapidOCR's errors on scanned pages; vlmocr renders pages upright.
#
# Detection, not recognition, is most of a page's time (DBNet on the whole page: 50–90 %,
# benchmarks/profile_page.py), and RapidOCR's rule runs it at the page's own size (it only ever
# enlarges, to a short side of 736). A page larger than 1280 px on its long side is detected at
# 1280 — unless that would take its short side under 736 — and read at its own size: the boxes
# are found on the smaller image, the lines recognised from the page's pixels. On the development
# pages: CER 3.5 % either way, 0.6× the time (BENCHMARKS.md, "Detection sized per page").
#
# Lines are recognised one at a time (RapidOCR batches six, each padded to the batch's widest):
# the recogniser is then most of a page's time, and one line a run costs it 25 % less on this
# CPU (no padding, activations that stay in cache); CER 3.07 → 3.09 % on the development pages,
# CPU ×0.84 a page (BENCHMARKS.md, "vlmocr's default against OCRmyPDF …; lines recognised one at
# a time").
SETTINGS: JsonObject = {**DEFAULTS, "Global.use_cls": False, "vlmocr.det_long_side": 1280,
                        "Rec.rec_batch_num": 1}
OWN = "vlmocr."  # settings vlmocr applies itself


# How boxes become lines (`_group_lines`): part of a reading's settings, since it decides the
# text. lines2: centres compared with the page's slant taken out (lines1, before: upright
# extents overlapping, which joined neighbouring lines of a slanted dense page). lines3: a page
# of two columns grouped column by column (positions/order.column_gutter; lines2 read across
# both); the same text as lines2 on every development page, none of which has two columns.
LINE_GROUPING = "lines3"


def settings_tag(settings: JsonObject | None = None) -> str:
    """A short name of the settings a reading was made with (`cls0 side2000 det736min t0.3
    b0.5 u1.6 s0.5 lines2`): it goes into the record's model field and the settings key, so
    readings made with different settings never pass for one another."""
    s = {**DEFAULTS, **(SETTINGS if settings is None else settings)}
    long_side = f"+{s['vlmocr.det_long_side']}page" if s.get("vlmocr.det_long_side") else ""
    # A batch's lines are padded to its widest, which touches the scores (and rarely a letter).
    batch = f" rb{s['Rec.rec_batch_num']}" if s["Rec.rec_batch_num"] != DEFAULTS["Rec.rec_batch_num"] else ""
    return (f"cls{int(bool(s['Global.use_cls']))} side{s['Global.max_side_len']} "
            f"det{s['Det.limit_side_len']}{s['Det.limit_type']}{long_side} t{s['Det.thresh']} b{s['Det.box_thresh']} "
            f"u{s['Det.unclip_ratio']} s{s['Global.text_score']}{batch} {LINE_GROUPING}")


def detection_rule(width: int, height: int, settings: JsonObject | None = None) -> tuple[int, str]:
    """(limit_side_len, limit_type) RapidOCR's detector runs a page of this size with: the
    settings' own rule, or — with `vlmocr.det_long_side` L — the long side L for a page whose long
    side (after Global.max_side_len) is larger, as long as its short side stays at least the
    rule's limit_side_len (a long strip keeps RapidOCR's rule: its letters would get too small)."""
    s: dict[str, Any] = {**DEFAULTS, **(SETTINGS if settings is None else settings)}
    own = (int(s["Det.limit_side_len"]), str(s["Det.limit_type"]))
    long_side = s.get("vlmocr.det_long_side")
    if not long_side or own[1] != "min":
        return own
    scale = min(1.0, float(s["Global.max_side_len"]) / max(width, height, 1))
    longest, shortest = max(width, height) * scale, min(width, height) * scale
    if longest > long_side and shortest * long_side / longest >= own[0]:
        return int(long_side), "max"
    return own


# A short box (a word, a comma) says little about the page's slant: only boxes at least this many
# times wider than tall vote on it.
_SKEW_MIN_ASPECT = 3.0
# Fragments are one line when their centres, with the page's slant taken out, lie closer than
# this share of the smaller box's height. RapidOCR's boxes are grown around their text
# (Det.unclip_ratio), so on a dense page a box is taller than the line pitch (tapus: 59 px boxes,
# 34 px pitch): an overlap of the boxes' extents would join neighbouring lines.
_SAME_LINE = 0.4


# RapidOCR turns a tall box before it reads it, so a page on its side reads as real words in a
# scrambled order, and its quality signal (words, confidence) passes it: its reading says
# LINES_RUN_DOWN (engines/base.py) when most of its letters lie in tall boxes.
_TALL = 2.0  # a box this many times taller than wide holds a line running down the page


def lines_run_down(boxes: list, texts: list[str]) -> bool:
    """Do most of the page's letters lie in boxes far taller than wide?"""
    tall = across = 0
    for points, text in zip(boxes, texts):
        n = len(text.strip())
        if n < 3:
            continue  # a letter or two says nothing of a line's direction
        (x0, y0), (x1, y1), _, (x3, y3) = [(float(p[0]), float(p[1])) for p in list(points)[:4]]
        width, height = math.hypot(x1 - x0, y1 - y0), math.hypot(x3 - x0, y3 - y0)
        if height > _TALL * width:
            tall += n
        else:
            across += n
    return tall > across


@dataclass
class _Box:
    cx: float
    cy: float
    height: float
    left: float
    slope: float | None  # of its mid line; None for a box too short to say
    text: str
    score: float
    extent: tuple[int, int, int, int]  # the upright box that holds its corners
    words: tuple[WordBox, ...]  # its words where they lie (return_word_box); () when not asked


def _extent(points: Any) -> tuple[int, int, int, int]:
    xs, ys = [float(p[0]) for p in points], [float(p[1]) for p in points]
    return math.floor(min(xs)), math.floor(min(ys)), math.ceil(max(xs)), math.ceil(max(ys))


def _box(points: Any, text: str, score: float, words: Any = ()) -> _Box:
    """The geometry of one detected box: RapidOCR gives four corners, clockwise from the top left;
    `words`: its words as RapidOCR's word_results give them (text, score, four corners)."""
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = [(float(p[0]), float(p[1])) for p in list(points)[:4]]
    height = (math.hypot(x3 - x0, y3 - y0) + math.hypot(x2 - x1, y2 - y1)) / 2
    lx, ly, rx, ry = (x0 + x3) / 2, (y0 + y3) / 2, (x1 + x2) / 2, (y1 + y2) / 2
    width = rx - lx
    slope = (ry - ly) / width if width > _SKEW_MIN_ASPECT * max(height, 1.0) else None
    return _Box((x0 + x1 + x2 + x3) / 4, (y0 + y1 + y2 + y3) / 4, max(height, 1.0), min(x0, x3), slope,
                text, float(score), _extent(list(points)[:4]),
                tuple((*_extent(list(w[2])[:4]), round(float(w[1]), 3), str(w[0])) for w in words if str(w[0]).strip()))


def _group_lines(boxes: list, texts: list[str], scores: list[float], words: list | None = None) -> list[list[_Box]]:
    """Group detected boxes into visual lines, left to right, top to bottom.

    RapidOCR returns one box per text fragment; a line with wide gaps comes back in pieces that
    must be put together, or the reading order breaks on every tabbed line. On a slanted scan a
    box's upright extent covers its neighbours' (a 2 % slant over a 1300 px line is 26 px, most of
    a line pitch), so fragments are compared by their centres with the page's slant (the median
    slope of the long boxes) taken out, not by the overlap of their upright extents."""
    items = [_box(b, t, s, w) for b, t, s, w in zip(boxes, texts, scores, words or [()] * len(texts))]
    slopes = sorted(b.slope for b in items if b.slope is not None)
    skew = max(-0.2, min(0.2, slopes[len(slopes) // 2])) if slopes else 0.0
    return _in_columns(items, skew)


def _in_columns(items: list[_Box], skew: float) -> list[list[_Box]]:
    """The lines of `items`, column by column when they stand in columns."""
    extents = [it.extent for it in items]
    gutter = column_gutter(extents)
    if gutter is None:
        return _lines(items, skew)
    # Two columns: joined at one height they read across both, line by line. Each column's
    # lines, the left first, in bands cut by the headings that stand across both; a side may
    # hold columns of its own (a newspaper's three or more), split again.
    regions: dict[tuple[int, int], list[_Box]] = {}
    for key, it in zip(column_keys(extents, gutter), items):
        regions.setdefault(key, []).append(it)
    return [line for key in sorted(regions) for line in _in_columns(regions[key], skew)]


def _lines(items: list[_Box], skew: float) -> list[list[_Box]]:
    """`items` joined into lines by their centres' heights with the page's slant (`skew`)
    taken out, top to bottom, each left to right."""
    def level(b: _Box) -> float:  # the centre's height with the slant taken out
        return b.cy - skew * b.cx

    items = sorted(items, key=level)
    lines: list[list[_Box]] = []
    for it in items:
        best = None
        for line in lines[-2:]:  # sorted by level: only the last lines can be this one's
            nearest = min(line, key=lambda m: abs(m.cx - it.cx))
            gap = abs(level(nearest) - level(it))
            if gap < _SAME_LINE * min(it.height, nearest.height) and (best is None or gap < best[0]):
                best = (gap, line)
        if best is not None:
            best[1].append(it)
        else:
            lines.append([it])
    lines.sort(key=lambda line: sum(level(m) for m in line) / len(line))
    return [sorted(line, key=lambda m: m.left) for line in lines]


def _positions(lines: list[list[_Box]], width: int, height: int) -> Positions | None:
    """The lines' words where they lie; None when RapidOCR was not asked for word boxes."""
    if not any(m.words for line in lines for m in line):
        return None
    out: list[Line] = []
    for line in lines:
        words = [w for m in line for w in m.words]
        if words:
            box = (min(m.extent[0] for m in line), min(m.extent[1] for m in line),
                   max(m.extent[2] for m in line), max(m.extent[3] for m in line))
            out.append(Line(box=box, words=words))
    return Positions(width=width, height=height, source="rapidocr", lines=out)


class RapidOcrEngine:
    name = "rapidocr"

    def __init__(self, threads: int = 1, settings: JsonObject | None = None) -> None:
        """`settings` (RapidOCR parameter names, over `DEFAULTS`) replace the tuned `SETTINGS`:
        for benchmarks that compare them."""
        from rapidocr import RapidOCR

        chosen = {**DEFAULTS, **(SETTINGS if settings is None else settings)}
        self.tag = settings_tag(chosen)
        self.settings = chosen

        # One thread per worker process: the pool supplies the parallelism, and onnxruntime
        # spinning a thread per core in every worker only makes them fight.
        self._ocr = RapidOCR(
            params={
                "Global.log_level": "error",
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                **{k: v for k, v in chosen.items() if not k.startswith(OWN)},
            }
        )
        logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        # rapidocr 3.x has no __version__: the record's revision comes from the installed package.
        self.version = _versions()["rapidocr"]

    def read(self, page: PageInput) -> Reading:
        import numpy as np  # here, not at the top: the settings key imports this module in the main process

        assert page.image is not None
        image, back = strip_stacked(page.image)
        width, height = image.size
        self._detect_at(detection_rule(width, height, self.settings))
        # Word boxes come from the recogniser's own character positions: the same texts, no
        # second pass (tests/engines/test_positions.py).
        out: Any = self._ocr(np.asarray(image.convert("RGB")), return_word_box=True)  # the whole pipeline ran
        boxes = list(out.boxes if out.boxes is not None else [])
        words = list(out.word_results or ()) or None
        if back is not None:  # a strip read stacked: every box back where it lies on the page
            boxes = [back(np.asarray(b, dtype=np.float32)) for b in boxes]
            words = [[(w[0], w[1], back(np.asarray(w[2], dtype=np.float32)).tolist()) for w in line]
                     for line in words] if words else None
        reading = self.reading(boxes, list(out.txts or ()), [float(s) for s in (out.scores or ())], words,
                               size=page.image.size)
        seen = line_height_seen(boxes, image.size)
        if seen is not None and seen <= SMALL_LETTERS_PX:
            reading.flags = [*reading.flags, Flag.small_letters.of(px=f"{seen:.0f}")]
        return reading

    def _detect_at(self, rule: tuple[int, str]) -> None:
        """The detector's size rule for the next page: in RapidOCR's config (for a detector made
        on the first page) and in the detector made (TextDetector reads both attributes each
        call to build its pre-processing: rapidocr 3.x, tests/engines/test_rapidocr_detection.py)."""
        ocr = self._ocr
        if (ocr.cfg.Det.limit_side_len, ocr.cfg.Det.limit_type) != rule:
            ocr.cfg.Det.limit_side_len, ocr.cfg.Det.limit_type = rule
        if ocr.text_det is not None:
            ocr.text_det.limit_side_len, ocr.text_det.limit_type = rule

    def reading(self, boxes: list, texts: list[str], scores: list[float], words: list | None = None,
                size: tuple[int, int] | None = None) -> Reading:
        """The reading of RapidOCR's output (boxes, their texts and scores; `words`, its
        word_results, with the page's `size`: positions): lines grouped, each line's score (for the
        quality signal) and the page's. Benchmarks re-group stored output."""
        grouped = _group_lines(boxes, texts, scores, words) if texts else []
        lines = [[(m.text, m.score) for m in line] for line in grouped]
        text = "\n".join(" ".join(t for t, _ in line) for line in lines)
        line_scores = [score for line in lines if (score := weighted_mean(line)) is not None]
        return Reading(text=text, finish_reason="stop", model=f"PP-OCR (rapidocr {self.tag})", revision=self.version,
                       confidence=weighted_mean([part for line in lines for part in line]),
                       line_confidences=line_scores,
                       flags=[LINES_RUN_DOWN] if lines_run_down(boxes, texts) else [],
                       positions=_positions(grouped, *size) if size and words else None)


# A page far longer than it is wide (a strip of one line, a ticker tape, a spine) would be shrunk
# by RapidOCR until its long side fits Global.max_side_len, and its letters with it: a 95:1 strip
# 9500 px long reads at a fifth of its size, letters ~6 px high — gibberish that can pass for a
# reading. Such a page is cut along its length into pieces no longer than max_side_len (where a
# column of it holds the least ink: between words), the pieces laid one under the other with a
# margin between (so nothing is shrunk, and the detector is not made to enlarge a thin strip to
# its 736-px side many times over), read once, and every box put back where it lies on the page.
STRIP_ASPECT = 10


def strip_cuts(length: int, ink: Any, longest: int) -> list[int]:
    """Where to cut a strip `length` long into pieces of at most `longest`: near each even cut, in
    the middle of the widest run of columns holding the least ink — the space between two words,
    not the narrower one between two letters (a cut there would split the word)."""
    n = math.ceil(length / (0.9 * longest))
    cuts = [0]
    for k in range(1, n):
        ideal = round(k * length / n)
        lo, hi = max(cuts[-1] + 1, ideal - longest // 10), min(length - 1, ideal + longest // 10)
        if hi <= lo:
            cuts.append(ideal)
            continue
        window = ink[lo:hi]
        floor = float(window.min()) + 0.02 * (float(window.max()) - float(window.min()))
        runs = _clear_runs(window <= floor)
        start, end = max(runs, key=lambda r: r[1] - r[0])
        cuts.append(lo + (start + end) // 2)
    return [*cuts, length]


def _clear_runs(clear: Any) -> list[tuple[int, int]]:
    """[start, end) of each run of True in a 1-D boolean array (at least one: a window has a minimum)."""
    import numpy as np

    edges = np.diff(np.concatenate(([0], clear.astype(np.int8), [0])))
    return list(zip(np.nonzero(edges == 1)[0].tolist(), np.nonzero(edges == -1)[0].tolist()))


def strip_stacked(image: Any) -> tuple[Any, Any]:
    """(the image to read, a function taking boxes on it (N × 2 points) back to the page): the page
    and None, or a strip's pieces stacked and the way back."""
    import numpy as np
    from PIL import Image

    w, h = image.size
    longest = MAX_SIDE
    if max(w, h) <= longest or max(w, h) < STRIP_ASPECT * min(w, h):
        return image, None
    across = w >= h  # the pieces follow the long side
    g = np.asarray(image.convert("L"), dtype=np.float32)
    cuts = strip_cuts(w if across else h, (255.0 - g).sum(axis=0 if across else 1), longest)
    pieces = list(zip(cuts, cuts[1:]))
    thick = h if across else w
    step = thick + max(8, thick // 2)  # each piece's band, a white margin after it
    size = (max(b - a for a, b in pieces), step * len(pieces)) if across else \
        (step * len(pieces), max(b - a for a, b in pieces))
    stacked = Image.new(image.mode, size, "white" if image.mode in ("L", "RGB") else 255)
    for i, (a, b) in enumerate(pieces):
        piece = image.crop((a, 0, b, h) if across else (0, a, w, b))
        stacked.paste(piece, (0, i * step) if across else (i * step, 0))

    def back(points: Any) -> Any:
        centre = points.mean(axis=0)
        i = min(len(pieces) - 1, max(0, int((centre[1] if across else centre[0]) // step)))
        shift = np.array([pieces[i][0], -i * step] if across else [-i * step, pieces[i][0]], dtype=np.float32)
        return points + shift

    return stacked, back


def line_height_seen(boxes: list, size: tuple[int, int]) -> float | None:
    """The median height of the lines found, in the pixels the recogniser saw them at: RapidOCR
    shrinks an image whose long side exceeds max_side_len before reading it (None: no line)."""
    import numpy as np

    if not boxes:
        return None
    heights = [float(np.ptp(np.asarray(b, dtype=np.float32)[:, 1])) for b in boxes]
    shrink = min(1.0, MAX_SIDE / max(size))
    return float(np.median(heights)) * shrink


def _build(options: EngineOptions) -> RapidOcrEngine:
    return RapidOcrEngine(threads=int(options.get("threads", 1)))


def _versions() -> dict[str, str | None]:
    # Imported here: the registry lists this module, and the run folder's modules stand on the
    # registry's (config.py), not the other way round.
    from ..runfolder.rundir import dist_version

    return {"rapidocr": dist_version("rapidocr"), "onnxruntime": dist_version("onnxruntime")}


def _key_share() -> JsonObject:
    # RapidOCR's settings change what it reads: a page read with other settings is read again.
    return {"rapidocr": settings_tag()}


# 0.77 GB after the first page, 1.54 GB after 86 (onnxruntime's arenas grow with the largest
# page seen). `auto`: first for the scripts its shipped models read (PP-OCR: Latin letters,
# Fraktur included, Chinese/Japanese), where it reads better than Tesseract with the right data
# (BENCHMARKS.md, "Which engine reads a scan"); it needs no language data, so it also reads what
# no engine has data for (flagged for review).
ENGINE = CpuEngine(
    "rapidocr", _build, ocr=True, preload=("rapidocr", "onnxruntime"),
    versions=_versions,
    peak_worker_mb=1540, key_share=_key_share,
    auto_rank=1, auto_scripts=frozenset({"Latn", "Latf", "Hans", "Hant", "Jpan"}),
    auto_rule="RapidOCR for Latin script (Fraktur included) and Chinese/Japanese",
)
