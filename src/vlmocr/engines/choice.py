"""Which embedded engine reads a scanned page, and why.

Two decisions, both written on the record (`engine_choice`) so a person can see them:

* **For a run** (`--engine auto`, and a VLM run's fallback), by the script of `--lang`
  (languages.py): RapidOCR for Latin-script languages (Fraktur included), Tesseract
  with the language's data for scripts RapidOCR's shipped models cannot read (Greek, Cyrillic,
  Arabic, Hebrew, …), else RapidOCR with the reason; `--ocr-engine` named on the command line
  wins. Measured on the development pages (BENCHMARKS.md, "Which engine reads a scan"): RapidOCR with
  its tuned settings reads the Latin and Fraktur pages better than Tesseract with the right
  data (macro CER 4.4 % against 8.4 % over 85 pages; better on 6 of 7 sets), at about twice the
  time and six times the memory per worker; on polytonic Greek it reads garbage (47 % CER: no
  Greek model) where Tesseract with `grc` reads 9 %. Decided once, in the scheduler. A run
  directory keeps the engine it was started with (`earlier`): resuming where Tesseract has since
  been installed goes on with the engine it started with rather than mixing engines within a
  document.
* **For a document that states its language** (its manifest row's `language`): its scanned
  pages are read as a run with `--lang` = that language would read them (`for_document`):
  under `auto` the engine `best_for` that language picks, and Tesseract (chosen, or named) reads
  with the document's data. Data missing: the run's choice, with the reason on the record.
* **For a page** (`--ocr-engine tesseract+rapidocr`): read it with both and keep the reading
  with the better quality signal (engines/pick.py).

Which engine `auto` tries first, for which scripts, and which reads with language data, each
engine declares (`CpuEngine.auto_rank`, `auto_scripts`, `reads_language`; registry.py lists
them): this module names none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..exceptions import UsageError
from ..languages import debian_package, missing_message, resolve_name, script_of_lang, split_lang
from .base import CpuEngine
from .registry import CPU_ENGINES, reads_language

AUTO = "auto"


def ranked() -> list[CpuEngine]:
    """The engines `auto` picks from, in the order it tries them (their `auto_rank`)."""
    return sorted((e for e in CPU_ENGINES.values() if e.auto_rank is not None), key=lambda e: e.auto_rank or 0)


def _no_data_engine() -> CpuEngine:
    """The engine read when none has data for the language: the first ranked that needs none."""
    return next(e for e in ranked() if not e.reads_language)


def _data_engine() -> CpuEngine:
    """The ranked engine that reads with installed language data (--lang)."""
    return next(e for e in ranked() if e.reads_language)


# The rule in one sentence, for `run --help` and the README (a test holds the README to it).
AUTO_RULE = ", ".join(e.auto_rule for e in ranked())


@dataclass(frozen=True)
class EngineChoice:
    """The engine chosen and the reason, e.g. `tesseract: installed with deu`. `expect_review`:
    no engine reads the language here, so the one that needs no data reads it, badly."""

    engine: str
    reason: str
    expect_review: bool = False

    def __str__(self) -> str:
        return f"{self.engine}: {self.reason}"

    def as_dict(self, lang: str) -> dict[str, str]:
        """What run.json keeps, so a resumed run can go on with the same engine."""
        return {"engine": self.engine, "reason": self.reason, "lang": lang}


def data_languages() -> frozenset[str] | None:
    """The language data the engine `auto` reads other scripts with has installed; None when it
    is not installed."""
    installed = _data_engine().installed
    return installed() if installed is not None else None


def best_for(lang: str, languages: frozenset[str] | None) -> EngineChoice:
    """The better engine for a page in `lang` (Tesseract's names, `deu+eng`; aliases and either
    layout of script models resolved as languages.py does) on this machine, by the
    engines' ranks (registry): `languages` is what the data engine has installed."""
    script = script_of_lang(lang) or "Latn"
    engines = ranked()
    for e in engines:
        if script in e.auto_scripts:
            others = " or ".join(o.name for o in engines if o is not e)
            return EngineChoice(e.name, f"reads {script} script better than {others} (BENCHMARKS.md)")
    data, fallback = _data_engine(), _no_data_engine()
    lacks = f"({fallback.name} has no {script} model: expect review)"
    if languages is None:
        return EngineChoice(fallback.name, f"{data.name} not installed {lacks}", expect_review=True)
    missing = [part for part in split_lang(lang) if resolve_name(part, languages) is None]
    if missing:
        return EngineChoice(fallback.name, f"{data.name} has no data for {'+'.join(missing)} {lacks}",
                            expect_review=True)
    return EngineChoice(data.name, f"installed with {lang}, a {script} script {fallback.name} has no model for")


def choose_ocr_engine(asked: str, lang: str, *, earlier: tuple[str, str] | None = None,
                      languages: frozenset[str] | None | str = "probe") -> EngineChoice:
    """The engine that reads scans for a run. `asked`: `--ocr-engine` (`auto` unless named);
    `earlier`: (engine, lang) this run directory was started with, None for a new run or one
    read again whole (`--force`); `languages`: the data engine's (probed when not given)."""
    if asked != AUTO:
        return EngineChoice(asked, "named by --ocr-engine")
    have = data_languages() if languages == "probe" else languages
    assert not isinstance(have, str)
    best = best_for(lang, have)
    if earlier is None or earlier[1] != lang or earlier[0] == best.engine:
        return best
    data, fallback = _data_engine().name, _no_data_engine().name
    if earlier[0] == fallback and best.engine == data:
        # Pages read with the no-data engine stay valid (the settings key names the engine):
        # switching now would read the whole run again, so it is the user's call, not a silent one.
        return EngineChoice(fallback, f"this run started with it ({data} is now {best.reason}; "
                                      f"--ocr-engine {data} reads the run again with it)")
    if earlier[0] == data and best.engine == fallback and not best.expect_review:
        # Started when auto preferred the data engine for this language: go on with it (no mixing).
        return EngineChoice(data, f"this run started with it (--ocr-engine {fallback} reads the run again "
                                  f"with {fallback})")
    if earlier[0] == data:
        raise UsageError(f"this run was started with {data} ({lang}), but {best.reason} here: install it "
                         f"(Debian: tesseract-ocr-<lang>), or name --ocr-engine {best.engine} to read the run "
                         "again with that")
    return best


@dataclass(frozen=True)
class DocumentReading:
    """How the scanned pages of a document that states its language are read, where that is
    not the run's way. `reader` and `lang` go into the page's settings key (config.key_material),
    so a changed language re-reads the document only when it changes what reads it."""

    reader: str  # the engine (a composite's name when one was named)
    lang: str  # Tesseract's data as --lang names it: the document's, or the run's (fallback)
    tesseract_lang: str | None  # the document's data as installed (the worker's); None: the run's
    choice: str | None  # the record's engine_choice; None: the run's
    note: str | None = None  # said once on stderr: the document's data is missing


def for_document(language: str | None, *, run_lang: str, reader: str, auto: bool,
                 languages: frozenset[str] | None) -> DocumentReading | None:
    """How a document in `language` (its manifest's, Tesseract's names) is read in a run of
    `run_lang` whose scans `reader` reads (`auto`: chosen by `auto`, not named); None when the
    language changes nothing (none stated, the run's own, or an engine that uses no data)."""
    if not language or language == run_lang:
        return None
    data = _data_engine().name
    if auto:
        best = best_for(language, languages)
        if best.engine == data:
            resolved = "+".join(resolve_name(p, languages or frozenset()) or p for p in split_lang(language))
            return DocumentReading(data, language, resolved,
                                   f"{data}: the document's language {language}: {best.reason}")
        if not best.expect_review:  # a script the no-data engine reads: no data needed
            return DocumentReading(best.engine, language, None,
                                   f"{best.engine}: the document's language {language}: {best.reason}")
        why = best.reason.split(f" ({best.engine} has no")[0]
    elif reads_language(reader):
        missing = [p for p in split_lang(language) if resolve_name(p, languages or frozenset()) is None]
        if languages is not None and not missing:
            resolved = "+".join(resolve_name(p, languages) or p for p in split_lang(language))
            return DocumentReading(reader, language, resolved, None)
        why = f"{data} not installed" if languages is None else f"{data} has no data for {'+'.join(missing)}"
    else:
        return None  # an engine that reads every language with the same models
    # The document's data is missing: the run's choice, said on every record of the document
    # and once on stderr with what to install.
    missing = [p for p in split_lang(language) if resolve_name(p, languages or frozenset()) is None]
    packages = " ".join(filter(None, map(debian_package, missing)))
    how = missing_message(missing, languages) if languages is not None else \
        f"{data} is not installed (Debian: apt-get install tesseract-ocr {packages})"
    return DocumentReading(reader, run_lang, None,
                           f"{reader}: the run's choice ({run_lang}): the document's language {language}: {why}",
                           note=f"documents in {language}: {how}; read as the run's ({reader}, {run_lang})")


def earlier_choice(info: dict[str, Any], ocr_engines: tuple[str, ...]) -> tuple[str, str] | None:
    """(engine, lang) the run directory's run.json says `auto` chose, None when it says none.
    Runs written before the choice was recorded: the engine `auto` read with (key_material)."""
    recorded = info.get("engine_choice")
    if isinstance(recorded, dict) and recorded.get("engine") in ocr_engines:
        return str(recorded["engine"]), str(recorded.get("lang") or "eng")
    material = info.get("key_material") or {}
    settings = info.get("settings") or {}
    if material.get("engine") == AUTO and material.get("reader") in ocr_engines:
        return str(material["reader"]), str(settings.get("lang") or "eng")
    return None
