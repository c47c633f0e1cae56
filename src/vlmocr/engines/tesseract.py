"""Tesseract through its CLI (pytesseract), one thread per page: the process pool supplies the
parallelism (OMP threads in every worker made pages 10x slower on 2 cores)."""

from __future__ import annotations

import os
import shutil
import tempfile

from ..exceptions import UsageError
from .base import PageInput, Reading

os.environ["OMP_THREAD_LIMIT"] = "1"


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


class TesseractEngine:
    name = "tesseract"
    needs_image = True

    def __init__(self, lang: str = "eng", psm: int = 3) -> None:
        import pytesseract

        if not tesseract_available():
            raise UsageError("--engine tesseract needs the tesseract binary (Debian: apt-get install tesseract-ocr)")
        os.environ["OMP_THREAD_LIMIT"] = "1"
        have = set(pytesseract.get_languages(config=""))
        missing = [part for part in lang.split("+") if part not in have]
        if missing:
            raise UsageError(
                f"tesseract has no language data for {'+'.join(missing)} "
                f"(installed: {', '.join(sorted(have))}; Debian: tesseract-ocr-<lang>)"
            )
        self._tess = pytesseract
        self.lang = lang
        self.psm = psm
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
