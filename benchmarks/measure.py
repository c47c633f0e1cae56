"""`vlmocr run` in a subprocess with its peak memory: the resident set summed over its whole
process tree (the run, its pool, their children), sampled every 50 ms from /proc, beside wall
time and the exit code. Used by bench_bad_input.py and bench_hostile_endpoint.py."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _tree_rss_kb(root_pid: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
            fields = stat[stat.rfind(")") + 2:].split()
            pid = int(entry)
            children.setdefault(int(fields[1]), []).append(pid)
            rss[pid] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, ValueError, IndexError):
            continue
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_vlmocr(args: list[str], timeout: float = 1800, cmd: list[str] | None = None,
               src: Path = ROOT / "src") -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    cmd = [*(cmd or [sys.executable, "-m", "vlmocr", "run"]), *args]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
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
        "peak_tree_rss_mb": peak[0] / 1024,
        "maxrss_mb": usage.ru_maxrss / 1024,
        "stdout": b"".join(out_chunks).decode("utf-8", "replace"),
        "stderr": b"".join(err_chunks).decode("utf-8", "replace"),
    }
