"""RapidOCR (PP-OCR models on onnxruntime): the embedded default. Its models ship inside the
wheel, so it reads pages with no GPU and no network."""

from __future__ import annotations

import logging
from typing import Any

from ..rundir import dist_version
from .base import PageInput, Reading, weighted_mean

# RapidOCR's own defaults (config.yaml of rapidocr 3.x) for the settings that decide what it
# finds on a page, written out so that a reading's tag names them without importing RapidOCR.
DEFAULTS: dict[str, Any] = {
    "Global.use_cls": True,  # the 180° line classifier
    "Global.max_side_len": 2000,  # a larger page is shrunk to this before detection
    "Global.text_score": 0.5,  # a line recognised with a lower score is dropped
    "Det.limit_side_len": 736,
    "Det.limit_type": "min",  # "min": enlarge a page whose short side is below limit_side_len
    "Det.thresh": 0.3,  # pixel threshold of the text map
    "Det.box_thresh": 0.5,  # a box whose mean text score is lower is dropped
    "Det.unclip_ratio": 1.6,  # how far a box grows around its text
}

# The settings vlmocr reads with, chosen by measurement on ../shared/gt (BENCHMARKS.md,
# "Engines on ../shared/gt"; benchmarks/tune_rapidocr.py). The angle classifier is off: it
# judges each line on its own and turned whole upright lines over (read as `ra  t t et`),
# which cost two thirds of RapidOCR's errors on scanned pages; vlmocr renders pages upright.
SETTINGS: dict[str, Any] = {**DEFAULTS, "Global.use_cls": False}


def settings_tag(settings: dict[str, Any] | None = None) -> str:
    """A short name of the settings a reading was made with (`cls0 side2000 det736min t0.3
    b0.5 u1.6 s0.5`): it goes into the record's model field, so readings made with different
    settings never pass for one another."""
    s = {**DEFAULTS, **(SETTINGS if settings is None else settings)}
    return (f"cls{int(bool(s['Global.use_cls']))} side{s['Global.max_side_len']} "
            f"det{s['Det.limit_side_len']}{s['Det.limit_type']} t{s['Det.thresh']} b{s['Det.box_thresh']} "
            f"u{s['Det.unclip_ratio']} s{s['Global.text_score']}")


def _group_lines(boxes: list, texts: list[str], scores: list[float]) -> list[list[tuple[str, float]]]:
    """Group detected boxes into visual lines (vertical overlap), left to right, top to bottom:
    each line a list of (text, score).

    RapidOCR returns one box per text fragment; a line with wide gaps comes back in pieces
    that must be put together, or the reading order breaks on every tabbed line."""
    items = []
    for box, text, score in zip(boxes, texts, scores):
        ys = [p[1] for p in box]
        xs = [p[0] for p in box]
        items.append((min(ys), max(ys), min(xs), text, float(score)))
    items.sort(key=lambda t: (t[0] + t[1]) / 2)
    lines: list[list[tuple]] = []
    for it in items:
        top, bottom = it[0], it[1]
        height = max(bottom - top, 1)
        if lines:
            last = lines[-1]
            ltop = sum(i[0] for i in last) / len(last)
            lbot = sum(i[1] for i in last) / len(last)
            overlap = min(bottom, lbot) - max(top, ltop)
            if overlap > 0.5 * min(height, lbot - ltop or 1):
                last.append(it)
                continue
        lines.append([it])
    return [[(i[3], i[4]) for i in sorted(line, key=lambda i: i[2])] for line in lines]


class RapidOcrEngine:
    name = "rapidocr"
    needs_image = True

    def __init__(self, threads: int = 1, settings: dict[str, Any] | None = None) -> None:
        """`settings` (RapidOCR parameter names, over `DEFAULTS`) replace the tuned `SETTINGS`:
        for benchmarks that compare them."""
        from rapidocr import RapidOCR

        chosen = {**DEFAULTS, **(SETTINGS if settings is None else settings)}
        self.tag = settings_tag(chosen)

        # One thread per worker process: the pool supplies the parallelism, and onnxruntime
        # spinning a thread per core in every worker only makes them fight.
        self._ocr = RapidOCR(
            params={
                "Global.log_level": "error",
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                **chosen,
            }
        )
        logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        # rapidocr 3.x has no __version__: the record's revision comes from the installed package.
        self.version = dist_version("rapidocr")

    def read(self, page: PageInput) -> Reading:
        import numpy as np  # here, not at the top: the settings key imports this module in the main process

        assert page.image is not None
        arr = np.asarray(page.image.convert("RGB"))
        out = self._ocr(arr)
        texts = list(out.txts or ())
        boxes = out.boxes if out.boxes is not None else []
        scores = [float(s) for s in (out.scores or ())]
        lines = _group_lines(list(boxes), texts, scores) if texts else []
        text = "\n".join(" ".join(t for t, _ in line) for line in lines)
        line_scores = [score for line in lines if (score := weighted_mean(line)) is not None]
        return Reading(text=text, finish_reason="stop", model=f"PP-OCR (rapidocr {self.tag})", revision=self.version,
                       confidence=weighted_mean([part for line in lines for part in line]),
                       line_confidences=line_scores)
