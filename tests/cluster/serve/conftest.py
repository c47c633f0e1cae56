"""Fixtures of the `vlmocr serve` tests: a private TMPDIR for the server, a coded PDF to read."""

from __future__ import annotations

from pathlib import Path

import pytest

from vlmocr.testing.pagecode import make_coded_pdf


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    d = tmp_path / "scratch"
    d.mkdir()
    return d


@pytest.fixture
def coded(tmp_path) -> Path:
    return make_coded_pdf(tmp_path / "coded.pdf", [1, 2, 3, 4])
