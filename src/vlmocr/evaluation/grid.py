"""The grid: the same sample read under several settings, each cell scored, the cells ranked."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from ..runfolder.record import JsonObject
from .score import Evaluation
from .truth import TruthPage

GRID_AXES = ("engine", "ocr_engine", "profile", "model", "dpi", "longest_side", "lang")


def sample_truth(truth: list[TruthPage], n: int | None) -> list[TruthPage]:
    """`n` pages evenly spaced (index ⌊(2i+1)·len / 2n⌋, as the development pages were chosen)."""
    if not n or n >= len(truth):
        return truth
    ordered = sorted(truth, key=lambda t: (t.set, t.doc_id, t.page))
    return [ordered[(2 * i + 1) * len(ordered) // (2 * n)] for i in range(n)]


def grid_cells(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the axis values, in a stable order."""
    names = [a for a in GRID_AXES if axes.get(a)]
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[a] for a in names))] or [{}]


def cell_name(settings: dict[str, Any]) -> str:
    if not settings:
        return "default"
    raw = "_".join(f"{k}-{v:g}" if isinstance(v, float) else f"{k}-{v}" for k, v in settings.items())
    return re.sub(r"[^\w.+-]+", "-", raw)


@dataclass
class GridCell:
    name: str
    settings: dict[str, Any]
    run_dir: str
    exit_code: int
    evaluation: Evaluation
    read_seconds: float  # engine seconds summed over the scored pages' records
    rank: int = 0
    near_best: bool = False  # its 95 % interval overlaps the best cell's: not distinguishable

    def as_dict(self) -> JsonObject:
        c = self.evaluation.corpus
        return {"rank": self.rank, "name": self.name, "settings": self.settings, "run": self.run_dir,
                "exit_code": self.exit_code, "near_best": self.near_best, "read_seconds": self.read_seconds,
                "corpus": c.as_dict(), "sets": {k: v.as_dict() for k, v in self.evaluation.sets.items()}}


def rank_cells(cells: list[GridCell]) -> list[GridCell]:
    """Lowest micro CER first (then WER); a cell whose CER interval reaches the best one's is
    marked near_best: the data cannot tell the two apart."""
    def key(c: GridCell) -> tuple[float, float, float]:
        a = c.evaluation.corpus
        nan = float("inf")
        return (a.cer_with_missing if a.cer_with_missing is not None else nan,
                a.cer if a.cer is not None else nan, a.wer if a.wer is not None else nan)

    ranked = sorted(cells, key=key)
    best = ranked[0].evaluation.corpus if ranked else None
    for i, c in enumerate(ranked, 1):
        c.rank = i
        a = c.evaluation.corpus
        c.near_best = bool(best and a.cer_ci and best.cer_ci and a.cer_ci[0] <= best.cer_ci[1] and not a.missing)
    return ranked
