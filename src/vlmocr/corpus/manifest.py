"""From a triage CSV to a `vlmocr run --manifest` file in priority order.

Duplicates and unreadable files are left out and reported. Order: documents named in a
priority file (in its order) or with a value in a priority column (ascending) come first, then
the rest by a rule (fewest pages first by default, so many documents finish early). Ties keep
the triage order, which is `vlmocr run`'s order.

`stage` makes an ASCII-named symlink for every document (for tools and file systems that choke
on other names); the manifest then points at the links and keeps the original doc_id, so
results are named as without staging. The original paths go to a side file
`<manifest>.originals.csv` (doc_id,path,original_path). Triage's suggested --lang goes with each
document as `language`, marked `language_from = triage`: the run reads and judges the document in
it, but does not take it for a person's word (no wrong_language by it)."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..exceptions import UsageError
from ..files import atomic_file, write_text_atomic
from ..inputs.sources import neutralise_cell, unprintable_path, unreserved
from ..runfolder.record import JsonObject
from .triage import read_rows

ORDERS = ("fewest-pages", "most-pages", "path", "triage")
MAX_STAGE_NAME = 120


@dataclass
class Entry:
    doc_id: str
    path: str
    pages: int
    index: int  # position in the triage CSV
    rank: tuple = ()
    language: str = ""  # triage's suggested --lang for it (suggest_lang), "" when it has none


@dataclass
class ManifestReport:
    out: str = ""
    docs: int = 0
    pages: int = 0
    prioritised: int = 0
    skipped_duplicates: int = 0
    skipped_unreadable: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)  # doc_id, path, why, detail
    priority_not_found: list[str] = field(default_factory=list)
    staged: int = 0
    stage_dir: str = ""
    originals: str = ""

    def as_dict(self) -> JsonObject:
        d = asdict(self)
        d["skipped"] = len(self.skipped)
        d["priority_not_found"] = len(self.priority_not_found)
        return d

    def line(self) -> str:
        extra = f", staged {self.staged} links in {self.stage_dir}" if self.stage_dir else ""
        return (f"Manifest: {self.docs} documents, {self.pages} pages → {self.out} (skipped "
                f"{self.skipped_duplicates} duplicates, {self.skipped_unreadable} unreadable; "
                f"{self.prioritised} prioritised{extra})")


def read_priority_file(path: Path) -> list[str]:
    """Doc ids or paths, one a line, most important first; lines starting with '#' are comments."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"priority file not found: {p}")
    keys = []
    for line in p.read_text(encoding="utf-8-sig").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keys.append(line)
    return keys


def ascii_name(doc_id: str) -> str:
    """A portable file-name stem: ASCII letters, digits, '.', '_', '-' only."""
    text = unicodedata.normalize("NFKD", doc_id).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")
    return text[:MAX_STAGE_NAME] or "doc"


def stage_names(entries: list[Entry]) -> dict[str, str]:
    """doc_id → staged file name; unique even on case-insensitive file systems, never a name
    Windows reserves (CON.pdf), and decided in doc_id order so a name does not depend on the
    priority order."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for e in sorted(entries, key=lambda e: e.doc_id):
        suffix = Path(e.path).suffix.lower()
        suffix = suffix if re.fullmatch(r"\.[a-z0-9]{1,8}", suffix) else ""
        stem = unreserved(ascii_name(e.doc_id))
        name = stem + suffix
        if name.lower() in taken:
            name = f"{stem}-{hashlib.sha256(e.doc_id.encode('utf-8')).hexdigest()[:10]}{suffix}"
        taken.add(name.lower())
        names[e.doc_id] = name
    return names


def _cells(*values: str | int) -> list[str | int]:
    """A CSV row whose text cells a spreadsheet shows as text, never runs as formulas
    (`vlmocr run --manifest` reads them back as they were)."""
    return [neutralise_cell(v) if isinstance(v, str) else v for v in values]


def _link(target: str, link: Path) -> None:
    """`link` → `target`, replacing a link that points elsewhere (atomically)."""
    try:
        if os.readlink(link) == target:
            return
    except OSError:
        pass
    if link.exists() and not link.is_symlink():
        raise UsageError(f"--stage: {link} exists and is not a symlink; choose an empty folder")
    with atomic_file(link) as tmp:
        os.symlink(target, tmp)


def build_manifest(triage_csv: Path, out: Path, priority_file: Path | None = None,  # noqa: PLR0915 (long: to be split)
                   priority_column: str | None = None, order: str = "fewest-pages",
                   stage: Path | None = None, skipped_out: Path | None = None) -> ManifestReport:
    if order not in ORDERS:
        raise UsageError(f"--order {order!r}: choose one of {', '.join(ORDERS)}")
    if priority_file and priority_column:
        raise UsageError("give --priority-file or --priority-column, not both")
    report = ManifestReport(out=str(out))
    entries: list[Entry] = []
    column_values: dict[str, str] = {}
    for i, row in enumerate(read_rows(triage_csv)):
        if priority_column and i == 0 and priority_column not in row:
            raise UsageError(f"{triage_csv}: no column {priority_column!r} (add it, e.g. in a spreadsheet)")
        if row["status"] == "skipped":
            continue  # a file of a folder that is no document: triage lists it, no run reads it
        if row["status"] != "ok":
            report.skipped_unreadable += 1
            report.skipped.append({"doc_id": row["doc_id"], "path": row["path"], "why": row["status"],
                                   "detail": row.get("reason", "")})
            continue
        if row["duplicate_of"]:
            report.skipped_duplicates += 1
            report.skipped.append({"doc_id": row["doc_id"], "path": row["path"], "why": "duplicate",
                                   "detail": f"duplicate of {row['duplicate_of']}"})
            continue
        entries.append(Entry(row["doc_id"], row["path"], int(row["pages"] or 0), i,
                             language=(row.get("suggest_lang") or "").strip()))
        if priority_column:
            column_values[row["doc_id"]] = (row.get(priority_column) or "").strip()

    # explicit priority first (a smaller number first), then the rule
    explicit: dict[str, float] = {}
    if priority_file:
        wanted = read_priority_file(priority_file)
        by_id = {e.doc_id: e for e in entries}
        by_path = {os.path.abspath(e.path): e for e in entries}
        for n, key in enumerate(wanted):
            e = by_id.get(key) or by_path.get(os.path.abspath(key))
            if e is None:
                report.priority_not_found.append(key)
            elif e.doc_id not in explicit:
                explicit[e.doc_id] = n
    elif priority_column:
        for doc_id, value in column_values.items():
            if value == "":
                continue
            try:
                explicit[doc_id] = float(value)
            except ValueError:
                raise UsageError(f"{triage_csv}: {priority_column}={value!r} for {doc_id!r} is not a number") from None
    for e in entries:
        rule: tuple
        if order == "fewest-pages":
            rule = (e.pages,)
        elif order == "most-pages":
            rule = (-e.pages,)
        elif order == "path":
            rule = (e.path,)
        else:
            rule = ()
        first = explicit.get(e.doc_id)
        e.rank = (0, first, e.index) if first is not None else (1, *rule, e.index)
    entries.sort(key=lambda e: e.rank)
    report.prioritised = len(explicit)

    paths = {e.doc_id: e.path for e in entries}
    if stage is not None:
        stage = Path(stage)
        stage.mkdir(parents=True, exist_ok=True)
        names = stage_names(entries)
        for e in entries:
            link = stage / names[e.doc_id]
            # a non-UTF-8 name is spelled \xNN in the triage CSV: link the file itself
            _link(os.path.abspath(unprintable_path(e.path) or e.path), link)
            paths[e.doc_id] = os.path.abspath(link)
        report.staged = len(entries)
        report.stage_dir = str(stage)

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    # Triage's suggested language goes with each document, marked as a suggestion (language_from):
    # it chooses the engine and data and judges the pages, but is no one's word.
    suggested = any(e.language for e in entries)
    w.writerow(["doc_id", "path", "priority", *(["language", "language_from"] if suggested else [])])
    for rank, e in enumerate(entries, 1):
        extra = [e.language, "triage" if e.language else ""] if suggested else []
        w.writerow(_cells(e.doc_id, paths[e.doc_id], rank, *extra))
        report.pages += e.pages
    report.docs = len(entries)
    write_text_atomic(Path(out), buf.getvalue(), errors="surrogateescape")  # file names as their bytes
    if stage is not None:
        originals = Path(out).with_name(Path(out).stem + ".originals.csv")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["doc_id", "path", "original_path"])
        for e in entries:
            w.writerow(_cells(e.doc_id, paths[e.doc_id], e.path))
        write_text_atomic(originals, buf.getvalue(), errors="surrogateescape")
        report.originals = str(originals)
    if skipped_out is not None:
        buf = io.StringIO()
        skipped_rows = csv.DictWriter(buf, fieldnames=["doc_id", "path", "why", "detail"], lineterminator="\n")
        skipped_rows.writeheader()
        skipped_rows.writerows({k: neutralise_cell(v) for k, v in s.items()} for s in report.skipped)
        write_text_atomic(Path(skipped_out), buf.getvalue(), errors="surrogateescape")
    return report
