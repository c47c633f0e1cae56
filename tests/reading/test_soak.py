"""The soak, reduced for CI: 600 coded pages against the fake server injecting every fault kind,
5 kill -9 of `vlmocr run` at seeded random moments, resumes until done; then no page lost or
duplicated, attempts 1..n, every line parses, every ok text right, exit codes explainable.

The full version (10 000 pages, 20 kills) is ``benchmarks/bench_soak.py``; both share its code.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_soak.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_soak", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_soak"] = module
    spec.loader.exec_module(module)
    return module


def test_soak_600_pages_5_kills_all_faults(tmp_path):
    bench = _bench()
    assert all(0.01 <= r <= 0.10 for r in bench.FAULT_RATES.values())
    res = bench.soak(tmp_path, pages=600, kills=5, seed=7, per_doc=100, log=lambda m: None)
    report = bench.report(res)
    assert res.violations == [], report + "\n" + "\n".join(res.violations)
    assert sum(res.statuses_final.values()) == 600, report
    assert set(res.statuses_final) <= {"ok", "fallback", "loop", "truncated", "empty"}, report
    assert res.kills >= 3, report  # most kills must land before the run finishes by itself
    assert res.exit_codes.count(-9) == res.kills, report
    assert res.exit_codes[-1] in (0, 2), report
    # The faults really fired: the server saw each HTTP fault and the ladder climbed.
    for kind in ("429", "500", "drop", "malformed", "timeout"):
        assert res.server_outcomes.get(kind, 0) > 0, (kind, report)
    assert res.ladder_records > 0, report
