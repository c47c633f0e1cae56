"""The components around the tests: the checkout, the ground-truth pages copied into tests/data/gt,
and what a test does when one is missing (skip, or fail in CI with VLMOCR_TEST_STRICT=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A few pages of every collection of the development split, with their licences (README there).
# Never ../shared/gt or $VLMOCR_GT: a bare clone has neither, and the tests must pass on one.
GT = REPO / "tests" / "data" / "gt"
GT_PAGE_COUNT = 34  # rows of tests/data/gt/pages.csv: every page has its truth, four their image too
STRICT = os.environ.get("VLMOCR_TEST_STRICT") == "1"


def need(condition: bool, what: str) -> None:
    """Skip when a component is missing — but fail in CI (VLMOCR_TEST_STRICT=1)."""
    if not condition:
        if STRICT:
            pytest.fail(f"missing component in strict mode: {what}")
        pytest.skip(f"missing: {what}")
