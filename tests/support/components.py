"""The components around the tests: the checkout, the ground truth in ../shared/gt, and what a
test does when one is missing (skip, or fail in CI with VLMOCR_TEST_STRICT=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
STRICT = os.environ.get("VLMOCR_TEST_STRICT") == "1"


def need(condition: bool, what: str) -> None:
    """Skip when a component is missing — but fail in CI (VLMOCR_TEST_STRICT=1)."""
    if not condition:
        if STRICT:
            pytest.fail(f"missing component in strict mode: {what}")
        pytest.skip(f"missing: {what}")
