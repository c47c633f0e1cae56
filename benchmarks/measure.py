"""`vlmocr run` in a subprocess with its peak memory (the resident set summed over its whole
process tree: the run, its pool, their children) and its CPU time, sampled every 50 ms from
/proc, beside wall time and the exit code. Used by bench_bad_input.py and bench_hostile_endpoint.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _tree(root_pid: int, cpu: dict[tuple[int, int], float]) -> int:
    """The resident set (kB) of the process tree under `root_pid` now; and into `cpu`, each of
    its processes' own CPU seconds so far, by (pid, start time) so that a reused pid is another
    process. Sampled, because the pool's workers are the forkserver's children, and their usage
    is not in what the run reports to its parent when it exits."""
    children: dict[int, list[int]] = {}
    facts: dict[int, tuple[int, float, int]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
            fields = stat[stat.rfind(")") + 2:].split()
            pid = int(entry)
            children.setdefault(int(fields[1]), []).append(pid)
            facts[pid] = (int(fields[21]) * page_kb, (int(fields[11]) + int(fields[12])) / tick, int(fields[19]))
        except (OSError, ValueError, IndexError):
            continue
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        if pid in facts:
            rss, seconds, start = facts[pid]
            total += rss
            cpu[(pid, start)] = max(seconds, cpu.get((pid, start), 0.0))
        stack.extend(children.get(pid, []))
    return total


def final_records(run: Path) -> dict[str, dict[str, Any]]:
    """A run folder's records by doc_id (one page a document in the benchmarks that use it): the
    last line of a page wins, as a retried page's newer record does."""
    out: dict[str, dict[str, Any]] = {}
    with (run / "pages.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            out[rec["doc_id"]] = rec
    return out


def run_vlmocr(args: list[str], timeout: float = 1800, cmd: list[str] | None = None,
               src: Path = ROOT / "src") -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    cmd = [*(cmd or [sys.executable, "-m", "vlmocr", "run"]), *args]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = [0]
    cpu: dict[tuple[int, int], float] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree(proc.pid, cpu))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for t in readers:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    done.set()
    for t in readers:
        t.join(timeout)
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        # CPU seconds of the run's whole tree (its workers, their tesseract children) as sampled
        # every 50 ms: a process's last < 50 ms and processes shorter than that are not in it.
        "cpu_s": max(usage.ru_utime + usage.ru_stime, sum(cpu.values())),
        "peak_tree_rss_mb": peak[0] / 1024,
        "maxrss_mb": usage.ru_maxrss / 1024,
        "stdout": b"".join(out_chunks).decode("utf-8", "replace"),
        "stderr": b"".join(err_chunks).decode("utf-8", "replace"),
    }


def run_finished(args: list[str], timeout: float = 1800) -> dict[str, Any]:
    """`run_vlmocr` of a run that must finish: exit 0, or 2 (finished, some pages left for
    review — read all the same); anything else ends the benchmark with the run's stderr."""
    res = run_vlmocr(args, timeout=timeout)
    if res["rc"] not in (0, 2):
        raise SystemExit(f"vlmocr run {' '.join(args)} exited {res['rc']}:\n{res['stderr'][-3000:]}")
    return res
