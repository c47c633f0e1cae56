"""Which embedded engine reads a scanned page, and why.

Two decisions, both written on the record (`engine_choice`) so a person can see them:

* **For a run** (`--engine auto`, and a VLM run's fallback), by the script of `--lang`
  (engines/languages.py): RapidOCR for Latin-script languages (Fraktur included), Tesseract
  with the language's data for scripts RapidOCR's shipped models cannot read (Greek, Cyrillic,
  Arabic, Hebrew, …), else RapidOCR with the reason; `--ocr-engine` named on the command line
  wins. Measured on ../shared/gt (BENCHMARKS.md, "Which engine reads a scan"): RapidOCR with
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
  with the better quality signal (`pick`)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

from ..exceptions import UsageError
from .languages import debian_package, installed_languages, missing_message, resolve_name, script_of_lang, split_lang

AUTO = "auto"
# The engine read when Tesseract cannot read the language: it needs no language data.
NO_DATA_ENGINE = "rapidocr"
# Scripts RapidOCR's shipped models read (PP-OCR: Latin letters, Chinese/Japanese): for these it
# is the better engine (Fraktur is Latin letters in another typeface: RapidOCR reads it well).
RAPIDOCR_SCRIPTS = frozenset({"Latn", "Latf", "Hans", "Hant", "Jpan"})
# The rule above in one sentence, for `run --help` and the README (a test holds the README to it).
AUTO_RULE = ("RapidOCR for Latin script (Fraktur included) and Chinese/Japanese, Tesseract with --lang's "
             "data for other scripts (Greek, Cyrillic, …)")


@dataclass(frozen=True)
class EngineChoice:
    """The engine chosen and the reason, e.g. `tesseract: installed with deu`."""

    engine: str
    reason: str

    def __str__(self) -> str:
        return f"{self.engine}: {self.reason}"

    def as_dict(self, lang: str) -> dict[str, str]:
        """What run.json keeps, so a resumed run can go on with the same engine."""
        return {"engine": self.engine, "reason": self.reason, "lang": lang}


def tesseract_languages() -> frozenset[str] | None:
    """The language data the installed Tesseract has (`TESSDATA_PREFIX` applies; one
    `tesseract --list-langs` per process, shared with its pre-run check); None when no tesseract
    binary is on the PATH."""
    if shutil.which("tesseract") is None:
        return None
    return installed_languages()


def best_for(lang: str, languages: frozenset[str] | None) -> EngineChoice:
    """The better engine for a page in `lang` (Tesseract's names, `deu+eng`; aliases and either
    layout of script models resolved as engines/languages.py does) on this machine."""
    script = script_of_lang(lang) or "Latn"
    if script in RAPIDOCR_SCRIPTS:
        return EngineChoice(NO_DATA_ENGINE, f"reads {script} script better than tesseract (BENCHMARKS.md)")
    if languages is None:
        return EngineChoice(NO_DATA_ENGINE, f"tesseract not installed (rapidocr has no {script} model: expect review)")
    missing = [part for part in split_lang(lang) if resolve_name(part, languages) is None]
    if missing:
        return EngineChoice(NO_DATA_ENGINE, f"tesseract has no data for {'+'.join(missing)} "
                                            f"(rapidocr has no {script} model: expect review)")
    return EngineChoice("tesseract", f"installed with {lang}, a {script} script rapidocr has no model for")


def choose_ocr_engine(asked: str, lang: str, *, earlier: tuple[str, str] | None = None,
                      languages: frozenset[str] | None | str = "probe") -> EngineChoice:
    """The engine that reads scans for a run. `asked`: `--ocr-engine` (`auto` unless named);
    `earlier`: (engine, lang) this run directory was started with, None for a new run or one
    read again whole (`--force`); `languages`: Tesseract's (probed when not given)."""
    if asked != AUTO:
        return EngineChoice(asked, "named by --ocr-engine")
    have = tesseract_languages() if languages == "probe" else languages
    assert not isinstance(have, str)
    best = best_for(lang, have)
    if earlier is None or earlier[1] != lang or earlier[0] == best.engine:
        return best
    if earlier[0] == NO_DATA_ENGINE and best.engine == "tesseract":
        # Pages read with RapidOCR stay valid (the settings key names the engine): switching
        # now would read the whole run again, so it is the user's call, not a silent one.
        return EngineChoice(NO_DATA_ENGINE, f"this run started with it (tesseract is now {best.reason}; "
                                            "--ocr-engine tesseract reads the run again with it)")
    if earlier[0] == "tesseract" and best.engine == NO_DATA_ENGINE and "rapidocr has no" not in best.reason:
        # Started when auto preferred Tesseract for this language: go on with it (no mixing).
        return EngineChoice("tesseract", "this run started with it (--ocr-engine rapidocr reads the run again "
                                         "with rapidocr)")
    if earlier[0] == "tesseract":
        raise UsageError(f"this run was started with tesseract ({lang}), but {best.reason} here: install it "
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
    from .registry import engine_parts  # here: the worker imports this module, the registry pulls in rundir

    if not language or language == run_lang:
        return None
    if auto:
        best = best_for(language, languages)
        if best.engine == "tesseract":
            resolved = "+".join(resolve_name(p, languages or frozenset()) or p for p in split_lang(language))
            return DocumentReading("tesseract", language, resolved,
                                   f"tesseract: the document's language {language}: {best.reason}")
        if "rapidocr has no" not in best.reason:  # a script RapidOCR reads: no data needed
            return DocumentReading(NO_DATA_ENGINE, language, None,
                                   f"{NO_DATA_ENGINE}: the document's language {language}: {best.reason}")
        why = best.reason.split(" (rapidocr has no")[0]
    elif "tesseract" in engine_parts(reader):
        missing = [p for p in split_lang(language) if resolve_name(p, languages or frozenset()) is None]
        if languages is not None and not missing:
            resolved = "+".join(resolve_name(p, languages) or p for p in split_lang(language))
            return DocumentReading(reader, language, resolved, None)
        why = "tesseract not installed" if languages is None else f"tesseract has no data for {'+'.join(missing)}"
    else:
        return None  # RapidOCR named: it reads every language with the same models
    # The document's data is missing: the run's choice, said on every record of the document
    # and once on stderr with what to install.
    missing = [p for p in split_lang(language) if resolve_name(p, languages or frozenset()) is None]
    packages = " ".join(filter(None, map(debian_package, missing)))
    how = missing_message(missing, languages) if languages is not None else \
        f"tesseract is not installed (Debian: apt-get install tesseract-ocr {packages})"
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


# ---------------------------------------------------------------------------- per page


@dataclass(frozen=True)
class Candidate:
    """One engine's reading of a page, judged: its status (quality.classify, then the signal's
    rule) and its quality signal (text/signal.py: `score`, `threshold`, components)."""

    engine: str
    readable: bool  # classified ok or suspect: neither empty, nor a loop, nor cut off
    quality: dict[str, Any]


def pick(candidates: list[Candidate]) -> tuple[int, str]:
    """(index of the reading to keep, why). A readable reading beats one that is not; among
    those, the higher signal score; a tie goes to the first named (Tesseract in
    `tesseract+rapidocr`: the better engine on average). The raw score, not the margin over each
    engine's threshold: on ../shared/gt it keeps the better reading more often
    (benchmarks/bench_engine_choice.py)."""
    def rank(i: int) -> tuple[bool, float, int]:
        c = candidates[i]
        return (c.readable, float(c.quality.get("score") or 0.0), -i)

    best = max(range(len(candidates)), key=rank)
    others = [c for i, c in enumerate(candidates) if i != best]
    chosen = candidates[best]
    if chosen.readable and not all(o.readable for o in others):
        why = f"{', '.join(o.engine for o in others if not o.readable)} gave no usable reading"
    else:
        vs = ", ".join(f"{o.engine} {float(o.quality.get('score') or 0.0):.3f}" for o in others)
        why = f"better signal ({float(chosen.quality.get('score') or 0.0):.3f} vs {vs})"
    return best, why
