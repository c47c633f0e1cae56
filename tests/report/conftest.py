"""Fixtures for the HTML report tests: headless Chromium (Debian's `chromium`, installed by
scripts/install-browser.sh) driven over the DevTools protocol, and a page helper that fails a
test on any JavaScript dialog or uncaught exception.

Without Chromium the browser tests are skipped, or fail when VLMOCR_TEST_STRICT=1 (CI)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.chromium import Chromium, Page, find_chromium
from support.components import need


@pytest.fixture(scope="session")
def chromium() -> Iterator[Chromium]:
    exe = find_chromium()
    need(exe is not None, "chromium", "chromium")
    tmp = Path(tempfile.mkdtemp(prefix="vlmocr-chromium-"))
    browser = Chromium(exe, tmp / "profile")
    try:
        yield browser
    finally:
        browser.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def page(chromium: Chromium) -> Iterator[Page]:
    """A fresh tab; the test fails if the page raised an exception or opened a dialog."""
    p = chromium.new_page()
    try:
        yield p
        assert p.dialogs == [], f"a JavaScript dialog opened: {p.dialogs}"
        assert p.exceptions == [], f"uncaught JavaScript exceptions: {p.exceptions}"
        errors = [e for e in p.log_entries if e.get("level") == "error"]
        assert errors == [], f"browser errors: {errors}"
    finally:
        p.close()
