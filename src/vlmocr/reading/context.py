"""What every page of a run is read under: made once from the run's settings by the scheduler
(make_reader), frozen, and handed with each page to the pool's workers — no worker keeps it in a
global. A page read outside a run (a test, a benchmark) takes the defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..engines.base import EngineOptions


@dataclass(frozen=True)
class PageContext:
    lang: str | None = None  # --lang (Tesseract's names); None: the engines' default
    lang_given: bool = False  # a language a person gave, not the default: wrong_language judges by it
    rotate_pages: str = "auto"  # auto | always | off
    deskew: str = "auto"  # auto | on | off
    clean_scans: bool = False  # --clean (inputs/clean.py)
    repair: str = "auto"  # --repair: a failing reading read again from the scan repaired (inputs/repair.py)
    engine_choice: str | None = None  # on every record `auto` reads by OCR
    threads: int = 1
    tesseract_version: str | None = None  # a pre-run check's answers (registry: CpuEngine.check)
    tesseract_lang: str | None = None  # the language as the installed data names it

    @classmethod
    def of(cls, options: EngineOptions) -> "PageContext":
        """The context of a run's engine options (the pool's own entries are not the page's)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in options.items() if k in known})  # type: ignore[arg-type]

    def engine_options(self, lang: str | None = None) -> EngineOptions:
        """What an engine is built with; `lang`: Tesseract's data for a document's own language."""
        options: EngineOptions = {"threads": self.threads}
        if self.lang is not None:
            options["lang"] = self.lang
        if self.tesseract_version is not None:
            options["tesseract_version"] = self.tesseract_version
        if lang:
            options["tesseract_lang"] = lang
        elif self.tesseract_lang is not None:
            options["tesseract_lang"] = self.tesseract_lang
        return options

    @property
    def known_lang(self) -> str | None:
        """The run's language when a person gave it (an explicit --lang), not the default."""
        return self.lang if self.lang_given else None
