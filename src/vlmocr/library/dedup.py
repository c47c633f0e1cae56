"""`vlmocr dedup`: what is new among the inputs, before any page is read.

Two kinds of duplicate, checked within the inputs (the first in input order is kept) and against
a library (what it holds is never read again):

- **bytes**: the same sha256 of the file;
- **text**: the same digest of the normalised PDF text layer — the same paper saved twice by
  different software. Only documents whose text layer is usable (`render.usable_text_layer`) on
  most pages get a text digest; a scan has none, and is only ever a byte duplicate.

Normalisation: NFKC, case-folded, every run of non-word characters (spaces, line breaks,
punctuation, hyphens) folded to one space; pages in order, each page's words joined, so page
breaks, line wrapping and font-encoding quirks of whitespace do not matter.

Outputs: a manifest of what is new (``doc_id,path[,pages,dpi,language]``, absolute paths,
readable by `vlmocr run --manifest`; JSONL when the name ends in .jsonl, CSV for .csv) and a
report (CSV, or JSON when the name ends in .json) with one row per input: status new | duplicate |
unreadable, the match (bytes | text), what it duplicates and where (input | library)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..exceptions import UsageError
from ..files import file_sha256, write_text_atomic
from ..inputs.sources import Document, discover
from ..machine import available_cores
from ..runfolder.record import JsonObject
from .catalog import Catalog, is_library

MIN_USABLE_SHARE = 0.8  # share of pages with a usable text layer for a document to get a text digest
MIN_TEXT_CHARS = 200  # … and at least this many normalised characters in all
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)

REPORT_COLUMNS = ["doc_id", "path", "status", "match", "duplicate_of", "where", "sha256", "text_sha256", "pages",
                  "detail"]


def normalise_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _NON_WORD.sub(" ", text).strip()


def text_digest_of_pages(pages: list[str]) -> str | None:
    """The digest of a document's text given its pages' text layers; None when too little is text."""
    from ..inputs.render import usable_text_layer

    if not pages:
        return None
    usable = sum(1 for t in pages if usable_text_layer(t)[0])
    normalised = [normalise_text(t) for t in pages]
    if usable / len(pages) < MIN_USABLE_SHARE or sum(len(t) for t in normalised) < MIN_TEXT_CHARS:
        return None
    h = hashlib.sha256()
    for t in normalised:
        h.update(t.encode("utf-8"))
        h.update(b"\x0c")
    return h.hexdigest()


def text_digest(path: Path) -> tuple[str | None, int | None, str]:
    """(text digest, pages, note) of a PDF's text layer; (None, pages, why) when it has none."""
    from ..exceptions import BadInput
    from ..inputs.render import count_pages, kind_of, text_layer

    path = Path(path)
    if kind_of(path) != "pdf":
        return None, None, "not a PDF"
    try:
        n = count_pages(path)
        pages = [text_layer(path, p) for p in range(1, n + 1)]
    except BadInput as exc:
        return None, None, exc.reason
    digest = text_digest_of_pages(pages)
    return digest, n, "" if digest else "no usable text layer"


def fingerprint(path: str) -> dict[str, Any]:
    """sha256 and text digest of one file (runs in a worker process)."""
    p = Path(path)
    out: dict[str, Any] = {"sha256": None, "text_sha256": None, "pages": None, "detail": ""}
    try:
        out["sha256"] = file_sha256(p)
    except OSError as exc:
        out["detail"] = f"cannot read: {exc.strerror or exc}"
        return out
    out["text_sha256"], out["pages"], out["detail"] = text_digest(p)
    return out


@dataclass
class DedupRow:
    doc: Document
    status: str = "new"  # new | duplicate | unreadable
    match: str = ""  # bytes | text
    duplicate_of: str = ""
    where: str = ""  # input | library
    sha256: str | None = None
    text_sha256: str | None = None
    pages: int | None = None
    detail: str = ""

    def as_dict(self) -> JsonObject:
        return {"doc_id": self.doc.doc_id, "path": os.path.abspath(self.doc.path), "status": self.status, "match": self.match,
                "duplicate_of": self.duplicate_of, "where": self.where, "sha256": self.sha256 or "",
                "text_sha256": self.text_sha256 or "", "pages": self.pages if self.pages is not None else "",
                "detail": self.detail}


@dataclass
class DedupResult:
    rows: list[DedupRow] = field(default_factory=list)
    manifest: Path | None = None
    report: Path | None = None

    def count(self, status: str, match: str | None = None, where: str | None = None) -> int:
        return sum(1 for r in self.rows if r.status == status and (match is None or r.match == match)
                   and (where is None or r.where == where))

    @property
    def new(self) -> list[DedupRow]:
        return [r for r in self.rows if r.status == "new"]

    def as_dict(self) -> JsonObject:
        return {"documents": len(self.rows), "new": self.count("new"),
                "duplicate_bytes": self.count("duplicate", "bytes"), "duplicate_text": self.count("duplicate", "text"),
                "in_library": self.count("duplicate", where="library"), "unreadable": self.count("unreadable"),
                "manifest": str(self.manifest) if self.manifest else None,
                "report": str(self.report) if self.report else None, "rows": [r.as_dict() for r in self.rows]}

    def line(self) -> str:
        d = self.as_dict()
        return (f"Dedup: {d['documents']} documents, new={d['new']} duplicate_bytes={d['duplicate_bytes']} "
                f"duplicate_text={d['duplicate_text']} (in library: {d['in_library']}) unreadable={d['unreadable']}"
                + (f" → {self.manifest}" if self.manifest else ""))


def _fingerprints(paths: list[str], workers: int) -> list[dict[str, Any]]:
    if workers <= 1 or len(paths) < 4:
        return [fingerprint(p) for p in paths]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fingerprint, paths, chunksize=max(1, len(paths) // (workers * 8))))


def dedup(paths: Iterable[str | Path] = (), manifest: Path | None = None, library: Path | None = None,
          workers: int | None = None) -> DedupResult:
    docs = discover(list(paths), manifest)
    lib_sha: dict[str, str] = {}
    lib_text: dict[str, str] = {}
    if library is not None:
        if is_library(library):
            with Catalog(library, readonly=True) as cat:
                _by_doc, lib_sha, lib_text = cat.index()  # → lib_id (doc_id--sha), unique in the library
        # A library that does not exist yet holds nothing: every input is new.
    workers = workers or min(4, available_cores())
    prints = _fingerprints([str(d.path) for d in docs], workers)
    result = DedupResult()
    seen_sha: dict[str, str] = {}
    seen_text: dict[str, str] = {}
    for doc, fp in zip(docs, prints):
        row = DedupRow(doc, sha256=fp["sha256"], text_sha256=fp["text_sha256"], pages=fp["pages"],
                       detail=fp["detail"])
        result.rows.append(row)
        sha, text = row.sha256, row.text_sha256
        if sha is None:
            row.status = "unreadable"
            continue
        if sha in lib_sha:
            row.status, row.match, row.duplicate_of, row.where = "duplicate", "bytes", lib_sha[sha], "library"
        elif sha in seen_sha:
            row.status, row.match, row.duplicate_of, row.where = "duplicate", "bytes", seen_sha[sha], "input"
        elif text and text in lib_text:
            row.status, row.match, row.duplicate_of, row.where = "duplicate", "text", lib_text[text], "library"
        elif text and text in seen_text:
            row.status, row.match, row.duplicate_of, row.where = "duplicate", "text", seen_text[text], "input"
        seen_sha.setdefault(sha, doc.doc_id)
        if text:
            seen_text.setdefault(text, doc.doc_id)
    return result


def _pages_spec(pages: tuple[int, ...] | None) -> str:
    if not pages:
        return ""
    parts: list[str] = []
    start = prev = pages[0]
    for p in list(pages[1:]) + [None]:  # type: ignore[list-item]
        if p is not None and p == prev + 1:
            prev = p
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ",".join(parts)


MANIFEST_FORMATS = {".jsonl": "jsonl", ".csv": "csv"}  # the two `run --manifest` reads


def manifest_format(path: Path, option: str = "--manifest-out") -> str:
    """The manifest's format, from its name: a .jsonl name holding CSV is read by `run --manifest`
    as JSON, line by line, and fails (seed 001 writes `--manifest-out <run>/papers.jsonl`)."""
    fmt = MANIFEST_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise UsageError(f"{option} {path}: name it .jsonl or .csv (the manifest's format)")
    return fmt


def write_manifest(rows: Iterable[DedupRow], path: Path) -> Path:
    """The new documents as a run manifest (absolute paths: valid wherever the manifest lives),
    in the format its name says."""
    fmt = manifest_format(path)
    rows = list(rows)
    columns = ["doc_id", "path"]
    if any(r.doc.pages for r in rows) or any(r.doc.dpi for r in rows):
        columns += ["pages", "dpi"]
    if any(r.doc.language for r in rows):
        columns.append("language")  # an input manifest's language still judges the pages
    entries = []
    for r in rows:
        cells = {"doc_id": r.doc.doc_id, "path": os.path.abspath(r.doc.path),
                 "pages": _pages_spec(r.doc.pages), "dpi": r.doc.dpi, "language": r.doc.language}
        entries.append({c: cells[c] for c in columns})
    buf = io.StringIO()
    if fmt == "jsonl":
        for entry in entries:  # an unknown value is left out rather than written empty
            buf.write(json.dumps({k: v for k, v in entry.items() if v not in (None, "")}, ensure_ascii=False) + "\n")
    else:
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for entry in entries:
            writer.writerow(["" if entry[c] is None else (repr(entry[c]) if c == "dpi" else entry[c]) for c in columns])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, buf.getvalue(), errors="surrogateescape")  # file names as their bytes
    return path


def write_report(result: DedupResult, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        write_text_atomic(path, json.dumps(result.as_dict(), ensure_ascii=False, indent=2) + "\n", errors="surrogateescape")
        return path
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=REPORT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in result.rows:
        writer.writerow(r.as_dict())
    write_text_atomic(path, buf.getvalue(), errors="surrogateescape")
    return path
