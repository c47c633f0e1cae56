"""The feed-rate and saturation benchmarks still run: each in --quick mode as a subprocess,
checked for its result lines. Nothing here is timed; the numbers live in BENCHMARKS.md."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support.components import GT, REPO

BENCH = REPO / "benchmarks"

pytestmark = pytest.mark.slow  # ~30 s each on a 2-core machine


def run_bench(name: str, *args: str, timeout: float = 600) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH / name), "--quick", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env={**os.environ, "VLMOCR_GT": str(GT)},  # the pages in the repository, never ../shared/gt
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_bench_feed_quick(tmp_path) -> None:
    out = run_bench("bench_feed.py", "--workdir", str(tmp_path))
    results = [ln for ln in out.splitlines() if ln.startswith("RESULT feed ")]
    assert len(results) == 2, out  # workers 1 and 2
    assert all("end to end ÷ raw pool" in ln and "steady state" in ln for ln in results), out
    assert "!!" not in out, out  # every run exited 0 with a record for every page
    assert "| raw pool ×2 |" in out and "| vlmocr run ×2 (end to end) |" in out, out


def test_bench_saturation_quick(tmp_path) -> None:
    out = run_bench("bench_saturation.py", "--workdir", str(tmp_path))
    results = [ln for ln in out.splitlines() if ln.startswith("RESULT saturation ")]
    # C = 8 and 32, concurrency C and 1.25 × C
    assert len(results) == 4, out
    assert all(" of C/L " in ln for ln in results), out
    assert "!!" not in out, out
    assert "raw render+encode of these pages" in out, out
