"""How many worker processes memory holds.

A RapidOCR worker reaches ~1.5 GB on 2000 px pages, and `--workers` defaults to all cores: a
laptop with 8 cores and 8 GB would start 8 and meet the OOM killer mid-run. The default is
therefore the cores or what memory holds of the engine's workers (engines/registry.py,
CpuEngine.peak_worker_mb), whichever is fewer, never below 1. Memory is the kernel's
MemAvailable, or less when a cgroup limits this process (a SLURM job's --mem, a container):
the limit's headroom, on this process's cgroup and every parent. A number the user gives is
obeyed, with a warning when memory holds fewer.

Every reader takes its paths, so tests hand it files; VLMOCR_MEMINFO (envvars.MEMINFO) points a
whole run at one file in /proc/meminfo's format instead of this machine's figures."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .envvars import MEMINFO

MB = 1024 * 1024
PROC_MEMINFO = Path("/proc/meminfo")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Memory:
    available: int  # bytes new worker processes may still take
    source: str  # where the figure comes from, for the note and run.json


def _number(path: Path) -> int | None:
    """A cgroup file's one number; None when absent, unreadable or 'max' (no limit)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stat(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def meminfo_available(path: Path) -> int | None:
    """MemAvailable (bytes) of a file in /proc/meminfo's format."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                value, *unit = line.split(":", 1)[1].split()
                return int(value) * (1024 if unit and unit[0].lower() == "kb" else 1)
    except (OSError, ValueError):
        pass
    return None


def cgroup_headroom(directory: Path) -> int | None:
    """What one cgroup's memory limit leaves (bytes): v2's memory.max or v1's
    memory.limit_in_bytes, less what its processes use. Page cache the kernel drops before it
    kills (inactive_file) is not counted as used. None: no limit there."""
    for limit_file, usage_file, inactive in (("memory.max", "memory.current", "inactive_file"),
                                             ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")):
        limit = _number(directory / limit_file)
        if limit is None:
            continue
        used = max(0, (_number(directory / usage_file) or 0) - _stat(directory / "memory.stat", inactive))
        return max(0, limit - used)
    return None


def cgroup_dirs(self_cgroup: Path, root: Path) -> list[Path]:
    """The memory cgroup directories of the process whose /proc/PID/cgroup is `self_cgroup`,
    its own first, then each parent up to the mount: a limit on a parent applies too (SLURM
    limits the job, its steps and tasks are below). v2's line is `0::/path`; v1's names the
    memory controller. Without a cgroup namespace the path is the host's, under `root`."""
    dirs: list[Path] = []
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return dirs
    for line in lines:
        ident, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if ident == "0" and controllers == "":
            bases = [root, root / "unified"]  # v2; or its hybrid mount (memory is v1's there)
        elif "memory" in controllers.split(","):
            bases = [root / "memory"]
        else:
            continue
        parts = [p for p in path.split("/") if p and p not in (".", "..")]
        for base in bases:
            for depth in range(len(parts), -1, -1):
                here = base.joinpath(*parts[:depth])
                if here.is_dir() and here not in dirs:
                    dirs.append(here)
    return dirs


def available_memory(meminfo: Path = PROC_MEMINFO, self_cgroup: Path | None = PROC_SELF_CGROUP,
                     cgroup_root: Path = CGROUP_ROOT) -> Memory | None:
    """The least of MemAvailable and every cgroup limit's headroom; None: nothing readable
    (not Linux): the cores alone decide."""
    figures: list[Memory] = []
    free = meminfo_available(meminfo)
    if free is not None:
        figures.append(Memory(free, f"MemAvailable in {meminfo}"))
    for directory in cgroup_dirs(self_cgroup, cgroup_root) if self_cgroup is not None else []:
        headroom = cgroup_headroom(directory)
        if headroom is not None:
            figures.append(Memory(headroom, f"the cgroup limit of {directory}"))
    return min(figures, key=lambda m: m.available, default=None)


def system_memory(environ: Mapping[str, str] | None = None) -> Memory | None:
    """This machine's figure; with VLMOCR_MEMINFO set, that file's MemAvailable alone."""
    given = (os.environ if environ is None else environ).get(MEMINFO, "").strip()
    if given:
        return available_memory(meminfo=Path(given), self_cgroup=None)
    return available_memory()


def available_cores(environ: Mapping[str, str] | None = None) -> int:
    """The cores this process may use: its CPU affinity (a cgroup cpuset, `taskset`, SLURM's
    task/affinity), and no more than a SLURM job's --cpus-per-task, which a cluster without
    affinity binding (TaskPlugin=task/none) leaves only in the environment. os.cpu_count()
    counts the whole node: on a 64-core node a job given 8 CPUs would start 64 workers."""
    env = os.environ if environ is None else environ
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    slurm = env.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0:
        cores = min(cores, int(slurm))
    return max(1, cores)


def _gb(mb: float) -> str:
    return f"{mb / 1024:.1f} GB"


@dataclass(frozen=True)
class WorkerCount:
    """The pool's size and why (run.json's `workers`)."""

    count: int
    cores: int
    asked: int | None  # --workers, VLMOCR_WORKERS or the config file; None: the default
    fits: int | None  # workers memory holds; None: no limit (light workers, or memory unknown)
    engines: tuple[str, ...]
    per_worker_mb: int | None
    available_mb: int | None
    source: str | None

    @property
    def reason(self) -> str:
        held = (f"{self.available_mb} MB available ({self.source}) hold {self.fits} worker(s) of ~{self.per_worker_mb} MB "
                f"({'+'.join(self.engines)})") if self.fits is not None else ""
        if self.asked is not None:
            over = f"; more than memory holds: {held}" if self.fits is not None and self.asked > self.fits else ""
            return f"asked for {self.asked}{over}"
        if self.fits is not None and self.fits < self.cores:
            return f"memory: {held}, fewer than the {self.cores} cores"
        if self.fits is not None:
            return f"one per core ({self.cores}); {held}"
        why = "its workers are light" if self.per_worker_mb is None else "memory unknown"
        return f"one per core ({self.cores}); {why}"

    def note(self) -> str | None:
        """One stderr line when memory lowered the default or the number asked exceeds it."""
        if self.fits is None or self.per_worker_mb is None or self.available_mb is None:
            return None
        needs = (f"{'+'.join(self.engines)} needs ~{_gb(self.per_worker_mb)} per worker and "
                 f"{_gb(self.available_mb)} are available ({self.source})")
        if self.asked is None and self.count < self.cores:
            return f"--workers {self.count}, not {self.cores}: {needs}; --workers N overrides"
        if self.asked is not None and self.asked > self.fits:
            return (f"[yellow]--workers {self.asked} is more than memory holds: {needs}, enough for {self.fits}; "
                    "workers may be killed for lack of memory")
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "cores": self.cores, "asked": self.asked, "memory_fits": self.fits,
                "engines": list(self.engines), "per_worker_mb": self.per_worker_mb,
                "available_mb": self.available_mb, "memory_source": self.source, "reason": self.reason}


def choose_workers(*, cores: int, asked: int | None, engines: tuple[str, ...], per_worker_mb: int | None,
                   memory: Memory | None) -> WorkerCount:
    """`asked` is obeyed; else the cores, or fewer when memory holds fewer of `per_worker_mb`."""
    fits = None
    if per_worker_mb and memory is not None:
        fits = max(1, memory.available // (per_worker_mb * MB))
    default = min(cores, fits) if fits is not None else cores
    return WorkerCount(count=asked if asked is not None else max(1, default), cores=cores, asked=asked, fits=fits,
                       engines=engines, per_worker_mb=per_worker_mb,
                       available_mb=memory.available // MB if memory is not None else None,
                       source=memory.source if memory is not None else None)
