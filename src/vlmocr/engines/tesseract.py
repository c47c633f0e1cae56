"""Tesseract through its CLI (pytesseract), one thread per page: the process pool supplies the
parallelism (OMP threads in every worker made pages 10x slower on 2 cores)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from ..exceptions import UsageError
from ..languages import installed_languages, resolve_lang
from ..runfolder.record import Line, Positions, WordBox
from .base import CpuEngine, EngineOptions, PageInput, Reading, weighted_mean

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

    def __init__(self, lang: str = "eng", psm: int = 3, version: str | None = None) -> None:
        """`version`: what the scheduler's check found, so that workers skip the two
        tesseract processes (languages, version) the check costs; `lang` is then the resolved
        name the check returned. Without it, `lang` is resolved against the installed data
        (aliases, either layout of script models: languages.py) and a missing pack is
        a one-line usage error naming its Debian package."""
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
        self.lang = resolve_lang(lang)
        self.version = str(pytesseract.get_tesseract_version())

    def read(self, page: PageInput, local_thresholds: bool = False) -> Reading:
        """`local_thresholds`: binarised by Tesseract's Sauvola (a threshold for each part of the
        page) instead of Otsu's one for the whole page — for a page read badly the usual way
        (reading/worker.py: faint carbon copies, stains, a dark scanner bed)."""
        assert page.image is not None
        dpi = int(page.dpi) if page.dpi else 300
        with tempfile.TemporaryDirectory(prefix="vlmocr-tess-") as tmp:
            source = page.file
            if not source:
                # A file written with fast PNG compression: Pillow's default level cost ~10 % of
                # each page (bench_tesseract.py). With `page.file` tesseract decodes the page
                # itself, exactly as the bare CLI does.
                source = os.path.join(tmp, "page.png")
                page.image.save(source, format="PNG", compress_level=1)
            text, tsv = self._text_and_tsv(source, os.path.join(tmp, "out"), dpi, local_thresholds)
        lines = tsv_lines(tsv)
        line_scores = [score for line in lines if (score := weighted_mean(line)) is not None]
        return Reading(text=text.strip("\n\x0c"), finish_reason="stop", model=f"tesseract:{self.lang}",
                       revision=self.version, confidence=weighted_mean([w for line in lines for w in line]),
                       line_confidences=line_scores, positions=tsv_positions(tsv, *page.image.size))

    def _text_and_tsv(self, source: str, base: str, dpi: int, local_thresholds: bool = False) -> tuple[str, str]:
        """The page's text and its TSV (word boxes and confidences) from one tesseract process:
        both renderers share the one recognition, so the confidences cost no second read."""
        sauvola = " -c thresholding_method=2" if local_thresholds else ""  # Tesseract ≥ 5.0
        self._tess.pytesseract.run_tesseract(
            source, base, extension="txt", lang=self.lang,
            config=f"--psm {self.psm} --dpi {dpi} -c tessedit_create_tsv=1{sauvola}",
        )
        with open(base + ".txt", encoding="utf-8", errors="replace") as f:
            text = f.read()
        with open(base + ".tsv", encoding="utf-8", errors="replace") as f:
            tsv = f.read()
        return text, tsv


def tsv_lines(tsv: str) -> list[list[tuple[str, float]]]:
    """Tesseract's TSV as lines of (word, confidence 0–1), in reading order. Rows of level 5
    are words; block, paragraph and line numbers say which line a word is on."""
    lines: dict[tuple[str, str, str, str], list[tuple[str, float]]] = {}
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5":
            continue
        try:
            conf = float(cols[10])
        except ValueError:
            continue
        word = cols[11]
        if conf < 0 or not word.strip():
            continue
        lines.setdefault((cols[1], cols[2], cols[3], cols[4]), []).append((word, min(conf, 100.0) / 100.0))
    return list(lines.values())


def tsv_positions(tsv: str, width: int, height: int) -> Positions:
    """Tesseract's TSV as word positions: its lines (level 4) with their words (level 5: box,
    confidence), in its reading order, each line in its block (a column, a paragraph of its own),
    the blocks numbered from 0 as they come."""
    lines: dict[tuple[str, str, str, str], Line] = {}
    blocks: dict[str, int] = {}
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] not in ("4", "5"):
            continue
        try:
            x, y, w, h = (int(c) for c in cols[6:10])
            conf = float(cols[10])
        except ValueError:
            continue
        key = (cols[1], cols[2], cols[3], cols[4])
        if cols[0] == "4":
            lines[key] = Line(box=(x, y, x + w, y + h), words=[], block=blocks.setdefault(cols[2], len(blocks)))
        elif key in lines and conf >= 0 and cols[11].strip():
            word: WordBox = (x, y, x + w, y + h, round(min(conf, 100.0) / 100.0, 3), cols[11])
            lines[key].words.append(word)
    return Positions(width=width, height=height, source="tesseract", lines=[ln for ln in lines.values() if ln.words])


def installed_data() -> frozenset[str] | None:
    """The language data the installed Tesseract has (`TESSDATA_PREFIX` applies; one
    `tesseract --list-langs` per process, shared with its pre-run check); None when no tesseract
    binary is on the PATH."""
    return installed_languages() if tesseract_available() else None


def _version() -> dict[str, str | None]:
    try:
        out = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, timeout=10)
        return {"tesseract": (out.stdout or out.stderr).splitlines()[0]}
    except Exception:
        return {"tesseract": None}


def _check(options: EngineOptions) -> EngineOptions:
    # Fail fast, before any page, on a missing binary/language; workers reuse the answers (the
    # version, and the language as the installed data names it: script/Fraktur → Fraktur).
    engine = TesseractEngine(lang=options.get("lang") or "eng")
    return {"tesseract_version": engine.version, "tesseract_lang": engine.lang}


def _build(options: EngineOptions) -> TesseractEngine:
    return TesseractEngine(lang=options.get("tesseract_lang") or options.get("lang") or "eng",
                           version=options.get("tesseract_version"))


# Its worker ~100 MB plus the CLI it runs ~55 MB. `auto`: second, for the scripts RapidOCR has
# no model for (Greek, Cyrillic, …), when installed with the language's data.
ENGINE = CpuEngine(
    "tesseract", _build, ocr=True, preload=("vlmocr.engines.tesseract",), versions=_version, check=_check,
    peak_worker_mb=160, reads_language=True, local_thresholds=True,
    auto_rank=2, auto_rule="Tesseract with --lang's data for other scripts (Greek, Cyrillic, …)",
    installed=installed_data,
)
