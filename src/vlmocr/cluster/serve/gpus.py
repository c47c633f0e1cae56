"""What ``nvidia-smi`` says about this job's GPUs: name and memory for run.json and the job log
(``gpu_memory``), or any other field (``query_gpus``, e.g. ``compute_cap``), and whether the
job's GPUs are joined by NVLink (``missing_nvlink``: ``nvidia-smi topo -m``).

Asked only where vlmocr starts a server. Only the GPUs ``CUDA_VISIBLE_DEVICES`` names are asked
for (``-i``): ``nvidia-smi`` alone lists every GPU of the node, not the ones SLURM gave this job.
A node without ``nvidia-smi``, or one whose driver does not answer, gives None — never an
error: the GPU is provenance here, not a condition of the run."""

from __future__ import annotations

import csv
import os
import re
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


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_topology(text: str) -> dict[tuple[str, str], str]:
    """``nvidia-smi topo -m``'s matrix: {(GPU index, GPU index): link} for every pair of GPUs
    (``NV12``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``); NIC columns and the legend left out."""
    rows = [_ANSI.sub("", line).rstrip() for line in text.splitlines() if line.strip()]
    header = next((r.split() for r in rows if r.split()[:1] == ["GPU0"]), None)
    if header is None:
        return {}
    gpus = [h for h in header if re.fullmatch(r"GPU\d+", h)]
    links: dict[tuple[str, str], str] = {}
    for row in rows:
        cells = row.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]) or len(cells) < len(gpus) + 1:
            continue
        for other, link in zip(gpus, cells[1:1 + len(gpus)]):
            if other != cells[0]:
                links[(cells[0][3:], other[3:])] = link
    return links


def missing_nvlink(environ: Mapping[str, str] | None = None,
                   timeout: float = QUERY_TIMEOUT) -> tuple[bool | None, str]:
    """Whether some pair of this job's GPUs has no NVLink between them (``nvidia-smi topo -m``):
    (True, "GPU0-GPU1 PHB"), (False, "NV12 …"), or (None, why it cannot be told)."""
    env = os.environ if environ is None else environ
    exe = shutil.which("nvidia-smi", path=env.get("PATH"))
    if exe is None:
        return None, "no nvidia-smi"
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=timeout, check=False,
                             env=dict(env))
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"nvidia-smi topo -m failed: {exc}"
    links = parse_topology(out.stdout) if out.returncode == 0 else {}
    if not links:
        return None, "nvidia-smi topo -m gave no GPU matrix"
    visible = [v for v in visible_devices(env) if v.isdigit()] or sorted({a for a, _ in links}, key=int)
    pairs = [(a, b) for i, a in enumerate(visible) for b in visible[i + 1:] if (a, b) in links]
    if not pairs:
        return None, "nvidia-smi topo -m does not list this job's GPUs"
    slow = [f"GPU{a}-GPU{b} {links[(a, b)]}" for a, b in pairs if not links[(a, b)].startswith("NV")]
    if slow:
        return True, ", ".join(slow)
    return False, ", ".join(f"GPU{a}-GPU{b} {links[(a, b)]}" for a, b in pairs)
