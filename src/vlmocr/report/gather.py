"""What the report reads from a run: run.json, the final record of each page (and how often it
was tried), the cleaned layer, and the CER of each page against ground truth."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..evaluation.score import char_errors, rate
from ..evaluation.truth import load_truth, match_truth
from ..runfolder.record import Row, Status
from ..runfolder.rundir import RunDir, run_keys
from ..runfolder.store import FinalRecords, final_index, records_with_offsets

STATUS_ORDER: tuple[str, ...] = tuple(s.value for s in Status)
# The fields of a page's final record the report keeps in memory: not its text, which is read from
# pages.jsonl by offset when a page is written out (RunData.records), so a run of 100 000 pages
# holds no page's text for long.
_KEEP_FIELDS = ("doc_id", "source", "page", "status", "engine", "model", "finish_reason", "attempt", "flags",
                "quality", "tiers", "error", "seconds", "width", "height", "dpi", "tokens_in", "tokens_out", "finished_at", "key",
                "language", "language_from")


@dataclass
class ReportOptions:
    run_dir: Path
    out: Path
    truth: Path | None = None
    thumb_size: int = 800
    max_thumbs: int = 2000
    cer_threshold: float = 0.10
    source_roots: list[Path] = field(default_factory=list)
    workers: int | None = None
    title: str | None = None


@dataclass
class Page:
    g: int  # position in document order over the whole run
    d: int  # document index
    rec: Row  # the page's final record without its text (RunData.text reads it)
    tries: int  # records of this page in pages.jsonl
    has_clean: bool = False  # the cleaned layer has the page (its text: RunData.clean_texts)
    truth: str | None = None
    cer: float | None = None
    cer_clean: float | None = None
    edits: int = 0
    ref_chars: int = 0
    reasons: list[str] = field(default_factory=list)
    ordinal: int | None = None  # position in the "all" review queue
    thumb: str | None = None
    thumb_note: str | None = None

    @property
    def status(self) -> str:
        return self.rec.status.value

    @property
    def page(self) -> int:
        return self.rec.page

    @property
    def page_id(self) -> tuple[str, int]:
        return self.rec.page_id


@dataclass
class Doc:
    i: int
    doc_id: str
    source: str
    pages: list[Page] = field(default_factory=list)


@dataclass
class RunData:
    """The run as the report shows it: documents in id order, their final pages in page order."""

    run_dir: Path
    run_info: dict[str, Any]  # run.json, or {} without one
    docs: list[Doc]
    pages: list[Page]
    n_records: int
    times: list[float]  # finish time (epoch seconds) of every record, for the throughput chart
    clean_present: bool = False
    clean_state: str | None = None
    truth_pages: int = 0
    missing_truth: list[tuple[str, int]] = field(default_factory=list)  # truth pages without a record
    records: FinalRecords | None = None  # the final records, text included, read when asked for
    clean_records: FinalRecords | None = None  # the cleaned layer's, likewise

    def text(self, p: "Page") -> str:
        """A page's text, read from pages.jsonl now."""
        if self.records is None or p.page_id not in self.records:
            return ""
        return self.records[p.page_id].text

    def clean_texts(self, doc: "Doc") -> dict[int, str]:
        """A document's cleaned page texts by page, read from RUN/clean now."""
        if self.clean_records is None:
            return {}
        return {page: rec.text for page, rec in self.clean_records.document(doc.doc_id).items()}

    def pages_read(self, doc: "Doc") -> dict[int, Row]:
        """A document's final records by page, text and word positions included, read from
        pages.jsonl now (the rows kept in memory hold neither)."""
        if self.records is None:
            return {}
        return dict(self.records.document(doc.doc_id))


def status_group(status: str) -> str:
    """ok / fallback / review / failed; a status this version does not know counts as failed."""
    return Status(status).group if status in STATUS_ORDER else "failed"


def read_as(rec: Row) -> str | None:
    """The language a record's page was read as (record.language), else the word list it was
    judged by (quality.language, records from before the field)."""
    return rec.language or (rec.quality.language if rec.quality else None)


def languages_read(pages: list[Any]) -> str:
    """`frk` or `dan 3, eng 1`: the languages a document's (or a run's) pages were read as."""
    counts = Counter(lang for p in pages if p.page > 0 and (lang := read_as(p.rec)))
    if len(counts) <= 1:
        return next(iter(counts), "")
    return ", ".join(f"{lang} {n:,}" for lang, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def micro_cer(pages: list[Page]) -> float | None:
    """Σ edits / Σ truth characters over the scored pages; None when none is scored."""
    scored = [p for p in pages if p.cer is not None]
    if not scored:
        return None
    return rate(sum(p.edits for p in scored), sum(p.ref_chars for p in scored))


def micro_cer_clean(pages: list[Page]) -> float | None:
    """The micro CER of the cleaned layer, when every scored page has one."""
    scored = [p for p in pages if p.cer is not None]
    if not scored or any(p.cer_clean is None for p in scored):
        return None
    ref = sum(p.ref_chars for p in scored)
    edits = sum((p.cer_clean or 0.0) * p.ref_chars for p in scored)
    return edits / ref if ref else None


def gather(opts: ReportOptions, notes: list[str], say: Callable[[str], None]) -> RunData:
    run_dir = Path(opts.run_dir)
    run_info, problem = RunDir(run_dir).read_info()
    if problem:
        notes.append(f"run.json {problem}: settings and throughput come from the records alone")
    say("reading records")
    finals, tries, n_records, times, records = _load_records(RunDir(run_dir).pages, run_keys(run_info))
    docs = _documents(finals, tries)
    run = RunData(run_dir=run_dir, run_info=run_info, docs=docs, pages=[p for doc in docs for p in doc.pages],
                  n_records=n_records, times=times, records=records)
    for g, p in enumerate(run.pages):
        p.g = g
    _add_clean_layer(run, notes)
    if opts.truth is not None:
        say("scoring against the truth")
        _score(run, Path(opts.truth))
    return run


def _load_records(pages_file: Path, keys: set[str] | None = None
                  ) -> tuple[dict[tuple[str, int], Row], Counter, int, list[float], FinalRecords]:
    """Of the folder's reading (the settings keys run.json names; every record without one): the
    last record of each page without its text, the number of records per page, all records, the
    finish times (epoch seconds) of every record for the throughput chart, and where each final
    record is (its text is read from there when the page is written out)."""
    finals: dict[tuple[str, int], Row] = {}
    offsets: dict[tuple[str, int], int] = {}
    tries: Counter = Counter()
    total = 0
    times: list[float] = []
    for offset, rec in records_with_offsets(pages_file):
        if keys is not None and rec.get("key") not in keys:
            continue  # another reading's record: history, not this folder's
        try:
            row = Row.of({k: rec[k] for k in _KEEP_FIELDS if k in rec})
        except (KeyError, TypeError, ValueError):
            continue
        key = row.page_id
        total += 1
        tries[key] += 1
        finals[key] = row
        offsets[key] = offset
        stamp = rec.get("finished_at")
        if isinstance(stamp, str):
            try:
                times.append(datetime.fromisoformat(stamp).timestamp())
            except ValueError:
                pass
    return finals, tries, total, times, FinalRecords(pages_file, offsets)


def _documents(finals: dict[tuple[str, int], Row], tries: Counter) -> list[Doc]:
    # A document-level failure (page 0) stands for its document only while no page was read.
    with_pages = {d for d, p in finals if p > 0}
    for key in [k for k in finals if k[1] == 0 and k[0] in with_pages]:
        del finals[key]
    doc_ids = sorted({d for d, _ in finals})
    doc_index = {doc_id: i for i, doc_id in enumerate(doc_ids)}
    docs = [Doc(i, doc_id, "") for i, doc_id in enumerate(doc_ids)]
    for key in sorted(finals, key=lambda k: (doc_index[k[0]], k[1])):
        doc = docs[doc_index[key[0]]]
        rec = finals[key]
        if not doc.source:
            doc.source = rec.source
        doc.pages.append(Page(0, doc.i, rec, tries[key]))
    return docs


def _add_clean_layer(run: RunData, notes: list[str]) -> None:
    """The cleaned layer, shown beside the raw text when `vlmocr clean` has written it."""
    clean_file = RunDir(run.run_dir).clean_pages
    run.clean_present = clean_file.is_file()
    if not run.clean_present:
        return
    run.clean_records = final_index(clean_file)  # its texts are read a document at a time
    for p in run.pages:
        p.has_clean = p.page_id in run.clean_records
    try:
        from ..text.clean import cleaned_layer_status

        state = cleaned_layer_status(run.run_dir)
    except Exception:  # the cleaning module is optional here; the layer is shown regardless
        state = "present"
    if state == "missing":  # pages.jsonl is there, its rules.json is not
        state = "present, without rules.json"
    if state == "stale":
        notes.append("the cleaned layer is older than pages.jsonl: run `vlmocr clean` again to refresh it")
    run.clean_state = state


def _score(run: RunData, truth_path: Path) -> None:
    """CER per page against the truth (a folder of name.txt + image, or a CSV), matched to the
    run's doc ids the way `vlmocr evaluate` matches them."""
    truth = load_truth(truth_path)
    run.truth_pages = len(truth)
    doc_map = match_truth(truth, [d.doc_id for d in run.docs])
    by_key = {p.page_id: p for p in run.pages}
    matched = {(doc_map.get(t.doc_id, t.doc_id), t.page): t.text for t in truth}
    for key, ref in matched.items():
        p = by_key.get(key)
        if p is None:
            run.missing_truth.append(key)
            continue
        p.truth = ref
        p.edits, p.ref_chars = char_errors(run.text(p), ref)
        p.cer = rate(p.edits, p.ref_chars)
        if p.has_clean and run.clean_records is not None:
            clean = run.clean_records[p.page_id].text
            p.cer_clean = rate(*char_errors(clean, ref))
