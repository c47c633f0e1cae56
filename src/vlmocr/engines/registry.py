"""Every engine's name in one place: CPU engines as data (how to build one in a worker, what the
forkserver preloads for it, how to ask its version, what to check before any page), plus the
HTTP engine. A new CPU engine is one file plus one entry here."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import Any, Callable

from ..runfolder.rundir import dist_version
from ..runfolder.record import JsonObject
from .base import EngineOptions


def _tesseract_version() -> dict[str, str | None]:
    try:
        out = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, timeout=10)
        return {"tesseract": (out.stdout or out.stderr).splitlines()[0]}
    except Exception:
        return {"tesseract": None}


def _tesseract_check(options: EngineOptions) -> EngineOptions:
    from .tesseract import TesseractEngine

    # Fail fast, before any page, on a missing binary/language; workers reuse the answers (the
    # version, and the language as the installed data names it: script/Fraktur → Fraktur).
    engine = TesseractEngine(lang=options.get("lang") or "eng")
    return {"tesseract_version": engine.version, "tesseract_lang": engine.lang}


def _textlayer(options: EngineOptions) -> Any:
    from .textlayer import TextLayerEngine

    return TextLayerEngine()


def _rapidocr_settings() -> JsonObject:
    # RapidOCR's settings change what it reads: a page read with other settings is read again.
    from .rapidocr import settings_tag

    return {"rapidocr": settings_tag()}


def _rapidocr(options: EngineOptions) -> Any:
    from .rapidocr import RapidOcrEngine

    return RapidOcrEngine(threads=int(options.get("threads", 1)))


def _tesseract(options: EngineOptions) -> Any:
    from .tesseract import TesseractEngine

    return TesseractEngine(lang=options.get("tesseract_lang") or options.get("lang") or "eng",
                           version=options.get("tesseract_version"))


@dataclass(frozen=True)
class CpuEngine:
    name: str
    build: Callable[[EngineOptions], Any] | None  # in a worker: options → engine (None: a composite)
    ocr: bool  # reads page images (what `--ocr-engine` may name); the text layer does not
    preload: tuple[str, ...] = ()  # modules the forkserver imports once for every worker
    versions: Callable[[], dict[str, str | None]] = field(default=lambda: {})
    check: Callable[[EngineOptions], EngineOptions] | None = None  # before any page: extra options
    # A composite reads each page with every part and keeps the reading with the better quality
    # signal (reading/worker.py, engines/choice.pick); the record names the part that read it.
    parts: tuple[str, ...] = ()
    # The resident memory a worker reading with it reaches (MB; None: light), measured on 2000 px
    # pages (BENCHMARKS.md, "Engines on ../shared/gt"): the default --workers is what memory
    # holds of these (reading/memory.py), lest a laptop's 8 workers meet the OOM killer.
    peak_worker_mb: int | None = None
    # Reads with language data (`--lang`, a document's language): the language is its share of
    # the settings key, and a worker keeps one instance per language.
    reads_language: bool = False
    # Its share of the settings key besides the language: what else changes what it reads.
    key_share: Callable[[], JsonObject] = field(default=lambda: {})

    def key_material(self, lang: str) -> JsonObject:
        """This engine's part of a page's settings key when it reads with `lang`."""
        return {**({"lang": lang} if self.reads_language else {}), **self.key_share()}


def composite(*members: CpuEngine) -> CpuEngine:
    """`a+b`: every part's preload, versions and pre-run check."""
    checks = [m.check for m in members if m.check is not None]

    def versions() -> dict[str, str | None]:
        return {k: v for m in members for k, v in m.versions().items()}

    def check(options: EngineOptions) -> EngineOptions:
        out: EngineOptions = {}
        for c in checks:
            out.update(c(options))
        return out

    peaks = [m.peak_worker_mb for m in members if m.peak_worker_mb]
    # A worker holds every part's engine at once.
    return CpuEngine("+".join(m.name for m in members), None, ocr=True,
                     preload=tuple(dict.fromkeys(p for m in members for p in m.preload)), versions=versions,
                     check=check if checks else None, parts=tuple(m.name for m in members),
                     peak_worker_mb=sum(peaks) if peaks else None)


_TEXTLAYER = CpuEngine("textlayer", _textlayer, ocr=False)
# RapidOCR: 0.77 GB after the first page, 1.54 GB after 86 (onnxruntime's arenas grow with the
# largest page seen); Tesseract: its worker ~100 MB plus the CLI it runs ~55 MB.
_RAPIDOCR = CpuEngine("rapidocr", _rapidocr, ocr=True, preload=("rapidocr", "onnxruntime"),
                      versions=lambda: {"rapidocr": dist_version("rapidocr"),
                                        "onnxruntime": dist_version("onnxruntime")},
                      peak_worker_mb=1540, key_share=_rapidocr_settings)
_TESSERACT = CpuEngine("tesseract", _tesseract, ocr=True, preload=("vlmocr.engines.tesseract",),
                       versions=_tesseract_version, check=_tesseract_check, peak_worker_mb=160,
                       reads_language=True)
CPU_ENGINES: dict[str, CpuEngine] = {e.name: e for e in (
    _TEXTLAYER, _RAPIDOCR, _TESSERACT,
    # Tesseract first: it wins a tie (engines/choice.pick), being the better engine on average.
    composite(_TESSERACT, _RAPIDOCR),
)}
OCR_ENGINES = tuple(name for name, e in CPU_ENGINES.items() if e.ocr)
HTTP_ENGINE = "openai"
ENGINE_CHOICES = ("auto", *CPU_ENGINES, HTTP_ENGINE)


def ocr_engine_names() -> str:
    """`rapidocr | tesseract | tesseract+rapidocr (both; …)`: what `--ocr-engine` may name, for help."""
    return " | ".join(f"{name} (both; the better signal per page)" if CPU_ENGINES[name].parts else name
                      for name in OCR_ENGINES)


def make_cpu_engine(name: str, options: EngineOptions) -> Any:
    entry = CPU_ENGINES.get(name)
    if entry is None or entry.build is None:
        raise ValueError(f"unknown CPU engine {name!r}" if entry is None else f"{name} is read by its parts")
    return entry.build(options)


def reads_language(name: str) -> bool:
    """Does `name` (or a part of it) read with language data?"""
    return any(CPU_ENGINES[p].reads_language for p in engine_parts(name) if p in CPU_ENGINES)


def engine_key_material(name: str, lang: str) -> JsonObject:
    """The share of a page's settings key of the engine(s) `name` reads with, in `lang`."""
    out: JsonObject = {}
    for part in engine_parts(name):
        if part in CPU_ENGINES:
            out.update(CPU_ENGINES[part].key_material(lang))
    return out


def engine_parts(name: str) -> tuple[str, ...]:
    """The engines that read a page for `name`: its parts for a composite, else itself."""
    entry = CPU_ENGINES.get(name)
    return entry.parts if entry is not None and entry.parts else (name,)


def peak_worker_mb(names: tuple[str, ...]) -> int | None:
    """What a worker that may read with every engine of `names` reaches (MB), each part counted
    once (a worker builds an engine on first use and keeps it); None: only light engines."""
    parts = dict.fromkeys(p for name in names for p in engine_parts(name))
    peaks = [mb for p in parts if p in CPU_ENGINES and (mb := CPU_ENGINES[p].peak_worker_mb)]
    return sum(peaks) if peaks else None


def preload_modules(names: tuple[str, ...]) -> list[str]:
    return [module for name in names if name in CPU_ENGINES for module in CPU_ENGINES[name].preload]
