"""The page record: the spine every stage produces or consumes (DESIGN.md, schema 1)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .flags import Flag
from .safe import record_made_safe

SCHEMA = 1

# What goes into a JSON file or line: a summary's, a report's, run.json's sections. A producer
# typed `-> JsonObject` promises json.dumps takes what it returns (no Path, no set, no model).
if TYPE_CHECKING:
    JsonValue: TypeAlias = "str | int | float | bool | None | Sequence[JsonValue] | Mapping[str, JsonValue]"
    JsonObject: TypeAlias = "dict[str, JsonValue]"
else:  # at run time (pydantic reads a model's annotations): any JSON, as before
    JsonValue = Any
    JsonObject = dict[str, Any]

# A page's text is a few thousand characters; a dense newspaper page some tens of thousands.
# More than this is an engine or a server gone wrong (an endless answer), and storing it whole
# would make every reader of pages.jsonl pay for it: it is cut, flagged and sent to review.
MAX_TEXT_CHARS = 1_000_000


class Status(str, Enum):
    ok = "ok"
    fallback = "fallback"  # text from a fallback engine, flagged
    loop = "loop"
    truncated = "truncated"
    empty = "empty"
    refused = "refused"
    error = "error"  # engine/network after retries: retried on resubmit
    bad_input = "bad_input"  # unreadable document or page
    # Read, but the quality signal says the text is probably bad (text/signal.py). Last in the
    # enum: STATUS_CODE numbers statuses in order, and resume indexes written before keep theirs.
    suspect = "suspect"

    @property
    def group(self) -> str:
        """ok | fallback | review | failed — the buckets of the Done line."""
        return STATUS_GROUP[self]


# A refusal is review, not failure: the retry ladder gives it other samplings within the run (and
# continues on resume); once the ladder is spent, a resubmit asks the same model the same way and
# gets the same answer, so counting it "failed" (exit 1: resubmit) would resubmit forever. A
# person decides (another model, another prompt, or the page is not for OCR).
REVIEW = frozenset({Status.loop, Status.truncated, Status.empty, Status.suspect, Status.refused})
FAILED = frozenset({Status.error, Status.bad_input})
STATUS_GROUP = {
    s: ("ok" if s is Status.ok else "fallback" if s is Status.fallback else "review" if s in REVIEW else "failed")
    for s in Status
}
# What a VLM gets wrong by chance, which another sampling can fix: the retry ladder's statuses
# (for pages and figure descriptions alike).
LADDER = REVIEW
# A page whose last record has one of these statuses is re-attempted on resume: the failure
# was transient (network, server) and resubmitting is how the user asks for another try.
RETRY_ON_RESUME = frozenset({Status.error})

# Compact codes for the resume index (one byte per page); 0 means "no final record".
STATUS_CODE = {s: i + 1 for i, s in enumerate(Status)}
CODE_STATUS = {v: k for k, v in STATUS_CODE.items()}


@dataclass(frozen=True)
class Signal:
    """The quality signal of a reading (text/signal.py measures it): a score in [0, 1] and the
    components it is made of; `threshold` is the one its engine and script were judged by, when
    it was judged. A record stores it as `quality` (as_dict) and reads it back (of)."""

    score: float
    confidence: float | None
    known_words: float | None
    implausible: float
    garbage_lines: float
    text_vs_ink: float | None
    language: str | None
    script: str
    words: int
    # The language the text is in when it is clearly not the page's known one (a translation,
    # not a transcription: suspect whatever the score); None otherwise.
    wrong_language: str | None = None
    threshold: float | None = None
    # Short lines beside the body read apart from the lines they stand beside (positions/order.py):
    # the words may score well, their order is in doubt — suspect whatever the score. Stored only
    # when there are some.
    side_notes: int = 0

    def as_dict(self, threshold: float | None = None) -> JsonObject:
        """What the page record stores as `quality` (rounded: four digits say enough)."""
        out: JsonObject = {"score": self.score, "threshold": self.threshold if threshold is None else threshold}
        for name, value in asdict(self).items():
            if name not in ("score", "threshold") and not (name == "side_notes" and not value):
                out[name] = round(value, 4) if isinstance(value, float) else value
        return out

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> "Signal | None":
        """A record's `quality` read back; None when it holds no score. Records written before a
        component existed lack it: None (not measured)."""
        score = stored.get("score")
        if not isinstance(score, (int, float)):
            return None

        def num(name: str) -> float | None:
            v = stored.get(name)
            return float(v) if isinstance(v, (int, float)) else None

        return cls(score=float(score), confidence=num("confidence"), known_words=num("known_words"),
                   implausible=num("implausible") or 0.0, garbage_lines=num("garbage_lines") or 0.0,
                   text_vs_ink=num("text_vs_ink"), language=stored.get("language") or None,
                   script=str(stored.get("script") or ""), words=int(stored.get("words") or 0),
                   wrong_language=stored.get("wrong_language") or None, threshold=num("threshold"),
                   side_notes=int(stored.get("side_notes") or 0))

    @property
    def below(self) -> bool:
        """Under the threshold it was judged by."""
        return self.threshold is not None and self.score < self.threshold

    def components_text(self) -> str:
        def pct(v: float | None) -> str:
            return "—" if v is None else f"{v:.2f}"

        return (f"conf={pct(self.confidence)} known={pct(self.known_words)} implausible={self.implausible:.3f} "
                f"garbage={self.garbage_lines:.2f} ink={pct(self.text_vs_ink)} lang={self.language} "
                f"script={self.script} words={self.words}")

    def reason(self) -> str:
        """One line saying why the signal calls a page suspect, for a person."""
        if self.wrong_language:
            return (f"wrong_language: the text is in {self.wrong_language}, not the page's language "
                    f"(a translation, not a transcription?)")
        if self.side_notes and not self.below:
            return (f"side_notes: {self.side_notes} short lines beside the body were read apart from the lines "
                    f"they stand beside (margin headings, a list's numbers): the order is in doubt")
        return (f"signal {self.score:.2f} < {self.threshold} ({self.script or '?'}: conf={self.confidence}, "
                f"known={self.known_words}, garbage lines={self.garbage_lines})")


class Block(BaseModel):
    """A grounded layout block (coordinates 0-1000 on the page, as the models emit them)."""

    model_config = ConfigDict(extra="forbid")
    type: str
    bbox: tuple[float, float, float, float] | None = None
    text: str = ""


# One word where it lies on the page: its box (x0, y0, x1, y1: pixels, the right and lower edges
# excluded), the engine's confidence in it (0–1; None where the engine gives none, a VLM's word
# placed by alignment) and its text. A list, not an object: a page holds hundreds of them.
WordBox = tuple[int, int, int, int, float | None, str]


class Line(BaseModel):
    """One line of text as an engine found it: its box, its words in reading order, and the
    block (column, paragraph) it belongs to, numbered in reading order from 0."""

    model_config = ConfigDict(extra="forbid")
    box: tuple[int, int, int, int]
    words: list[WordBox]
    block: int = 0


class Positions(BaseModel):
    """Where a page's words lie: lines in reading order, in the pixels of the page as
    rendered — as the user has it, before any turn or straightening (the record's `rotation` and
    `skew` say what the engine was shown; the boxes were mapped back) — `width` × `height` of it,
    so they survive a change of dpi (scale by the ratio of sizes). `source`: whose boxes they are —
    the engine that read the page (tesseract, rapidocr), or `aligned:ENGINE` for a VLM's words
    placed on that engine's boxes, `aligned` then the share of its words matched."""

    model_config = ConfigDict(extra="forbid")
    width: int
    height: int
    source: str
    lines: list[Line]
    aligned: float | None = None

    def words(self) -> list[WordBox]:
        return [w for line in self.lines for w in line.words]


class PageRecord(BaseModel):
    """One finished attempt at one page. Page 0 stands for a whole document that could not
    be opened (its pages are unknown); every other record names a 1-based page."""

    model_config = ConfigDict(extra="allow")

    schema_: int = Field(SCHEMA, alias="schema")
    doc_id: str
    source: str
    page: int
    doc_pages: int | None = None  # pages in the document, so resume need not open it
    key: str
    status: Status
    # Before the text: resume reads a record only up to here (store.resume_fields).
    attempt: int = 1
    text: str = ""
    # The quality signal of the text (text/signal.py): {score, threshold, components…}; absent
    # when there is no reading (error, bad_input) or the record predates it.
    quality: JsonObject | None = None
    engine: str = ""
    # Degrees the page image was turned (counter-clockwise) before it was read, and who said so
    # (`rotation_from`: model — the VLM's own answer, olmOCR's rotation_correction; osd — Tesseract's
    # orientation detection, after a reading failed its signal or before a VLM was sent the page;
    # lines — OSD unsure, RapidOCR's line classifier found the turn that reads upright (a quarter
    # for a page whose ink lies on its side, or over); reading — OSD unsure, the page read turned
    # passed its signal where as it lay it did not);
    # absent: as scanned.
    rotation: int | None = None
    rotation_from: str | None = None
    # Degrees the page's lines rose to the right (counter-clockwise) as rendered, undone before it
    # was read (inputs/skew.py, `--deskew auto`); absent: read as it lay (straight, or not measured).
    skew: float | None = None
    # The language the page was read as (Tesseract's names, as given): its document's, from the
    # manifest (a person's column) or triage's suggestion, else the run's (--lang, a VLM profile's,
    # or the default); `language_from` says which: manifest | triage | --lang | profile | default.
    # The word list it was judged by is quality.language (a guess from the text may differ).
    language: str | None = None
    language_from: str | None = None
    # Why `engine` read this page, when vlmocr chose it: `auto`'s choice for the run
    # ("tesseract: installed with deu", "rapidocr: tesseract has no data for grc"), for the document's
    # stated language ("tesseract: the document's language grc: installed with grc, …") or a composite's
    # per page ("tesseract: better signal (0.951 vs rapidocr 0.904)"); absent when --engine named it.
    engine_choice: str | None = None
    # A cascade's readings of the page in tier order (`--engine tesseract,rapidocr`):
    # each {engine, status, score, threshold, seconds}, and `text` for a reading not kept (every
    # tier's reading stays in the raw layer), and `went_on` when the page went on from a reading
    # its signal passed (`tier_went_on`); the page reached tier len(tiers), and `engine` says
    # whose reading was kept. Absent for a page one engine read.
    tiers: list[JsonObject] | None = None
    model: str | None = None
    revision: str | None = None
    # What served a VLM's reading, e.g. "vllm 0.11.0" (run.json's `server` has the rest: where
    # the revision came from, the GPUs…); absent for the CPU engines.
    server: str | None = None
    prompt_id: str | None = None
    dpi: float | None = None
    finish_reason: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    seconds: float = 0.0
    image_sha256: str | None = None
    width: int | None = None
    height: int | None = None
    error: str | None = None
    flags: list[str] = Field(default_factory=list)
    blocks: list[Block] | None = None
    fields: JsonObject | None = None  # structured output, e.g. olmOCR front matter
    # Where the words lie on the page (Positions); absent when the engine knows no positions.
    positions: Positions | None = None
    # The image a repository keeps for the page — a PDF page's one embedded image, an image file's
    # frame — and how the page as rendered maps onto it (inputs/master.py): {width, height, dpi,
    # of, map}. ALTO, hOCR and PAGE-XML give their coordinates in its pixels; absent: the page has
    # none (vector PDF, several images), and coordinates stay those of the page as rendered.
    master: JsonObject | None = None
    finished_at: str = Field(default_factory=lambda: now_iso())

    @model_validator(mode="after")
    def _bounded_text(self) -> "PageRecord":
        if len(self.text) > MAX_TEXT_CHARS:
            self.flags = [*self.flags, Flag.text_cut.of(chars=len(self.text))]
            self.text = self.text[:MAX_TEXT_CHARS]
            if self.status in (Status.ok, Status.fallback, Status.suspect):
                self.status = Status.truncated
        return self

    def to_json_dict(self) -> JsonObject:
        # Every schema field is present (null when unknown) so consumers never guess; the
        # optional structures appear only when an engine produced them.
        data = self.model_dump(mode="json", by_alias=True)
        for optional in ("quality", "engine_choice", "tiers", "server", "blocks", "fields", "language", "language_from",
                         "rotation", "rotation_from", "skew", "positions", "master"):
            if data.get(optional) is None:
                data.pop(optional, None)
        # Written as text XML and a terminal can take: every record becomes a line here, so the
        # run, docs/, txt, search and the exports read the same (runfolder/safe.py).
        return record_made_safe(data)


def tier_went_on(entry: Mapping[str, Any]) -> str:
    """Why a page went on from a tier (an entry of a record's `tiers` before the last): the
    status of its reading (suspect, empty …), or what else sent it on (the document's language
    the tier has no data for)."""
    return str(entry.get("went_on") or entry.get("status") or "?")


@dataclass(frozen=True, slots=True)
class Row:
    """A page record as read back from a run folder (store.FinalRecords, RunDir.reading()): the
    fields of PageRecord as types, without validating the line again (it was validated when it
    was written, and its CRC-32 says it is as written) — so reading 100 000 of them costs little.
    `quality` is a Signal; `data` is the line as stored, for the few that pass a record on whole
    (export's jsonl, the cluster's merge) or read a field another layer adds (the clean layer's
    `clean`). Its fields and `of` are made from PageRecord's by scripts/make_row.py (one source: a
    field PageRecord gains is one here after the script runs; tests/runfolder/test_record.py checks);
    `positions` and `master` stay as stored, parsed when asked for (`word_positions`): a page holds
    hundreds of words, and most readers of a run (evaluate, report, merge) never look at them."""

    # --- made by scripts/make_row.py from PageRecord's fields; run it after changing them ---
    schema_: int
    doc_id: str
    source: str
    page: int
    doc_pages: int | None
    key: str
    status: Status
    attempt: int
    text: str
    quality: Signal | None
    engine: str
    rotation: int | None
    rotation_from: str | None
    skew: float | None
    language: str | None
    language_from: str | None
    engine_choice: str | None
    tiers: tuple[Mapping[str, Any], ...] | None
    model: str | None
    revision: str | None
    server: str | None
    prompt_id: str | None
    dpi: float | None
    finish_reason: str | None
    tokens_in: int | None
    tokens_out: int | None
    seconds: float
    image_sha256: str | None
    width: int | None
    height: int | None
    error: str | None
    flags: tuple[str, ...]
    blocks: tuple[Block, ...] | None
    fields: Mapping[str, Any] | None
    positions: Mapping[str, Any] | None
    master: Mapping[str, Any] | None
    finished_at: str
    data: Mapping[str, Any]  # the line as stored

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "Row":
        return cls(
            schema_=int(d.get("schema") or SCHEMA),
            doc_id=str(d["doc_id"]),
            source=str(d.get("source") or ""),
            page=int(d["page"]),
            doc_pages=_int(d.get("doc_pages")),
            key=str(d.get("key") or ""),
            status=Status(d["status"]),
            attempt=int(d.get("attempt") or 1),
            text=str(d.get("text") or ""),
            quality=_signal(d.get("quality")),
            engine=str(d.get("engine") or ""),
            rotation=_int(d.get("rotation")),
            rotation_from=d.get("rotation_from"),
            skew=_float(d.get("skew")),
            language=d.get("language"),
            language_from=d.get("language_from"),
            engine_choice=d.get("engine_choice"),
            tiers=_mappings(d.get("tiers")),
            model=d.get("model"),
            revision=d.get("revision"),
            server=d.get("server"),
            prompt_id=d.get("prompt_id"),
            dpi=_float(d.get("dpi")),
            finish_reason=d.get("finish_reason"),
            tokens_in=_int(d.get("tokens_in")),
            tokens_out=_int(d.get("tokens_out")),
            seconds=float(d.get("seconds") or 0.0),
            image_sha256=d.get("image_sha256"),
            width=_int(d.get("width")),
            height=_int(d.get("height")),
            error=d.get("error"),
            flags=tuple(d.get("flags") or ()),
            blocks=_blocks(d.get("blocks")),
            fields=_mapping(d.get("fields")),
            positions=_mapping(d.get("positions")),
            master=_mapping(d.get("master")),
            finished_at=str(d.get("finished_at") or ""),
            data=d)
    # --- end of what scripts/make_row.py makes ---

    @property
    def page_id(self) -> tuple[str, int]:
        return self.doc_id, self.page

    def word_positions(self) -> Positions | None:
        """Where the page's words lie, parsed from the stored line; None when it has none."""
        return Positions.model_validate(self.positions) if self.positions is not None else None

    def amended(self, **changes: Any) -> "Row":
        """A copy with `changes` made, in its fields and its stored line alike: a text with its
        figures' descriptions, a cleaned text and what cleaning did (`clean`), the original
        source of a staged file (merge)."""
        own = {k: v for k, v in changes.items() if k in _ROW_FIELDS}
        return dataclasses.replace(self, **own, data={**self.data, **changes})

    def extra(self, name: str, default: Any = None) -> Any:
        """A field another layer adds to the line (the clean layer's `clean`, merge's `shard`)."""
        return self.data.get(name, default)


_ROW_FIELDS = frozenset(f.name for f in dataclasses.fields(Row)) - {"data", "schema_"}


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _mapping(v: Any) -> Mapping[str, Any] | None:
    return v if isinstance(v, Mapping) else None


def _mappings(v: Any) -> tuple[Mapping[str, Any], ...] | None:
    return tuple(t for t in v if isinstance(t, Mapping)) if isinstance(v, list) else None


def _blocks(v: Any) -> tuple[Block, ...] | None:
    return tuple(Block.model_validate(b) for b in v) if isinstance(v, list) else None


def _signal(v: Any) -> Signal | None:
    return Signal.of(v) if isinstance(v, Mapping) else None


class FigureRecord(BaseModel):
    """One finished attempt at describing one figure (RUN/figures.jsonl, vlmocr describe): the
    figure (where it is on its page and its crop), the describe key, and the answer."""

    model_config = ConfigDict(extra="allow")

    schema_: int = Field(SCHEMA, alias="schema")
    doc_id: str
    source: str
    page: int
    figure: int  # 1-based, in block order on the page
    block_index: int
    type: str
    bbox: list[float]  # 0–1000 grid, as the page record's block
    area: float  # share of the page
    crop: str | None = None  # RUN-relative path of the crop that was sent
    box_px: list[int] | None = None
    crop_px: list[int] | None = None
    width: int | None = None
    height: int | None = None
    dpi: float | None = None
    crop_sha256: str | None = None
    key: str  # the describe key
    page_key: str | None = None  # the settings key of the page record the figure came from
    status: Status
    description: str = ""
    finish_reason: str | None = None
    model: str | None = None
    revision: str | None = None
    prompt_id: str | None = None
    attempt: int = 1
    tokens_in: int | None = None
    tokens_out: int | None = None
    seconds: float = 0.0
    error: str | None = None
    flags: list[str] = Field(default_factory=list)
    anchor: dict[str, str] = Field(default_factory=dict)  # neighbouring text: where the figure sits
    finished_at: str = Field(default_factory=lambda: now_iso())

    def to_json_dict(self) -> JsonObject:
        return record_made_safe(self.model_dump(mode="json", by_alias=True))


DEFAULT_DPI = 200.0
DEFAULT_MAX_PIXELS = 25_000_000  # ≈ A3 at 300 dpi; an A0 poster is scaled down to this


@dataclass(frozen=True)
class Sizing:
    """How large a page image should be. `longest_side` wins over `dpi` when both are set."""

    dpi: float | None = DEFAULT_DPI
    longest_side: int | None = None
    max_pixels: int = DEFAULT_MAX_PIXELS

    def as_dict(self) -> JsonObject:
        return {"dpi": self.dpi, "longest_side": self.longest_side, "max_pixels": self.max_pixels}


@dataclass(frozen=True)
class VlmHints:
    """What only a page sent to a VLM carries (PageTask.vlm): how its image is encoded, a turn
    asked for, and whether to look how it lies first."""

    # How the page is encoded for the request (the profile's image settings).
    image_format: str = "png"
    jpeg_quality: int = 90
    # Degrees the rendered page is turned counter-clockwise before it is sent (0, 90, 180, 270;
    # PIL's Transpose.ROTATE_*, olmOCR's convention): set when the model said the page is not
    # upright (olmOCR's is_rotation_valid: false, rotation_correction: N) and it is asked again.
    rotate: int = 0
    # Who said to turn it: the model (its own rotation answer) or OSD (the reading failed its
    # signal and OSD is sure the page is not upright).
    rotate_from: str = "model"
    # Look how the page lies before it is sent, and turn it when OSD is sure: set for the first
    # page of each document and the pages of a document that already had a page turned (a look
    # at the ink and RapidOCR's line classifier, ~60 ms; OSD only when they say turned).
    look_before: bool = False


@dataclass(frozen=True)
class PageTask:
    """A page owed a read (or several consecutive pages read in one request): what the
    scheduler hands a reader and a reader hands a pool worker. Frozen and picklable; a
    changed task (the next ladder step, a smaller image) is a new one (`at`)."""

    doc_id: str
    source: str
    path: str
    page: int
    doc_pages: int | None
    key: str
    engine: str  # auto | textlayer | rapidocr | tesseract | openai
    reader: str  # what reads a page without a usable text layer
    sizing: Sizing
    attempt: int = 1
    # Several pages in one request (profiles with multi-page support): their numbers and attempts.
    pages: tuple[int, ...] = ()
    attempts: tuple[int, ...] = ()
    # The page's language as its manifest row states it (Tesseract's names): the quality signal
    # judges the page by it, and it may choose the engine and Tesseract's data
    # (RunConfig.document_reading: those are in the settings key, the judgement is not).
    language: str | None = None
    # Tesseract's data for this page when not the run's (the document's language, as installed),
    # and why `reader` reads it when not for the run's reason (the record's engine_choice).
    ocr_lang: str | None = None
    engine_choice: str | None = None
    # The language is a suggestion (triage's), not a person's word: wrong_language does not judge by it.
    language_suggested: bool = False
    # Why a person marked the document hard (the manifest's `hard`): a VLM tier reads its pages.
    hard: str = ""
    # The run's language and where it came from (PageReader.run_language): the page's when its
    # document states none.
    run_language: tuple[str, str] | None = None
    # The document's own dpi (its manifest row): a VLM's fallback renders the page for a CPU
    # engine with it, not with the run's --dpi (`sizing` is the VLM's, the profile's image included).
    doc_dpi: float | None = None
    # How a page goes to a VLM (image encoding, a turn, a look first); a CPU engine ignores it.
    vlm: VlmHints = VlmHints()

    def at(self, **changes: Any) -> "PageTask":
        return dataclasses.replace(self, **changes)

    def for_vlm(self, **hints: Any) -> "PageTask":
        """The task with VLM hints changed (a turn, the image encoding, a look first)."""
        return dataclasses.replace(self, vlm=dataclasses.replace(self.vlm, **hints))

    def singles(self) -> list["PageTask"]:
        """One task per page of a multi-page task (itself when it holds one page)."""
        if not self.pages:
            return [self]
        return [self.at(page=p, attempt=a, pages=(), attempts=()) for p, a in zip(self.pages, self.attempts)]

    def read_as(self) -> tuple[str | None, str | None]:
        """(language, where it came from) the page is read as: its document's, else the run's."""
        if self.language:
            return self.language, "triage" if self.language_suggested else "manifest"
        return self.run_language if self.run_language else (None, None)

    def record(self, status: Status, **fields: Any) -> "PageRecord":
        """A record of this page: the fields every record of it carries, whatever becomes of it."""
        language, origin = self.read_as()
        fields.setdefault("language", language)
        fields.setdefault("language_from", origin)
        return PageRecord(doc_id=self.doc_id, source=self.source, page=self.page, doc_pages=self.doc_pages,
                          key=self.key, attempt=self.attempt, status=status, **fields)

    def __str__(self) -> str:
        return f"{self.doc_id} page {self.page}"


def now_iso(timespec: Literal["seconds", "milliseconds"] = "milliseconds") -> str:
    """The time now in UTC, ISO 8601: records to the millisecond (their order within a second
    matters); the cluster's job files to the second, as they have always been written."""
    return datetime.now(timezone.utc).isoformat(timespec=timespec)
