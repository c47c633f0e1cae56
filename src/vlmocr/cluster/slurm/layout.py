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

A part (``vlmocr slurm submit --part NAME``) is one more bulk job beside the others, with its own
documents, shard count, partition and options; its files carry its name, everything else is shared::

    RUN/staged/bulk-NAME.csv                         its staged manifest (a doc_id is in one part only)
    RUN/slurm/bulk-NAME.sbatch                       its script
    RUN/slurm/tasks/bulk-NAME-K.json                 its tasks' files
    RUN/shards/NAME-K/                               its shard K (every reader of RUN/shards/* sees it)
    jobs.json                                        its submissions: kind bulk, "part": NAME

staged/, originals.csv and shards/ are read by every reader of runs (the library, the report,
describe): their names and readers are in ``vlmocr.runfolder.rundir``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...exceptions import UsageError
from ...files import write_json_atomic
from ...runfolder.record import JsonObject

SLURM_DIR = "slurm"
GATE_RUN = "gate"
JOBS_FILE = "jobs.json"
GATE_FILE = "gate.json"
BULK = "bulk"
# A part's name becomes part of file names, a job name and shard directories (NAME-K): a plain
# word starting with a letter (no dot, no slash), short enough for squeue's columns.
_PART_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}")


def check_part_name(name: str) -> str:
    if not _PART_NAME.fullmatch(name):
        raise UsageError(f"--part {name!r}: a part's name is a letter, then letters, digits, _ or - "
                         "(at most 40 characters)")
    return name


def bulk_kind(part: str | None) -> str:
    """What a bulk job's files are named after: ``bulk`` (no part), ``bulk-NAME`` (part NAME)."""
    return BULK if not part else f"{BULK}-{part}"


def shard_name(part: str | None, k: int) -> str:
    """The directory under RUN/shards of shard K: ``K``, or ``NAME-K`` for part NAME."""
    return str(k) if not part else f"{part}-{k}"


def part_of_kind(kind: str) -> str | None:
    """The part a staged manifest's kind names (``bulk-NAME`` → NAME, ``bulk`` → None)."""
    return kind[len(BULK) + 1:] if kind.startswith(BULK + "-") else None


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


def task_file(run_dir: Path, name: str) -> JsonObject:
    """What task ``name`` (gate, bulk-K) wrote about itself: job id, host, state, exit code."""
    return read_json(run_dir / SLURM_DIR / "tasks" / f"{name}.json", {}) or {}
