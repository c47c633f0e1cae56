"""The grid: the same sample read under several settings, each cell scored, the cells ranked."""

from __future__ import annotations

import csv
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import UsageError
from ..runfolder.record import JsonObject
from ..runfolder.rundir import RunDir
from .score import BOOTSTRAP, SEED, Evaluation, score
from .truth import TruthPage, load_truth

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


def run_grid(truth_path: Path, out: Path, axes: dict[str, list[Any]], *, inputs: list[str] | None = None,
             manifest: Path | None = None, base: dict[str, Any] | None = None, config_file: Path | None = None,
             sample: int | None = None, resamples: int = BOOTSTRAP, seed: int = SEED,
             on_cell: Any = None) -> list[GridCell]:
    """Read the sample once per combination of settings (each cell a resumable run directory
    under `out`), score every cell against the truth and rank them.

    The sample is `inputs`/`manifest` when given, else the truth's own page images (a manifest
    written to OUT/manifest.csv names them with the truth's doc ids)."""
    # The scheduler is imported only when a grid runs: scoring needs none of it.
    from ..progress import RunProgress
    from ..reading.scheduler import run as run_pages
    from ..settings.config import load_config

    out = Path(out)
    truth = sample_truth(load_truth(truth_path), sample)
    if not inputs and manifest is None:
        images: dict[str, str] = {}
        for t in truth:
            if t.page != 1 or not t.image:
                raise UsageError("the truth names no image for some pages: give the sample as PATH… or --manifest")
            images[t.doc_id] = t.image
        out.mkdir(parents=True, exist_ok=True)
        manifest = out / "manifest.csv"
        with manifest.open("w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["doc_id", "path"])
            for doc_id, image in sorted(images.items()):
                w.writerow([doc_id, str(Path(image).resolve())])
    cells: list[GridCell] = []
    combos = grid_cells(axes)
    for i, settings in enumerate(combos, 1):
        name = cell_name(settings)
        run_dir = out / name
        if on_cell:
            on_cell(i, len(combos), name, None)
        cli = {**(base or {}), **settings, "inputs": list(inputs or []) or None, "manifest": manifest, "out": run_dir}
        summary = run_pages(load_config(cli, config_file), RunProgress(enabled=False))
        records = RunDir(run_dir).reading()
        ev = score(records, truth, (), resamples, seed)
        ev.layer = "raw"
        scored = {(p.doc_id, p.page) for p in ev.pages if not p.missing}
        seconds = sum(records[k].seconds for k in scored)
        cell = GridCell(name, settings, str(run_dir), int(summary.exit_code()), ev, round(seconds, 3))
        cells.append(cell)
        if on_cell:
            on_cell(i, len(combos), name, cell)
    return rank_cells(cells)
