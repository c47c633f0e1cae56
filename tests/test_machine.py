"""The default --workers is limited by memory (vlmocr/machine.py): MemAvailable and the cgroup
limits read from files (here fake ones under tmp_path: the readers take paths), divided by the
engines' per-worker peak (engines/registry.py); a number the user gives is obeyed and warned
about. End to end: a real `vlmocr run` with RapidOCR on a real page, told by VLMOCR_MEMINFO that
2 GB are available, starts one worker, says so once on stderr, and run.json records why."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.cli import run_cli
from support.components import GT, need
from vlmocr.engines.registry import CPU_ENGINES, peak_worker_mb
from vlmocr.machine import (
    MB,
    Memory,
    available_cores,
    available_memory,
    cgroup_dirs,
    cgroup_headroom,
    choose_workers,
    meminfo_available,
)

GB = 1024 * MB
RAPIDOCR_MB = CPU_ENGINES["rapidocr"].peak_worker_mb


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def meminfo(tmp_path: Path, available_kb: int) -> Path:
    return write(tmp_path / "meminfo", f"MemTotal:       32000000 kB\nMemFree:          120000 kB\n"
                                       f"MemAvailable:   {available_kb:>8} kB\nBuffers:           1000 kB\n")


def test_meminfo_available_is_read_in_bytes(tmp_path):
    assert meminfo_available(meminfo(tmp_path, 4823449)) == 4823449 * 1024
    assert meminfo_available(write(tmp_path / "old", "MemTotal: 1000 kB\nMemFree: 10 kB\n")) is None
    assert meminfo_available(tmp_path / "absent") is None


def test_a_cgroup_v2_limit_on_a_parent_applies_less_its_usage(tmp_path):
    """SLURM's --mem is set on the job; the process sits in a step below it whose limit is 'max'."""
    root = tmp_path / "cgroup"
    self_cgroup = write(tmp_path / "self", "0::/system.slice/slurmstepd.scope/job_7/step_0\n")
    job = root / "system.slice" / "slurmstepd.scope" / "job_7"
    write(job / "memory.max", f"{6 * GB}\n")
    write(job / "memory.current", f"{2 * GB}\n")
    write(job / "memory.stat", f"anon {GB}\nfile {GB}\ninactive_file {GB // 2}\nactive_file {GB // 2}\n")
    write(job / "step_0" / "memory.max", "max\n")
    write(job / "step_0" / "memory.current", f"{GB}\n")
    dirs = cgroup_dirs(self_cgroup, root)
    assert dirs[0] == job / "step_0" and job in dirs and root in dirs
    assert cgroup_headroom(job / "step_0") is None  # 'max': no limit there
    assert cgroup_headroom(job) == 6 * GB - (2 * GB - GB // 2)  # dropped page cache is not used
    mem = available_memory(meminfo(tmp_path, 20 * 1024 * 1024), self_cgroup, root)
    assert mem == Memory(6 * GB - (2 * GB - GB // 2), f"the cgroup limit of {job}")
    # More free memory in the limit than on the machine: MemAvailable decides.
    small = available_memory(meminfo(tmp_path, 1024 * 1024), self_cgroup, root)
    assert small.available == GB and "MemAvailable" in small.source


def test_a_cgroup_v1_limit_and_the_unlimited_root(tmp_path):
    root = tmp_path / "cgroup"
    self_cgroup = write(tmp_path / "self", "9:pids:/\n4:memory:/slurm/uid_1/job_9\n1:cpu,cpuacct:/\n")
    write(root / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    write(root / "memory" / "memory.usage_in_bytes", f"{30 * GB}\n")
    job = root / "memory" / "slurm" / "uid_1" / "job_9"
    write(job / "memory.limit_in_bytes", f"{3 * GB}\n")
    write(job / "memory.usage_in_bytes", f"{GB}\n")
    write(job / "memory.stat", "cache 0\ntotal_inactive_file 0\n")
    assert cgroup_dirs(self_cgroup, root) == [job, job.parent, job.parent.parent, root / "memory"]
    mem = available_memory(meminfo(tmp_path, 16 * 1024 * 1024), self_cgroup, root)
    assert (mem.available, mem.source) == (2 * GB, f"the cgroup limit of {job}")
    # Nothing readable (not Linux): no figure; the cores alone decide.
    assert available_memory(tmp_path / "none", tmp_path / "none", root) is None


def test_the_default_is_what_memory_holds_and_a_given_number_is_obeyed():
    laptop = Memory(int(4.6 * GB), "MemAvailable in /proc/meminfo")
    low = choose_workers(cores=8, asked=None, engines=("rapidocr",), per_worker_mb=1540, memory=laptop)
    assert (low.count, low.fits) == (3, 3)
    assert low.note() == ("--workers 3, not 8: rapidocr needs ~1.5 GB per worker and 4.6 GB are available "
                          "(MemAvailable in /proc/meminfo); --workers N overrides")
    assert low.as_dict()["reason"].startswith("memory: 4710 MB available") and low.as_dict()["count"] == 3
    # Given: obeyed, warned about when memory holds fewer; not when it holds them.
    over = choose_workers(cores=8, asked=8, engines=("rapidocr",), per_worker_mb=1540, memory=laptop)
    assert over.count == 8 and "--workers 8 is more than memory holds" in over.note() and "enough for 3" in over.note()
    fine = choose_workers(cores=8, asked=2, engines=("rapidocr",), per_worker_mb=1540, memory=laptop)
    assert (fine.count, fine.note(), fine.reason) == (2, None, "asked for 2")
    # Memory for more workers than cores: the cores; less than one worker's peak: still one.
    big = choose_workers(cores=8, asked=None, engines=("rapidocr",), per_worker_mb=1540, memory=Memory(64 * GB, "m"))
    assert (big.count, big.fits, big.note()) == (8, 42, None)
    tiny = choose_workers(cores=8, asked=None, engines=("rapidocr",), per_worker_mb=1540, memory=Memory(GB // 2, "m"))
    assert tiny.count == 1 and tiny.note().startswith("--workers 1, not 8")
    # Light workers (a VLM run's renderers, the text layer), or memory unknown: the cores.
    light = choose_workers(cores=8, asked=None, engines=(), per_worker_mb=None, memory=laptop)
    assert (light.count, light.fits, light.note()) == (8, None, None)
    unknown = choose_workers(cores=8, asked=None, engines=("rapidocr",), per_worker_mb=1540, memory=None)
    assert (unknown.count, unknown.reason) == (8, "one per core (8); memory unknown")


def test_a_worker_holding_two_engines_needs_both_peaks():
    tess, rapid = CPU_ENGINES["tesseract"].peak_worker_mb, CPU_ENGINES["rapidocr"].peak_worker_mb
    assert tess and rapid and rapid > 5 * tess  # BENCHMARKS.md: ~1.5 GB against ~160 MB
    assert peak_worker_mb(("tesseract+rapidocr",)) == peak_worker_mb(("tesseract", "rapidocr")) == tess + rapid
    assert peak_worker_mb(("rapidocr", "tesseract+rapidocr")) == tess + rapid  # each engine once
    assert peak_worker_mb(("textlayer",)) is None and peak_worker_mb(()) is None


def test_run_with_2_gb_available_starts_one_rapidocr_worker(tmp_path):
    need((os.cpu_count() or 1) >= 2, "two cores (one is the default anyway)")
    page = GT / "goethe" / "goethe_0014.png"
    env = {"VLMOCR_MEMINFO": str(meminfo(tmp_path, 2 * 1024 * 1024)), "VLMOCR_WORKERS": ""}
    run = tmp_path / "run"
    res = run_cli("run", str(page), "--out", str(run), "--engine", "rapidocr", env=env)
    assert res.returncode == 0, res.stderr
    cores = os.cpu_count()
    line = (f"--workers 1, not {cores}: rapidocr needs ~1.5 GB per worker and 2.0 GB are available "
            f"(MemAvailable in {tmp_path / 'meminfo'}); --workers N overrides")
    assert res.stderr.count(line) == 1, res.stderr
    info = json.loads((run / "run.json").read_text())
    assert info["workers"] == {
        "count": 1, "cores": cores, "asked": None, "memory_fits": 1, "engines": ["rapidocr"],
        "per_worker_mb": RAPIDOCR_MB, "available_mb": 2048, "memory_source": f"MemAvailable in {tmp_path / 'meminfo'}",
        "reason": f"memory: 2048 MB available (MemAvailable in {tmp_path / 'meminfo'}) hold 1 worker(s) of "
                  f"~{RAPIDOCR_MB} MB (rapidocr), fewer than the {cores} cores"}
    assert len((run / "pages.jsonl").read_text().splitlines()) == 1

    # Given (here by VLMOCR_WORKERS): obeyed, and warned about.
    res = run_cli("run", str(page), "--out", str(tmp_path / "run2"), "--engine", "rapidocr",
                  env={**env, "VLMOCR_WORKERS": "2"})
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("--workers 2 is more than memory holds") == 1 and "not 2:" not in res.stderr
    given = json.loads((tmp_path / "run2" / "run.json").read_text())["workers"]
    assert (given["count"], given["asked"], given["memory_fits"]) == (2, 2, 1)


def test_the_cores_are_the_allocation_not_the_node(tmp_path):
    """os.cpu_count() counts the whole node: a SLURM job given 8 of 64 CPUs started 64 workers.
    The cores are this process's affinity, and no more than SLURM_CPUS_PER_TASK (a cluster
    without affinity binding, TaskPlugin=task/none as here, says it only in the environment)."""
    mine = len(os.sched_getaffinity(0))
    assert available_cores({}) == mine
    assert available_cores({"SLURM_CPUS_PER_TASK": "1"}) == 1
    assert available_cores({"SLURM_CPUS_PER_TASK": "4096"}) == mine
    assert available_cores({"SLURM_CPUS_PER_TASK": "x"}) == mine
    page = GT / "goethe" / "goethe_0014.png"
    run = tmp_path / "run"
    res = run_cli("run", str(page), "--out", str(run), "--engine", "tesseract",
                  env={"SLURM_CPUS_PER_TASK": "1", "VLMOCR_WORKERS": ""})
    assert res.returncode in (0, 2), res.stderr  # 2: Fraktur read as English may be flagged
    workers = json.loads((run / "run.json").read_text())["workers"]
    assert (workers["count"], workers["cores"]) == (1, 1)
