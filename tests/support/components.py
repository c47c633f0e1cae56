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
GT_PAGE_COUNT = 35  # rows of tests/data/gt/pages.csv: every page has its truth, seven their image too
STRICT = os.environ.get("VLMOCR_TEST_STRICT") == "1"


SYSTEM_PACKAGES_FILE = REPO / "scripts" / "system-packages.txt"


def system_packages() -> dict[str, str]:
    """scripts/system-packages.txt: the Debian packages the tests need (name → tag), the one list
    scripts/test.sh installs from."""
    out = {}
    for line in SYSTEM_PACKAGES_FILE.read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            out[fields[0]] = fields[1] if len(fields) > 1 else ""
    return out


def need(condition: bool, what: str, packages: tuple[str, ...] | str = ()) -> None:
    """Skip when a component is missing — but fail in CI (VLMOCR_TEST_STRICT=1). ``packages``:
    the Debian packages that provide it, each of which must be in scripts/system-packages.txt
    (a check naming another fails at once, present or not: test.sh would never install it)."""
    named = (packages,) if isinstance(packages, str) else tuple(packages)
    unlisted = [p for p in named if p not in system_packages()]
    if unlisted:
        pytest.fail(f"{', '.join(unlisted)}: not in {SYSTEM_PACKAGES_FILE.name}, so scripts/test.sh does not "
                    "install it; add it there")
    if not condition:
        install = f" (apt-get install {' '.join(named)}; scripts/test.sh does)" if named else ""
        if STRICT:
            pytest.fail(f"missing component in strict mode: {what}{install}")
        pytest.skip(f"missing: {what}{install}")


def need_tesseract_osd() -> None:
    """Tesseract and its orientation data (OSD): what turning a page upright asks."""
    import shutil

    from vlmocr import languages

    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    need("osd" in languages.installed_languages(), "tesseract OSD data", "tesseract-ocr-osd")
