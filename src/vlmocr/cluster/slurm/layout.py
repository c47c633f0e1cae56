"""Where a cluster run directory ``RUN`` keeps what, and its small JSON files::

    RUN/staged/0001.pdf → /original/weird name.pdf   symlinks under ASCII names
    RUN/staged/bulk.csv, gate.csv                    the manifests the jobs read (doc_id,path,pages,dpi)
    RUN/staged/originals.csv                         kind,doc_id,staged,original (the original names)
    RUN/slurm/bulk.sbatch, gate.sbatch               the generated scripts (self-contained)
    RUN/slurm/release.sbatch                         the gate's release step, a job after the gate
    RUN/slurm/logs/%A_%a.out, gate_%j.out            one log per task (release_%j.out: the decision)
    RUN/slurm/jobs.json                              every submission: job id, kind, time, command
    RUN/slurm/tasks/bulk-K.json, gate.json           written by each task: job id, host, state, exit
    RUN/slurm/gate.json                              the gate: truth, threshold, jobs, decision
    RUN/shards/K/                                    shard K's run directory (pages.jsonl, run.json, docs/)
    RUN/shards/K/summary.json                        its counts, kept current by the run: what status reads
    RUN/gate/                                        the gate's run directory

staged/, originals.csv and shards/ are read by every reader of runs (the library, the report,
describe): their names and readers are in ``vlmocr.rundir``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...store import write_json_atomic

SLURM_DIR = "slurm"
GATE_RUN = "gate"
JOBS_FILE = "jobs.json"
GATE_FILE = "gate.json"


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


def task_file(run_dir: Path, name: str) -> dict[str, Any]:
    """What task ``name`` (gate, bulk-K) wrote about itself: job id, host, state, exit code."""
    return read_json(run_dir / SLURM_DIR / "tasks" / f"{name}.json", {}) or {}
