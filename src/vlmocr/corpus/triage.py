"""Know the corpus before spending GPU hours: one CSV row per document, streamed.

`triage()` walks the same documents `vlmocr run` would (`sources.discover`, so doc ids match),
and for each one records what it is, whether it can be read, how many pages it has, which of
them a text layer already serves, what the scans look like (page sizes, scan resolution,
rotation, spreads), byte-identical duplicates and the language of its text.

Nothing is rendered at full resolution. Per document the work is capped: every page is counted
and measured (page sizes come from the page tree, without loading pages), but only
`check_pages` pages, spread evenly from the first to the last, are loaded to read their text
layer and look at their image objects; `pages_checked` says how many. With `--sheets` every page
is rendered as a thumbnail anyway, so then every page is checked, and scanned blank paper is
recognised from the thumbnail.

Rows are written as they arrive, in the order `vlmocr run` reads the documents; the only state
kept across documents is a dict sha256 → first doc_id for duplicate detection.

Text cells that a spreadsheet would run as a formula (starting with = + - @ tab CR) are written
with a leading ' (`read_rows` removes it). Columns (counts marked * are over the checked pages,
the others over all pages):

  doc_id, path        as `vlmocr run` derives them (path made absolute)
  sha256, bytes       of the file; duplicate_of = the first doc_id with the same sha256
  kind                pdf | image | unsupported
  status, reason      ok | encrypted | corrupt | empty (zero pages) | missing | unsupported |
                      too_many_pages (over VLMOCR_MAX_DOC_PAGES) | skipped (a file of a folder that
                      is no document: `vlmocr run` skips it too; rows after the documents'), and why
                      (render's BadInput reason); for an ok document, the first unreadable page
  encrypted           "" | password (unreadable) | permissions-only (readable: owner password only)
  pages               every page (frame) counted
  pages_checked       how many were looked at (--check-pages, spread evenly; all with --sheets)
  text_pages*         usable text layer (render.usable_text_layer, the rule `vlmocr run` applies)
  image_only_pages*   no usable text layer, an image covering >= 30 % of the page (image files: every frame)
  blank_pages*        no page content at all; with --sheets also white paper seen on the thumbnail
  other_pages*        neither (vector drawings, a broken text layer without an image)
  bad_pages*          pages that could not be loaded
  text_judged         the rule, and the reasons text layers were rejected ("mostly symbols x3")
  rotated_pages*      /Rotate (PDF) or EXIF orientation (image) other than 0
  landscape_pages     wider than tall as displayed, not a spread
  spread_pages        >= 1.6 × the document's median portrait width at a similar height
  page_size_min/max   points as displayed, "WxH" of the smallest / largest width and height
  image_px_min/max    pixel size of the dominant image of scanned pages (image files: frames)
  scan_dpi[_min/_max] median / range; dpi_source = pdf-image (pixels ÷ size on the page) | metadata |
                      assumed (an image file declaring 72 or 96 dpi, what software writes when it
                      knows none: a guess, not a measure)
  lang                the quality signal's stopword guess as a --lang name: eng deu fra ces dan ell grc
                      ita spa nld swe pol lat; und = unsure; "" = no text
  seconds             time spent on the document
  script              ISO 15924 of the pages to OCR: Latn, Latf (Fraktur), Grek, Cyrl…; "" = unknown
  script_source       "text layer" (the letters of the text layer; Fraktur spelled in Latin letters
                      says Latn), "osd k/N pages" (`--osd N`: Tesseract's script detection, k of
                      the N scanned pages it ran on agreeing; engines/osd.py), or "unknown (scan…)"
  suggest_lang        the --lang to read the document with (languages.suggest_lang): the
                      language's Tesseract data, frk for Fraktur, grc/ell for Greek; "" = unknown"""

from __future__ import annotations

import csv
import multiprocessing
import os
import re
import signal
import statistics
import sys
import time
from collections import Counter, deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, TypeAlias

import pypdfium2 as pdfium

from ..exceptions import BadInput, UsageError
from ..files import atomic_file, check_output_path, file_sha256
from ..inputs.render import MIN_TEXT_CHARS, count_pages, kind_of, shown
from ..inputs.skipped import SkippedCounts, SkippedFiles, file_type
from ..inputs.skipped import phrase as skipped_phrase
from ..inputs.sources import Document, derive_doc_id, discover, neutralise_cell, printable, restore_cell
from ..languages import install_hint, suggest_lang, tesseract_has_language
from ..machine import available_cores
from ..runfolder.record import JsonObject, Sizing
from .facts import (
    LANG_SAMPLE_CHARS,
    PageFacts,
    greek_language,
    image_facts,
    mark_shapes,
    pages_to_check,
    pdf_facts,
    text_language,
    text_script,
)

DEFAULT_CHECK_PAGES = 16
# How a text layer is judged (render.usable_text_layer): printed in the `text_judged` column.
TEXT_RULE = f"chars>={MIN_TEXT_CHARS},wordish>=50%,broken<=5%"

# A row is CSV cells by column name: text, counts, seconds, a flag (COLUMNS below says which).
Cell: TypeAlias = str | int | float | bool | None
TriageRow: TypeAlias = dict[str, Cell]

COLUMNS = [
    "doc_id", "path", "sha256", "bytes", "kind", "status", "reason", "encrypted", "duplicate_of",
    "pages", "pages_checked", "text_pages", "image_only_pages", "blank_pages", "other_pages", "bad_pages",
    "text_judged", "rotated_pages", "landscape_pages", "spread_pages", "page_size_min", "page_size_max",
    "image_px_min", "image_px_max", "scan_dpi", "scan_dpi_min", "scan_dpi_max", "dpi_source", "lang", "seconds",
    "script", "script_source", "suggest_lang",
]


@dataclass(frozen=True)
class TriageOptions:
    check_pages: int = DEFAULT_CHECK_PAGES  # 0 = every page
    sheets_dir: str | None = None
    sheet_block: int = 24
    osd_pages: int = 0  # scanned pages per document Tesseract's OSD looks at for the script (0: none)


# ---------------------------------------------------------------- one document


def status_of(reason: str) -> str:
    """The status column from a BadInput reason (see render._pdf_error / _open_image)."""
    r = reason.lower()
    if r.startswith("encrypted"):
        return "encrypted"
    if "has no pages" in r:
        return "empty"
    if r.startswith("file not found"):
        return "missing"
    if r.startswith("unsupported file type"):
        return "unsupported"
    if r.startswith("too many pages"):
        return "too_many_pages"
    return "corrupt"


def _range(pairs: Iterable[tuple[float, float]]) -> tuple[str, str]:
    pairs = list(pairs)
    if not pairs:
        return "", ""
    lo = f"{min(w for w, _ in pairs):.0f}x{min(h for _, h in pairs):.0f}"
    hi = f"{max(w for w, _ in pairs):.0f}x{max(h for _, h in pairs):.0f}"
    return lo, hi


def triage_document(doc_id: str, path: str, opts: TriageOptions) -> TriageRow:
    """One CSV row for one document. Never raises for a bad document: the row says why."""
    t0 = time.perf_counter()
    p = Path(path)
    row: TriageRow = {c: "" for c in COLUMNS}
    row.update(doc_id=doc_id, path=printable(os.path.abspath(path)), kind=kind_of(p), status="ok")
    try:
        row["bytes"] = p.stat().st_size
        if p.is_file():
            row["sha256"] = file_sha256(p)
    except OSError:
        pass
    try:
        n = count_pages(p)
    except BadInput as exc:
        row.update(status=status_of(exc.reason), reason=exc.reason, pages=0)
        if row["status"] == "encrypted":
            row["encrypted"] = "password"
        row["seconds"] = round(time.perf_counter() - t0, 4)
        return row
    row["pages"] = n
    check = pages_to_check(n, 0 if opts.sheets_dir else opts.check_pages)
    sample: list[str] = []
    try:
        if row["kind"] == "pdf":
            facts, row["encrypted"] = pdf_facts(p, n, check, sample)
            dpi_source = "pdf-image"
        else:
            facts, _ = image_facts(p, n, check)
            dpi_source = "metadata"
    except (BadInput, OSError, pdfium.PdfiumError) as exc:
        reason = exc.reason if isinstance(exc, BadInput) else printable(f"cannot read {shown(p)} ({exc})")
        row.update(status="corrupt", reason=reason)
        row["seconds"] = round(time.perf_counter() - t0, 4)
        return row
    mark_shapes(facts)
    if opts.sheets_dir:
        from .sheets import write_sheets

        write_sheets(Path(opts.sheets_dir), doc_id, p, str(row["kind"]), facts, opts.sheet_block)
    _summarise(row, facts, dpi_source)
    if sample:
        row["lang"] = text_language("\n".join(sample)[:LANG_SAMPLE_CHARS])
    _script(row, p, facts, "\n".join(sample)[:LANG_SAMPLE_CHARS], opts)
    row["seconds"] = round(time.perf_counter() - t0, 4)
    return row


def _script(row: TriageRow, path: Path, facts: list[PageFacts], sample: str, opts: TriageOptions) -> None:
    """The script of the pages to OCR and the --lang to read them with: from the scanned pages'
    OSD when asked (`--osd N`), else from the text layer's letters; a scan is "unknown" without
    OSD (its image says nothing cheaper)."""
    scans = [f.page for f in facts if f.checked and f.kind == "image"]
    script, source = (text_script(sample), "text layer") if sample else ("", "")
    if not script:
        source = ""
    if scans and opts.osd_pages:
        from ..engines.osd import document_script, osd_image
        from ..inputs.render import render_page

        results = []
        # Spread over the scans, away from the ends (covers and title pages carry little text).
        k = min(opts.osd_pages, len(scans))
        for page in sorted({scans[int((i + 0.5) * len(scans) / k)] for i in range(k)}):
            try:
                rendered = render_page(path, page, Sizing())  # as `vlmocr run` renders it; OSD caps the size
            except (BadInput, OSError, pdfium.PdfiumError):
                continue  # a page that cannot be rendered has no script to tell
            results.append(osd_image(rendered.image))
        found, how = document_script(results)
        if found or not script:
            script, source = found, how
    elif scans and not script:
        source = "unknown (scan; --osd N to detect)"
    row["script"], row["script_source"] = script, source
    language = str(row["lang"] or "")
    if script == "Grek" and sample and language not in ("ell", "grc"):
        language = greek_language(sample)
    row["suggest_lang"] = suggest_lang(script or None, language) if (script or language not in ("", "und")) else ""


def _summarise(row: TriageRow, facts: list[PageFacts], dpi_source: str) -> None:
    checked = [f for f in facts if f.checked]
    kinds = Counter(f.kind for f in checked)
    row.update(
        pages_checked=len(checked), text_pages=kinds["text"], image_only_pages=kinds["image"],
        blank_pages=kinds["blank"], other_pages=kinds["other"], bad_pages=kinds["bad"],
        rotated_pages=sum(1 for f in checked if f.rotation),
        landscape_pages=sum(1 for f in facts if f.shape == "landscape"),
        spread_pages=sum(1 for f in facts if f.shape == "spread"),
    )
    rejected = Counter(re.sub(r"\d+", "N", f.text_reason) for f in checked if f.text_reason)
    judged = TEXT_RULE if row["kind"] == "pdf" else ""  # image files have no text layer to judge
    if rejected:
        judged += "; rejected: " + ", ".join(f"{why} x{k}" for why, k in sorted(rejected.items()))
    row["text_judged"] = judged
    errors = [f.error for f in checked if f.error]
    if errors:
        row["reason"] = errors[0] + (f" (and {len(errors) - 1} more pages)" if len(errors) > 1 else "")
    row["page_size_min"], row["page_size_max"] = _range(
        (f.width, f.height) for f in facts if f.width and f.height)
    row["image_px_min"], row["image_px_max"] = _range(
        (float(f.px[0]), float(f.px[1])) for f in facts if f.px and (f.checked or row["kind"] == "image"))
    scanned = [f for f in facts if f.dpi and (f.kind == "image" or (row["kind"] == "image" and not f.error))]
    if scanned:
        dpis = [f.dpi for f in scanned if f.dpi]
        row.update(scan_dpi=round(statistics.median(dpis)), scan_dpi_min=round(min(dpis)),
                   scan_dpi_max=round(max(dpis)),
                   dpi_source="assumed" if all(f.dpi_assumed for f in scanned) else dpi_source)


def triage_batch(batch: list[tuple[str, str]], opts: TriageOptions) -> list[TriageRow]:
    return [triage_document(doc_id, path, opts) for doc_id, path in batch]


def _init_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt means


# ---------------------------------------------------------------- the corpus


def _batches(docs: Iterable[Document], size: int) -> Iterator[list[tuple[str, str]]]:
    batch: list[tuple[str, str]] = []
    for d in docs:
        batch.append((d.doc_id, str(d.path)))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def crashed_row(doc_id: str, path: str) -> TriageRow:
    """The row of a document that killed the worker reading it (a pdfium crash)."""
    p = Path(path)
    row: TriageRow = {c: "" for c in COLUMNS}
    row.update(doc_id=doc_id, path=printable(os.path.abspath(path)), kind=kind_of(p), status="corrupt", pages=0,
               reason=f"the document crashed the reader (worker process died): {shown(p)}")
    try:
        row["bytes"] = p.stat().st_size
        row["sha256"] = file_sha256(p)
    except OSError:
        pass
    return row


def skipped_row(doc_id: str, path: str, kind: str) -> TriageRow:
    """The row of a file a folder walk found that is no document (`vlmocr run` skips it)."""
    row: TriageRow = {c: "" for c in COLUMNS}
    row.update(doc_id=doc_id, path=printable(os.path.abspath(path)), kind="unsupported", status="skipped", pages=0,
               reason=f"not a document: {kind} (vlmocr run skips it)")
    try:
        row["bytes"] = os.stat(path).st_size
    except OSError:
        pass
    return row


def _isolated(ctx: Any, work: Any, item: tuple[str, str], opts: TriageOptions) -> TriageRow:
    """Read one document alone in a fresh process, so a crash names the document."""
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_init_worker) as solo:
        try:
            return solo.submit(work, [item], opts).result()[0]
        except BrokenProcessPool:
            return crashed_row(*item)


def iter_rows(docs: Iterable[Document], opts: TriageOptions, workers: int = 1, batch_size: int = 8,
              work: Any = triage_batch) -> Iterator[TriageRow]:
    """Rows in document order. With workers > 1, a bounded window of batches is in flight in
    a process pool, so memory stays flat however long the corpus is; a document that crashes
    a worker gets a `corrupt` row and the pool is replaced. `work` is `triage_batch` (tests
    pass another module-level function)."""
    if workers <= 1:
        for doc in docs:
            yield work([(doc.doc_id, str(doc.path))], opts)[0]
        return
    ctx = multiprocessing.get_context("forkserver")

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker)

    pool = new_pool()
    window: deque[tuple[list[tuple[str, str]], Future, ProcessPoolExecutor]] = deque()

    def rows_of(batch: list[tuple[str, str]], fut: Future, owner: ProcessPoolExecutor) -> list[TriageRow]:
        nonlocal pool
        try:
            return fut.result()
        except BrokenProcessPool:
            if owner is pool:  # first to notice: later batches go to a fresh pool
                pool = new_pool()
                owner.shutdown(wait=False, cancel_futures=True)
            return [_isolated(ctx, work, item, opts) for item in batch]

    try:
        for batch in _batches(docs, batch_size):
            try:
                window.append((batch, pool.submit(work, batch, opts), pool))
            except BrokenProcessPool:
                pool.shutdown(wait=False, cancel_futures=True)
                pool = new_pool()
                window.append((batch, pool.submit(work, batch, opts), pool))
            while len(window) >= workers * 4:
                yield from rows_of(*window.popleft())
        while window:
            yield from rows_of(*window.popleft())
    finally:
        for _, fut, _ in window:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class TriageSummary:
    docs: int = 0
    pages: int = 0
    pages_checked: int = 0
    text_pages: int = 0
    image_only_pages: int = 0
    blank_pages: int = 0
    text_pages_estimated: int = 0  # text pages extrapolated to all pages
    ocr_pages_estimated: int = 0
    bytes: int = 0
    duplicates: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    languages: dict[str, int] = field(default_factory=dict)
    scripts: dict[str, int] = field(default_factory=dict)  # ISO 15924, or "unknown" for a document with scans
    rotated_pages: int = 0
    landscape_pages: int = 0
    spread_pages: int = 0
    seconds: float = 0.0
    out: str = ""
    sheets: int = 0
    interrupted: bool = False
    # Files of the folders that are no documents (rows with status "skipped"), and hidden entries
    # (.git, .DS_Store) ignored without a row: skipped.SkippedFiles.counts()
    skipped: SkippedCounts = field(default_factory=lambda: SkippedCounts(files=0, types={}, hidden=0))

    @property
    def unreadable(self) -> int:
        return sum(n for s, n in self.statuses.items() if s != "ok")

    def add(self, row: TriageRow) -> None:
        if row["status"] == "skipped":
            kind = file_type(str(row["path"]))
            types = self.skipped.setdefault("types", {})
            self.skipped["files"] = self.skipped.get("files", 0) + 1
            types[kind] = types.get(kind, 0) + 1
            return
        self.docs += 1
        self.bytes += int(row["bytes"] or 0)
        status = str(row["status"])
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if row["duplicate_of"]:
            self.duplicates += 1
        if lang := str(row["lang"] or ""):
            self.languages[lang] = self.languages.get(lang, 0) + 1
        script = str(row.get("script") or ("unknown" if row.get("script_source") else ""))
        if script:
            self.scripts[script] = self.scripts.get(script, 0) + 1
        if row["status"] != "ok":
            return
        pages = int(row["pages"] or 0)
        self.pages += pages
        for name in ("pages_checked", "text_pages", "image_only_pages", "blank_pages", "rotated_pages",
                     "landscape_pages", "spread_pages"):
            setattr(self, name, getattr(self, name) + int(row[name] or 0))
        text = estimated_text_pages(row)
        self.text_pages_estimated += text
        self.ocr_pages_estimated += pages - text

    def as_dict(self) -> JsonObject:
        d = asdict(self)
        d["unreadable"] = self.unreadable
        d["docs_per_second"] = round(self.docs / self.seconds, 2) if self.seconds else 0.0
        d["pages_per_second"] = round(self.pages / self.seconds, 1) if self.seconds else 0.0
        return d

    def line(self) -> str:
        scripts = " ".join(f"{k}={v}" for k, v in sorted(self.scripts.items()))
        return (f"Triage: {self.docs} docs, {self.pages} pages (text layer ≈{self.text_pages_estimated}, "
                f"to OCR ≈{self.ocr_pages_estimated}), duplicates={self.duplicates} "
                f"unreadable={self.unreadable}" + (f", scripts: {scripts}" if scripts else "")
                + f" in {self.seconds:.1f} s → {self.out}"
                + (f"; {left}" if (left := skipped_phrase(self.skipped)) else ""))


def estimated_text_pages(row: Mapping[str, Cell]) -> int:
    """Pages a text layer serves, extrapolated from the checked pages to all pages."""
    pages = int(row.get("pages") or 0)
    checked = int(row.get("pages_checked") or 0)
    text = int(row.get("text_pages") or 0)
    if not checked:
        return 0
    return min(pages, round(text * pages / checked))


class TriageProgress:
    """A rich bar on a terminal, a plain line every 10 s otherwise (a SLURM log, a pipe)."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total, self.enabled = total, enabled
        self.docs = self.pages = 0
        self._t0 = time.monotonic()
        self._last = 0.0
        self._bar = None
        from ..progress import console  # not in the workers: rich is the parent's business

        if enabled and console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("[bold]triage"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                                 console=console, transient=False)
            self._bar.start()
            self._task = self._bar.add_task("triage", total=total, rate="")

    def advance(self, pages: int) -> None:
        self.docs += 1
        self.pages += pages
        if not self.enabled:
            return
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        rate = f"{self.docs / elapsed:.1f} docs/s {self.pages / elapsed:.0f} pages/s"
        if self._bar is not None:
            self._bar.update(self._task, completed=self.docs, rate=rate)
        elif time.monotonic() - self._last > 10 or self.docs == self.total:
            self._last = time.monotonic()
            print(f"[vlmocr] triage {self.docs}/{self.total} docs, {rate}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def default_workers(docs: int, sheets: bool) -> int:
    """All cores, unless the corpus is too small to repay starting a pool (~0.3 s)."""
    cores = available_cores()
    per_worker = 4 if sheets else 200  # documents a worker should have to be worth it
    return max(1, min(cores, docs // per_worker))


def triage(paths: Iterable[str], out: Path, manifest: Path | None = None, opts: TriageOptions = TriageOptions(),
           workers: int | None = None, progress: bool = False) -> TriageSummary:
    """Write `out` (CSV, one row per document in `vlmocr run` order) and return the totals.

    The CSV is written under a temporary name and renamed when complete; an interrupted
    triage leaves no half file behind."""
    if opts.osd_pages and not tesseract_has_language("osd"):
        raise UsageError(f"--osd needs tesseract with its script detection data: {install_hint('osd')}")
    skipped = SkippedFiles(keep_all=True)  # every file gets its row, a document or not
    docs = discover(list(paths), manifest, skipped=skipped)
    if workers is None:
        workers = default_workers(len(docs), bool(opts.sheets_dir))
    out = Path(out)
    check_output_path(out, "--out", folder=False)  # a folder there, a parent that is a file, no permission
    if out.parent and not out.parent.exists():
        raise UsageError(f"--out: folder {out.parent} does not exist")
    if opts.sheets_dir:
        Path(opts.sheets_dir).mkdir(parents=True, exist_ok=True)
    summary = TriageSummary(out=str(out))
    first_of: dict[str, str] = {}  # sha256 → first doc_id: all the state kept across documents
    bar = TriageProgress(len(docs), enabled=progress)
    t0 = time.monotonic()
    try:  # SIGTERM (a batch scheduler's stop) ends like Ctrl-C: no half CSV left behind
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread
        previous = None
    try:
        with atomic_file(out) as tmp, tmp.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            for row in iter_rows(docs, opts, workers):
                sha = str(row["sha256"] or "")
                if sha:
                    first = first_of.setdefault(sha, str(row["doc_id"]))
                    if first != row["doc_id"]:
                        row["duplicate_of"] = first
                writer.writerow(csv_row(row))
                summary.add(row)
                bar.advance(int(row["pages"] or 0))
            for path, kind, rel in skipped.paths:
                row = skipped_row(derive_doc_id(rel), path, kind)
                writer.writerow(csv_row(row))
                summary.add(row)
            summary.skipped["hidden"] = skipped.hidden
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        bar.stop()
        summary.seconds = round(time.monotonic() - t0, 3)
    if opts.sheets_dir:
        summary.sheets = sum(1 for _ in Path(opts.sheets_dir).glob("*.png"))
    return summary


def csv_row(row: TriageRow) -> TriageRow:
    """The row as written: text cells neutralised against spreadsheet formulas (a file named
    `=cmd|' /C calc'!A0.pdf`), numbers as they are; `read_rows` gives the values back."""
    return {k: neutralise_cell(v) if isinstance(v, str) else v for k, v in row.items()}


def read_rows(path: Path) -> Iterator[dict[str, str]]:
    """Rows of a triage CSV (streamed), checking it is one."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"triage file not found: {p}")
    with p.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"doc_id", "path", "status", "pages", "pages_checked", "text_pages", "duplicate_of"} - set(
            reader.fieldnames or [])
        if missing:
            raise UsageError(f"{p}: not a triage CSV (missing column(s) {sorted(missing)}); make one with "
                             "`vlmocr triage PATH… --out triage.csv`")
        for row in reader:
            yield {k: restore_cell(v) if isinstance(v, str) else v for k, v in row.items()}
