"""RapidOCR (PP-OCR models on onnxruntime): the embedded default. Its models ship inside the
wheel, so it reads pages with no GPU and no network."""

from __future__ import annotations

import logging

import numpy as np

from .base import PageInput, Reading, weighted_mean


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

    def __init__(self, threads: int = 1) -> None:
        from rapidocr import RapidOCR

        # One thread per worker process: the pool supplies the parallelism, and onnxruntime
        # spinning a thread per core in every worker only makes them fight.
        self._ocr = RapidOCR(
            params={
                "Global.log_level": "error",
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        )
        logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        import rapidocr

        self.version = getattr(rapidocr, "__version__", None)

    def read(self, page: PageInput) -> Reading:
        assert page.image is not None
        arr = np.asarray(page.image.convert("RGB"))
        out = self._ocr(arr)
        texts = list(out.txts or ())
        boxes = out.boxes if out.boxes is not None else []
        scores = [float(s) for s in (out.scores or ())]
        lines = _group_lines(list(boxes), texts, scores) if texts else []
        text = "\n".join(" ".join(t for t, _ in line) for line in lines)
        line_scores = [score for line in lines if (score := weighted_mean(line)) is not None]
        return Reading(text=text, finish_reason="stop", model="PP-OCR (rapidocr)", revision=self.version,
                       confidence=weighted_mean([part for line in lines for part in line]),
                       line_confidences=line_scores)
