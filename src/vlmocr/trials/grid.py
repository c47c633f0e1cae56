"""The grid, run: the same sample read under several settings (each cell a resumable run
directory), every cell scored against the truth and the cells ranked (evaluation/grid.py).
`vlmocr evaluate --grid` runs it."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from ..evaluation.grid import GridCell, cell_name, grid_cells, rank_cells, sample_truth
from ..evaluation.score import BOOTSTRAP, SEED, score
from ..evaluation.truth import load_truth
from ..exceptions import UsageError
from ..progress import RunProgress
from ..reading.scheduler import run as run_pages
from ..runfolder.rundir import RunDir
from ..settings.config import load_config


def run_grid(truth_path: Path, out: Path, axes: dict[str, list[Any]], *, inputs: list[str] | None = None,
             manifest: Path | None = None, base: dict[str, Any] | None = None, config_file: Path | None = None,
             sample: int | None = None, resamples: int = BOOTSTRAP, seed: int = SEED,
             on_cell: Any = None) -> list[GridCell]:
    """Read the sample once per combination of settings (each cell a resumable run directory
    under `out`), score every cell against the truth and rank them.

    The sample is `inputs`/`manifest` when given, else the truth's own page images (a manifest
    written to OUT/manifest.csv names them with the truth's doc ids)."""
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
