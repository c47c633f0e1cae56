"""The engine protocol: anything that turns a page into a `Reading`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypedDict, runtime_checkable

from PIL import Image

from ..runfolder.flags import Flag
from ..runfolder.record import JsonObject, Positions


class EngineOptions(TypedDict, total=False):
    """What every pool worker starts with (reading/scheduler.make_reader fills it; it crosses
    into the forkserver, so it is plain data): the engines' settings and the worker's own."""

    lang: str  # --lang (Tesseract's names)
    lang_given: bool  # a language a person gave, not the default: wrong_language judges by it
    threads: int
    rotate_pages: str  # auto | off
    deskew: str  # auto | off
    clean_scans: bool  # --clean (inputs/clean.py)
    repair: str  # auto | off (inputs/repair.py)
    engine_choice: str  # on every record `auto` reads by OCR
    preload: list[str]  # engines whose modules the forkserver imports once for every worker
    preload_modules: list[str]  # further modules it imports (the VLM path's line classifier)
    tesseract_version: str | None  # a pre-run check's answers (registry: CpuEngine.check)
    tesseract_lang: str | None  # the language as the installed data names it
    scheduler_pid: int  # a worker dies with the scheduler (reading/pool.py)


# A reading's flag: the engine found the page's lines running down it, not across — the page lies
# on its side, whatever its text's quality signal says. The worker asks OSD for such a page as for
# one that failed its signal (reading/worker.py).
LINES_RUN_DOWN = Flag.lines_run_down.of()
# A reading's flag, `small_letters:H`: the engine saw the page's line boxes H pixels high or less
# after its own scaling (RapidOCR shrinks a page to its max_side_len; its boxes stand ~1.5 times
# the letters' height) — letters of 7 px or so, too small to read however sure its recogniser is of
# the result. Such a reading never passes as `ok` (reading/worker.read_judged). The pages of
# the development pages are seen with boxes of 45 px and more.
SMALL_LETTERS_PX = 12


@dataclass
class PageInput:
    """A page ready to be read: the rendered image (None for text-layer reads) and its facts."""

    doc_id: str
    page: int
    image: Image.Image | None
    text_layer: str | None = None
    dpi: float | None = None
    flags: list[str] = field(default_factory=list)
    file: str | None = None  # a file showing exactly `image` (see render.Rendered.same_as_file)


@dataclass
class Reading:
    """What an engine returns for one page, before classification into a status."""

    text: str
    finish_reason: str | None = "stop"
    tokens_in: int | None = None
    tokens_out: int | None = None
    raw: Any = None
    model: str | None = None
    revision: str | None = None
    prompt_id: str | None = None
    flags: list[str] = field(default_factory=list)
    blocks: list[JsonObject] | None = None
    fields: JsonObject | None = None
    # The engine's own confidence in [0, 1], where it gives one: the page's mean (weighted by
    # characters) and one value per line it read. A VLM's is the geometric mean of its token
    # probabilities (from `logprobs`); it scores no lines.
    confidence: float | None = None
    line_confidences: list[float] | None = None
    # Where its words lie on the image it was given (record.Positions), where the engine says.
    positions: Positions | None = None


def weighted_mean(parts: list[tuple[str, float]]) -> float | None:
    """Mean of the scores of (text, score) parts, each weighted by its characters: a long line
    read with doubt weighs more than a stray mark."""
    total = sum(len(text.strip()) for text, _ in parts)
    if not total:
        return None
    return sum(len(text.strip()) * score for text, score in parts) / total


@runtime_checkable
class Engine(Protocol):
    """A CPU engine: constructed once per worker process, then `read` per page."""

    name: str

    def read(self, page: PageInput) -> Reading: ...


@dataclass(frozen=True)
class CpuEngine:
    name: str
    build: Callable[[EngineOptions], Any] | None  # in a worker: options → engine (None: a composite)
    ocr: bool  # reads page images (what `--ocr-engine` may name); the text layer does not
    preload: tuple[str, ...] = ()  # modules the forkserver imports once for every worker
    versions: Callable[[], dict[str, str | None]] = field(default=lambda: {})
    check: Callable[[EngineOptions], EngineOptions] | None = None  # before any page: extra options
    # A composite reads each page with every part and keeps the reading with the better quality
    # signal (reading/worker.py, engines/pick.py); the record names the part that read it.
    parts: tuple[str, ...] = ()
    # A cascade (`a,b`) reads with its parts in turn and stops at the first reading that
    # passes its signal: the later, slower tiers read only the pages the earlier ones fail.
    cascade: bool = False
    # The resident memory a worker reading with it reaches (MB; None: light), measured on 2000 px
    # pages (BENCHMARKS.md, "Engines on ../shared/gt"): the default --workers is what memory
    # holds of these (machine.py), lest a laptop's 8 workers meet the OOM killer.
    peak_worker_mb: int | None = None
    # Reads with language data (`--lang`, a document's language): the language is its share of
    # the settings key, and a worker keeps one instance per language.
    reads_language: bool = False
    # Its `read(page, local_thresholds=True)` binarises a part of the page at a time (Sauvola)
    # instead of one threshold for the whole page: the worker reads a page again so when its
    # first reading fails its signal (faint carbon copies, stains, a dark scanner bed).
    local_thresholds: bool = False
    # Its share of the settings key besides the language: what else changes what it reads.
    key_share: Callable[[], JsonObject] = field(default=lambda: {})
    # `auto` (engines/choice.py) tries the engines with a rank, lowest first: one that lists the
    # page's script in `auto_scripts` reads it best, with no language data; one that
    # `reads_language` reads a script its installed data covers (`installed`: the languages it
    # has, None when it is not installed). What no engine can read goes to the first ranked
    # engine that needs no data, flagged for review. `auto_rule`: its part of the rule in words
    # (run --help, the README).
    auto_rank: int | None = None
    auto_scripts: frozenset[str] = frozenset()
    auto_rule: str = ""
    installed: Callable[[], frozenset[str] | None] | None = None

    def reads_script(self, script: str | None) -> bool:
        """Can it read a page in `script` (ISO 15924) at all: with language data (which the
        run's check found installed), or with a model of its own for that script? A script not
        known: yes. A cascade skips a tier that cannot (reading/worker.py): RapidOCR's readings of
        polytonic Greek are fragments its signal may still score above Tesseract's."""
        return script is None or self.reads_language or not self.auto_scripts or script in self.auto_scripts

    def key_material(self, lang: str) -> JsonObject:
        """This engine's part of a page's settings key when it reads with `lang`."""
        return {**({"lang": lang} if self.reads_language else {}), **self.key_share()}
