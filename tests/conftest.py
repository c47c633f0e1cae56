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
