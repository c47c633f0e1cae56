"""Tesseract through its CLI (pytesseract), one thread per page: the process pool supplies the
parallelism (OMP threads in every worker made pages 10x slower on 2 cores)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any

from ..exceptions import UsageError
from .base import PageInput, Reading

os.environ["OMP_THREAD_LIMIT"] = "1"


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


def _pytesseract() -> Any:
    """pytesseract, imported without pandas: it imports pandas whenever installed, for a
    DataFrame output never asked for here, and that took 0.55 s of each run's start-up."""
    if "pytesseract" in sys.modules or "pandas" in sys.modules:
        import pytesseract
        return pytesseract
    sys.modules["pandas"] = None  # type: ignore[assignment]  # makes `import pandas` fail fast
    try:
        import pytesseract
    finally:
        del sys.modules["pandas"]
    return pytesseract


class TesseractEngine:
    name = "tesseract"
    needs_image = True

    def __init__(self, lang: str = "eng", psm: int = 3, version: str | None = None) -> None:
        """`version`: what the scheduler's check found, so that workers skip the two
        tesseract processes (languages, version) the check costs."""
        pytesseract = _pytesseract()
        self._tess = pytesseract
        self.lang = lang
        self.psm = psm
        os.environ["OMP_THREAD_LIMIT"] = "1"
        if version is not None:
            self.version = version
            return
        if not tesseract_available():
            raise UsageError("--engine tesseract needs the tesseract binary (Debian: apt-get install tesseract-ocr)")
        have = set(pytesseract.get_languages(config=""))
        missing = [part for part in lang.split("+") if part not in have]
        if missing:
            raise UsageError(
                f"tesseract has no language data for {'+'.join(missing)} "
                f"(installed: {', '.join(sorted(have))}; Debian: tesseract-ocr-<lang>)"
            )
        self.version = str(pytesseract.get_tesseract_version())

    def read(self, page: PageInput) -> Reading:
        assert page.image is not None
        dpi = int(page.dpi) if page.dpi else 300
        config = f"--psm {self.psm} --dpi {dpi}"
        if page.file:
            # The file is the page: tesseract decodes it itself, exactly as the bare CLI does.
            text = self._tess.image_to_string(page.file, lang=self.lang, config=config)
        else:
            # Otherwise a file written with fast PNG compression: pytesseract's own save uses
            # Pillow's default level and cost ~10 % of each page (bench_tesseract.py).
            with tempfile.NamedTemporaryFile(suffix=".png", prefix="vlmocr-tess-") as tmp:
                page.image.save(tmp.name, format="PNG", compress_level=1)
                text = self._tess.image_to_string(tmp.name, lang=self.lang, config=config)
        return Reading(text=text.strip("\n\x0c"), finish_reason="stop", model=f"tesseract:{self.lang}", revision=self.version)
