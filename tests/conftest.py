"""Shared fixtures: the ground-truth pages in ../shared/gt and the tesseract binary. The helpers
tests import (documents, the `vlmocr` command, records, components) live in tests/support."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.components import GT, need


@pytest.fixture
def gt() -> Path:
    need(GT.is_dir(), f"ground truth at {GT}")
    return GT


@pytest.fixture
def tesseract() -> str:
    exe = shutil.which("tesseract")
    need(exe is not None, "tesseract binary (apt-get install tesseract-ocr)")
    return exe  # type: ignore[return-value]
