"""What ``nvidia-smi`` says about this job's GPUs: name and memory for run.json and the job log
(``gpu_memory``), or any other field (``query_gpus``, e.g. ``compute_cap``).

Asked only where vlmocr starts a server. Only the GPUs ``CUDA_VISIBLE_DEVICES`` names are asked
for (``-i``): ``nvidia-smi`` alone lists every GPU of the node, not the ones SLURM gave this job.
A node without ``nvidia-smi``, or one whose driver does not answer, gives None — never an
error: the GPU is provenance here, not a condition of the run."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

QUERY_TIMEOUT = 15.0  # a hung driver must not hold up a run that is otherwise ready


def visible_devices(environ: Mapping[str, str] | None = None) -> list[str]:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` names, as ``nvidia-smi -i`` takes them; [] when it is
    unset, names none, or names MIG slices (which ``-i`` does not take)."""
    env = os.environ if environ is None else environ
    entries = [e.strip() for e in (env.get("CUDA_VISIBLE_DEVICES") or "").split(",") if e.strip()]
    if not entries or entries[0] in ("-1", "NoDevFiles") or any(e.upper().startswith("MIG-") for e in entries):
        return []
    return entries


def query_gpus(fields: Sequence[str], environ: Mapping[str, str] | None = None,
               timeout: float = QUERY_TIMEOUT) -> list[dict[str, str]] | None:
    """One row per visible GPU: ``{field: value}`` as ``nvidia-smi --query-gpu=FIELDS
    --format=csv,noheader`` writes them (``"81920 MiB"``); None when it cannot be asked."""
    env = os.environ if environ is None else environ
    exe = shutil.which("nvidia-smi", path=env.get("PATH"))
    if exe is None:
        return None
    base = [exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"]
    visible = visible_devices(env)
    # With -i first; a CUDA_VISIBLE_DEVICES nvidia-smi does not understand (renumbered by a
    # container runtime) falls back to every GPU it sees.
    for argv in ([*base, "-i", ",".join(visible)], base) if visible else (base,):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=dict(env))
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode == 0:
            rows = [row for row in csv.reader(out.stdout.splitlines(), skipinitialspace=True) if row]
            return [dict(zip(fields, (v.strip() for v in row))) for row in rows if len(row) == len(fields)]
    return None


@dataclass(frozen=True)
class Gpu:
    index: str
    name: str
    memory_total: str  # as nvidia-smi writes it: "81920 MiB"
    memory_used: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def gpu_memory(environ: Mapping[str, str] | None = None) -> list[Gpu] | None:
    """The visible GPUs' names and memory (total, in use now), or None."""
    rows = query_gpus(("index", "name", "memory.total", "memory.used"), environ)
    if rows is None:
        return None
    return [Gpu(r["index"], r["name"], r["memory.total"], r["memory.used"]) for r in rows]


def memory_line(gpus: list[Gpu] | None) -> str:
    """The job log's one nvidia-smi memory line, every visible GPU on it."""
    if gpus is None:
        return "nvidia-smi memory: not available (no nvidia-smi, or it did not answer)"
    if not gpus:
        return "nvidia-smi memory: no GPU listed"
    return "nvidia-smi memory: " + "; ".join(
        f"GPU {g.index} {g.name} {g.memory_used} used of {g.memory_total}" for g in gpus)
