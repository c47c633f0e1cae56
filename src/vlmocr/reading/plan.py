"""What a run decided, apart from what the user asked for (settings/config.RunConfig, frozen and
recorded as given): the OCR engine scans are read with (`auto`'s choice, or the one the run
directory was started with), the worker processes its pool starts, the server it started
(`--serve`), and from them what reads each document and the settings key of its pages. Made once,
frozen; a decision taken later is a new plan (`with_ocr`, `with_workers`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..engines.choice import AUTO, DocumentReading, EngineChoice, choose_ocr_engine, data_languages, for_document
from ..engines.registry import HTTP_ENGINE, engine_key_material, reads_language
from ..runfolder.record import JsonObject, Sizing
from ..settings.config import READER_REVISION, Endpoint, RunConfig, settings_key


@dataclass(frozen=True)
class RunPlan:
    cfg: RunConfig
    # The OCR engine for scans (`auto`'s, and a VLM's fallback) when the run chose it; None: the
    # choice the settings make by themselves (engines/choice: the installed data is probed once a
    # process there, so asking again costs nothing).
    ocr: EngineChoice | None = None
    workers: int | None = None  # the pool's processes (machine.choose_workers); None: --workers
    endpoint: Endpoint | None = None  # the server vlmocr started (--serve), its key and provenance

    def with_ocr(self, choice: EngineChoice) -> "RunPlan":
        return dataclasses.replace(self, ocr=choice)

    def with_workers(self, count: int) -> "RunPlan":
        return dataclasses.replace(self, workers=count)

    def ocr_choice(self) -> EngineChoice:
        """The OCR engine for scans (`auto`'s, and a VLM's fallback) and why it was chosen."""
        return self.ocr if self.ocr is not None else choose_ocr_engine(self.cfg.ocr_engine, self.cfg.lang)

    def pool_workers(self) -> int:
        """The worker processes to start: the run's choice, else `workers`."""
        return self.workers or self.cfg.workers

    def reader(self) -> str:
        """The engine that reads pages without a usable text layer."""
        cfg = self.cfg
        if cfg.engine == AUTO:
            vlm = (cfg.endpoint or cfg.profile or cfg.serve) and not cfg.vlm_tier
            return HTTP_ENGINE if vlm else self.ocr_choice().engine
        return cfg.engine

    def document_reading(self, language: str | None) -> DocumentReading | None:
        """How the scans of a document stating `language` (its manifest row) are read, when not
        as the run's (engines/choice.for_document): as a run with --lang = that language would.
        A VLM run's pages are the model's: its language changes nothing there."""
        reader = self.reader()
        if reader == HTTP_ENGINE:
            return None
        return self._cpu_reading(language, reader, auto=self.cfg.engine == AUTO and self.cfg.ocr_engine == AUTO)

    def fallback_reading(self, language: str | None) -> DocumentReading | None:
        """How a VLM run's fallback (a page whose retry ladder is spent) reads a scan of a
        document stating `language`: as a CPU run of the fallback engine (`--ocr-engine`, `auto`'s
        choice) with --lang = that language would; None: as the run's. Not in the settings key:
        a VLM page's key ignores the language, so settled.py's owed pages stay as they were."""
        return self._cpu_reading(language, self.ocr_choice().engine, auto=self.cfg.ocr_engine == AUTO)

    def _cpu_reading(self, language: str | None, reader: str, *, auto: bool) -> DocumentReading | None:
        """engines/choice.for_document for scans `reader` reads (`auto`: chosen, not named)."""
        if not language or language == self.cfg.lang:
            return None
        probe = auto or reads_language(reader)  # else no data is asked for
        return for_document(language, run_lang=self.cfg.lang, reader=reader, auto=auto,
                            languages=data_languages() if probe else None)

    def key_material(self, doc_dpi: float | None = None, sizing: Sizing | None = None,
                     language: str | None = None) -> JsonObject:
        """What a page's settings key is made of. `language`: the document's own (its manifest
        row): the engine and data that read it are the key's, so a document whose language
        changes nothing keeps the run's key."""
        cfg = self.cfg
        doc = self.document_reading(language)
        reader, lang = (doc.reader, doc.lang) if doc else (self.reader(), cfg.lang)
        material: JsonObject = {
            "reader_revision": READER_REVISION,
            "engine": cfg.engine,
            "reader": reader,
            "sizing": (sizing or cfg.sizing(doc_dpi)).as_dict(),
        }
        material.update(engine_key_material(reader, lang))  # each engine's own share (engines/registry.py)
        if cfg.rotate_pages != "auto":
            material["rotate_pages"] = cfg.rotate_pages  # only when not auto: the keys of runs before it hold
        if cfg.deskew != "auto":
            material["deskew"] = cfg.deskew  # the same
        if cfg.clean_scans:
            material["clean_scans"] = True
        if cfg.repair != "auto":
            material["repair"] = cfg.repair  # as rotate_pages: the keys of runs before it hold
        return material

    def settings_key(self, doc_dpi: float | None = None) -> str:
        return settings_key(self.key_material(doc_dpi))

    def api_key(self) -> str | None:
        """The key the started server wants, when it said one (None: the client's own rule)."""
        return self.endpoint.api_key if self.endpoint is not None else None

    @property
    def served(self) -> JsonObject | None:
        """What vlmocr learnt starting the server (None: it started none)."""
        ep = self.endpoint
        return dict(ep.provenance) if ep is not None and ep.provenance is not None else None
