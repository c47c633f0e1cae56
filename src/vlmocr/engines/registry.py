"""Every engine in one place. A CPU engine declares itself in its own file (`ENGINE`, a
base.CpuEngine: its name, how a worker builds it, what the forkserver preloads, its version,
its pre-run check, its language data and settings-key share, its rank for `auto`); this module
lists them, builds the composite, and answers for all of them: `--ocr-engine`'s choices and
help, the settings key, the auto rule (engines/choice.py). A new CPU engine is one file plus its
name in the list below."""

from __future__ import annotations

import functools
from typing import Any

from ..runfolder.record import JsonObject
from . import rapidocr, tesseract, textlayer
from .base import CpuEngine, EngineOptions
from .plugins import wrap_engine


def composite(*members: CpuEngine, cascade: bool = False) -> CpuEngine:
    """`a+b` (every part reads every page), or the cascade `a,b` (a part reads a page only when
    the ones before it failed their signal): every part's preload, versions and pre-run check."""
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
    return CpuEngine(("," if cascade else "+").join(m.name for m in members), None, ocr=True, cascade=cascade,
                     preload=tuple(dict.fromkeys(p for m in members for p in m.preload)), versions=versions,
                     check=check if checks else None, parts=tuple(m.name for m in members),
                     peak_worker_mb=sum(peaks) if peaks else None)


CPU_ENGINES: dict[str, CpuEngine] = {e.name: e for e in (
    textlayer.ENGINE, rapidocr.ENGINE, tesseract.ENGINE,
    # Tesseract first: it wins a tie (engines/pick.py), being the better engine on average.
    composite(tesseract.ENGINE, rapidocr.ENGINE),
    # Cheap first: Tesseract reads every page, RapidOCR only those Tesseract's reading
    # fails the signal on; the better of the two is kept.
    composite(tesseract.ENGINE, rapidocr.ENGINE, cascade=True),
)}
OCR_ENGINES = tuple(name for name, e in CPU_ENGINES.items() if e.ocr)
HTTP_ENGINE = "openai"
ENGINE_CHOICES = ("auto", *CPU_ENGINES, HTTP_ENGINE)


def ocr_engine_names() -> str:
    """`rapidocr | tesseract | tesseract+rapidocr (both; …)`: what `--ocr-engine` may name, for help."""
    return " | ".join(f"{name} (RapidOCR where Tesseract's page fails its signal)" if CPU_ENGINES[name].cascade
                      else f"{name} (both; the better signal per page)" if CPU_ENGINES[name].parts else name
                      for name in OCR_ENGINES)


def make_cpu_engine(name: str, options: EngineOptions) -> Any:
    entry = CPU_ENGINES.get(name)
    if entry is None or entry.build is None:
        raise ValueError(f"unknown CPU engine {name!r}" if entry is None else f"{name} is read by its parts")
    return wrap_engine(name, options, functools.partial(entry.build, options))


# The engines a process built, by name and options: a worker builds each once and keeps it, its
# models loaded, for every page it reads.
_BUILT: dict[tuple[str, str], Any] = {}


def cpu_engine(name: str, options: EngineOptions) -> Any:
    """The engine `name` built with `options`, once per process for the same options."""
    key = (name, repr(sorted(options.items())))
    if key not in _BUILT:
        _BUILT[key] = make_cpu_engine(name, options)
    return _BUILT[key]


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
