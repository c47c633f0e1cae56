"""`vlmocr publish RUN… --library LIB`: finished documents from runs into a library.

Jobs only stage (each writes its own run directory); publishing is one separate step, the only
writer of a library, so concurrent jobs never race on a catalog.

For every document of the given runs (RUN, or a SLURM RUN's shards/*):

- complete in some run (every selected page has a final record, see `runs.py`) → the best
  complete version (most ok/fallback pages, then fewest failed, then the newest records) is
  published — unless the library already holds the same bytes (``unchanged``), a better version
  (``kept``), or the same source file under another doc_id (``duplicate``);
- complete nowhere → ``incomplete`` (or ``unreadable`` when it could not be opened), reported and
  not published — but ``held``, not a failure, when the library already holds it from an earlier
  publication (a later run completed it).

Per document, publication is atomic: the folder is assembled in LIB/staging/ and renamed into
LIB/docs/ (a replaced folder is swapped in one `renameat2(RENAME_EXCHANGE)`), inside the catalog
transaction that records it. Publishing the same runs again writes nothing at all. Publishers take
LIB/.lock (fcntl) and so run one after the other; readers never wait. A publisher killed mid-way is
repaired by the next one, before anything else (`_recover`): a folder swapped in whose transaction
never committed is swapped back for the version the catalog holds, which waits in staging/."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Iterable

import orjson

from ..exceptions import ExitCode, UsageError
from ..files import exchange, kill_point, write_text_atomic
from ..runfolder.assemble import assemble_markdown
from ..runfolder.record import JsonObject, Row, now_iso
from ..text.clean import search_text
from ..text.textquality import page_language
from .catalog import CACHE, CATALOG, DOC_PAGES, DOCS, LOCK, STAGING, Catalog, LibraryLock
from .identify import Crossref, Identifier, LookupError_, identify_records
from .runs import DocRecords, document_text, fsync_dir, original_name, read_run, resolve_source, run_dirs, safe_sha256

TEXT_FILE = "document.txt"
MD_FILE = "document.md"
META_FILE = "meta.json"

OUTCOMES = ("published", "updated", "unchanged", "kept", "duplicate", "held", "incomplete", "unreadable")
FAILURES = ("incomplete", "unreadable")


@dataclass
class Outcome:
    doc_id: str
    action: str  # one of OUTCOMES
    lib_id: str | None = None
    run: str | None = None
    detail: str = ""

    def as_dict(self) -> JsonObject:
        return {"doc_id": self.doc_id, "action": self.action, "lib_id": self.lib_id, "run": self.run,
                "detail": self.detail}


@dataclass
class PublishResult:
    library: Path
    runs: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    documents_in_library: int = 0
    repaired: list[str] = field(default_factory=list)
    lookup: dict[str, Any] | None = None

    def counts(self) -> dict[str, int]:
        c = Counter(o.action for o in self.outcomes)
        return {k: c.get(k, 0) for k in OUTCOMES}

    def of(self, action: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == action]

    def exit_code(self) -> ExitCode:
        return ExitCode.incomplete if any(o.action in FAILURES for o in self.outcomes) else ExitCode.ok

    def as_dict(self) -> JsonObject:
        return {"library": str(self.library), "runs": self.runs, "counts": self.counts(),
                "documents_in_library": self.documents_in_library, "repaired": self.repaired,
                "lookup": self.lookup, "exit_code": int(self.exit_code()),
                "documents": [o.as_dict() for o in self.outcomes]}

    def line(self) -> str:
        c = self.counts()
        return ("Published: " + " ".join(f"{k}={v}" for k, v in c.items())
                + f" → {self.library} ({self.documents_in_library} documents)")


@dataclass
class Candidate:
    """A complete document chosen for publication, with what identifies it."""

    doc: DocRecords
    source_path: Path | None
    sha256: str | None
    identifiers: list[Identifier] = field(default_factory=list)
    metadata: dict[str, Any] | None = None

    @property
    def lib_id(self) -> str:
        return lib_id_for(self.doc.doc_id, self.sha256, self.doc.source)


def lib_id_for(doc_id: str, sha256: str | None, source: str) -> str:
    if sha256:
        return f"{doc_id}--{sha256[:12]}"
    # Source file not found: name it from the source path instead (marked, never hex-only).
    return f"{doc_id}--src{hashlib.sha256(source.encode('utf-8')).hexdigest()[:9]}"


def rank(ok: int, fallback: int, failed: int, finished_at: str | None) -> tuple:
    return (ok + fallback, ok, -failed, finished_at or "")


def _doc_rank(doc: DocRecords) -> tuple:
    g = doc.groups()
    return rank(g["ok"], g["fallback"], g["failed"], doc.finished_at)


def _row_rank(row: dict[str, Any]) -> tuple:
    return rank(row["ok_pages"], row["fallback_pages"], row["failed_pages"], row.get("finished_at"))


def _most_common(values: Iterable[Any]) -> Any:
    c = Counter(v for v in values if v not in (None, ""))
    return c.most_common(1)[0][0] if c else None


# ------------------------------------------------------------------------------ the folder


@dataclass
class Built:
    row: dict[str, Any]
    files: dict[str, bytes]
    page_rows: list[dict[str, Any]]
    texts: list[tuple[int, str]]
    identifiers: list[dict[str, Any]]


def pages_bytes(records: list[Row]) -> bytes:
    return b"".join(orjson.dumps(dict(r.data)) + b"\n" for r in sorted(records, key=lambda r: r.page))


def content_digest(records: list[Row], layer: str) -> str:
    return hashlib.sha256(pages_bytes(records) + b"\0" + layer.encode()).hexdigest()


def build(c: Candidate, text_sha256: str | None) -> Built:
    doc = c.doc
    records = sorted(doc.records, key=lambda r: r.page)
    text, spans = document_text(records)
    g = doc.groups()
    page_rows = []
    for rec, (page, start, end) in zip(records, spans):
        page_rows.append({"page": page, "status": rec.status.value, "engine": rec.engine,
                          "chars": end - start, "start": start, "end": end})
    source_bytes = None
    if c.source_path is not None:
        try:
            source_bytes = c.source_path.stat().st_size
        except OSError:
            pass
    clean_rules = None
    if doc.layer == "clean":
        clean_rules = _most_common((r.extra("clean") or {}).get("rules") for r in records)
    lib_id = c.lib_id
    row = {
        "lib_id": lib_id, "doc_id": doc.doc_id, "sha256": c.sha256, "text_sha256": text_sha256,
        "content_sha256": content_digest(records, doc.layer),
        "original_name": original_name(doc.source, doc.run), "source": doc.source,
        "source_path": str(c.source_path) if c.source_path else None, "source_bytes": source_bytes,
        "pages": len(records), "doc_pages": doc.doc_pages,
        "ok_pages": g["ok"], "fallback_pages": g["fallback"], "review_pages": g["review"], "failed_pages": g["failed"],
        "statuses": doc.statuses, "chars": len(text), "layer": doc.layer, "clean_rules": clean_rules,
        "run": str(doc.run.path), "settings_key": _most_common(r.key for r in records),
        "engines": sorted({r.engine for r in records if r.engine}),
        "model": _most_common(r.model for r in records),
        "revision": _most_common(r.revision for r in records),
        "prompt_id": _most_common(r.prompt_id for r in records),
        "provenance": {**doc.run.provenance(), "keys": sorted({r.key for r in records})},
        "metadata": c.metadata, "path": f"{DOCS}/{lib_id}", "finished_at": doc.finished_at or None,
        "published_at": now_iso(),
    }
    idents = [i.as_dict() for i in c.identifiers]
    meta = {**row, "identifiers": idents, "page_spans": page_rows,
            "files": {"text": TEXT_FILE, "markdown": MD_FILE, "pages": DOC_PAGES}}
    files = {
        DOC_PAGES: pages_bytes(records),
        TEXT_FILE: text.encode("utf-8"),
        MD_FILE: assemble_markdown(records).encode("utf-8"),
        META_FILE: (json.dumps(meta, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode("utf-8"),
    }
    texts = [(rec_page, search_text(text[start:end], page_language(rec)[0]))
             for rec, (rec_page, start, end) in zip(records, spans)]
    return Built(row, files, page_rows, texts, idents)


def _write_folder(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True)
    for name, data in files.items():
        with (folder / name).open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    fsync_dir(folder)


def _install(staged: Path, final: Path) -> Path | None:
    """Move a staged folder into place; returns where the replaced folder went (to delete)."""
    if final.exists():
        if exchange(staged, final):
            return staged
        old = staged.with_name(staged.name + ".old")
        os.replace(final, old)  # no exchange: a brief moment without the folder
        os.replace(staged, final)
        return old
    os.replace(staged, final)
    return None


# ------------------------------------------------------------------------------ publish


def publish(runs: Iterable[Path | str], library: Path, *, layer: str = "raw", replace: bool = False,
            crossref: Crossref | None = None, source_roots: Iterable[Path] = (), clean_rules: Path | None = None,
            wait: bool = True, log: Callable[[str], None] = lambda _m: None,
            only: Collection[str] | None = None) -> PublishResult:
    """`only`: consider these doc_ids alone (describe --library re-publishes the documents it
    gave descriptions, not the rest of their runs)."""
    library = Path(library)
    check_library_dir(library)
    dirs = run_dirs(runs)
    roots = list(source_roots)
    result = PublishResult(library=library, runs=[str(d) for d in dirs])

    # 1. Read every run (no lock: runs are only read).
    by_doc: dict[str, list[DocRecords]] = {}
    for d in dirs:
        _info, docs = read_run(d, layer, roots, clean_rules)
        for doc_id, doc in docs.items():
            if only is None or doc_id in only:
                by_doc.setdefault(doc_id, []).append(doc)
        log(f"{d}: {len(docs)} document(s), {sum(1 for x in docs.values() if x.complete)} complete")

    # 2. Choose the best complete version of each (doc_id, source file).
    sha_cache: dict[Path, str | None] = {}

    def sha_of(path: Path | None) -> str | None:
        if path is None:
            return None
        key = path.resolve()
        if key not in sha_cache:
            sha_cache[key] = safe_sha256(path)
        return sha_cache[key]

    chosen: dict[tuple[str, str | None], Candidate] = {}
    not_complete: dict[str, list[DocRecords]] = {}
    for doc_id in sorted(by_doc):
        complete = [d for d in by_doc[doc_id] if d.complete]
        if not complete:
            not_complete[doc_id] = by_doc[doc_id]
            continue
        for doc in complete:
            path = resolve_source(doc.source, doc.run)
            sha = sha_of(path)
            key = (doc_id, sha if sha else lib_id_for(doc_id, None, doc.source))
            prev = chosen.get(key)
            if prev is None or _doc_rank(doc) > _doc_rank(prev.doc):
                chosen[key] = Candidate(doc, path, sha)
    # Figure descriptions (vlmocr describe) go in with the text, as alt text in place, so the
    # library's pages, its search and its exports carry them as exports from the run do.
    from ..figures.placement import add_figures

    for c in chosen.values():
        c.doc.records = add_figures(c.doc.run.path, c.doc.records, link_prefix="")
    missing_sources = [c for c in chosen.values() if c.sha256 is None]
    if missing_sources:
        log(f"warning: {len(missing_sources)} source file(s) not found (e.g. {missing_sources[0].doc.source!r}); "
            "published without sha256 — pass --source-root")

    # 3. Identify (offline), and look up when asked — before the lock: the network is slow.
    for c in chosen.values():
        c.identifiers = identify_records(c.doc.records)
    if crossref is not None:
        for c in chosen.values():
            if not c.identifiers:
                continue
            try:
                c.metadata = crossref.lookup(c.identifiers)
            except LookupError_ as exc:
                log(f"warning: lookup for {c.doc.doc_id} failed: {exc}")
        result.lookup = crossref.stats.as_dict()

    # 4. Under the lock: compare with the catalog, stage, swap in, record.
    library.mkdir(parents=True, exist_ok=True)
    lock = LibraryLock(library)
    lock.acquire(wait=wait, on_wait=log)
    try:
        with Catalog(library) as cat:
            result.repaired = _recover(library, cat)
            for r in result.repaired:
                log(f"repaired: {r}")
            for c in sorted(chosen.values(), key=lambda c: (c.doc.doc_id, c.lib_id)):
                result.outcomes.append(_publish_one(c, library, cat, replace))
            by_doc_held, by_sha, _ = cat.index()
            for doc_id, versions in sorted(not_complete.items()):
                result.outcomes.append(_not_complete(doc_id, versions, by_doc_held, by_sha))
            result.documents_in_library = cat.count()
    finally:
        lock.release()
    result.outcomes.sort(key=lambda o: (o.doc_id, o.lib_id or ""))
    return result


def check_library_dir(library: Path) -> None:
    """A library is a folder with a catalog, or a new or empty one: never somebody's folder that
    happens to have a docs/ (publishing tidies docs/ of whatever the catalog does not list)."""
    if (library / CATALOG).is_file() or not library.exists():
        return
    if not library.is_dir():
        raise UsageError(f"--library {library}: not a folder")
    if any(e.name not in (LOCK, STAGING, CACHE) for e in os.scandir(library)):
        raise UsageError(f"--library {library}: a folder that is not empty and holds no {CATALOG}; "
                         "give a new or empty folder for a new library")


def _not_complete(doc_id: str, docs: list[DocRecords], by_doc: dict[str, set[str | None]],
                  by_sha: dict[str, str]) -> Outcome:
    first = docs[0]
    shas = {safe_sha256(resolve_source(d.source, d.run)) for d in docs} - {None}
    held = [by_sha[s] for s in shas if s in by_sha] if shas else (
        [f"{doc_id} (by doc_id)"] if doc_id in by_doc else [])
    if held:
        return Outcome(doc_id, "held", held[0], str(first.run.path),
                       f"incomplete here ({first.reason}); the library already holds it")
    action = "unreadable" if all(d.failed_to_open for d in docs) else "incomplete"
    reasons = "; ".join(f"{d.run.path}: {d.reason}" for d in docs)
    return Outcome(doc_id, action, None, str(first.run.path), reasons)


def _recover(library: Path, cat: Catalog) -> list[str]:
    """Tidy what a publisher killed mid-way left behind (we hold the lock: nobody else is at work).
    A folder swapped into docs/ whose catalog transaction never committed is swapped back for
    the version the catalog holds (`_restore_committed`); then staged folders are dropped, and a
    folder under docs/ that the catalog does not list (killed between the rename and the commit
    of a first publication) is removed, so it is published again in full."""
    repaired: list[str] = []
    staging = library / STAGING
    leftovers = sorted(staging.iterdir()) if staging.is_dir() else []
    for leftover in leftovers:
        note = _restore_committed(library, cat, leftover)
        if note:
            repaired.append(note)
    for leftover in leftovers:
        if not os.path.lexists(leftover):
            continue
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
        repaired.append(f"removed leftover staging/{leftover.name}")
    docs = library / DOCS
    if docs.is_dir():
        known = {r[0] for r in cat.db.execute("SELECT lib_id FROM documents")}
        for entry in os.scandir(docs):
            if entry.name not in known and "--" in entry.name and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
                repaired.append(f"removed docs/{entry.name} (not in the catalog)")
    return repaired


_STAGED_NAME = re.compile(r"(?P<lib_id>.+--.+)\.\d+(?:\.old)?")  # staging/<lib_id>.<pid>[.old]


def folder_digest(folder: Path) -> str | None:
    """The content digest (`content_digest`) of a published folder, from its files; None when
    it is missing or unreadable."""
    try:
        layer = json.loads((folder / META_FILE).read_text(encoding="utf-8"))["layer"]
        data = (folder / DOC_PAGES).read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return hashlib.sha256(data + b"\0" + str(layer).encode()).hexdigest()


def _restore_committed(library: Path, cat: Catalog, leftover: Path) -> str | None:
    """A publisher killed after swapping a new version into docs/<lib_id> but before its catalog
    transaction committed leaves the folder holding a version the catalog, its search index and
    every later comparison know nothing of, and the version they do know in staging/. Swap that
    one back. Returns what was done, or None when the folder already agrees with the catalog."""
    m = _STAGED_NAME.fullmatch(leftover.name)
    if m is None or not leftover.is_dir() or leftover.is_symlink():
        return None
    row = cat.get(m["lib_id"])
    if row is None:
        return None
    folder = library / DOCS / m["lib_id"]
    if folder_digest(folder) == row["content_sha256"] or folder_digest(leftover) != row["content_sha256"]:
        return None
    displaced = _install(leftover, folder)  # where the uncommitted version went
    fsync_dir(library / DOCS)
    if displaced is not None:
        shutil.rmtree(displaced, ignore_errors=True)
    return f"restored docs/{m['lib_id']} to the version in the catalog (a publisher was killed before committing)"


def _publish_one(c: Candidate, library: Path, cat: Catalog, replace: bool) -> Outcome:
    doc = c.doc
    lib_id = c.lib_id
    run = str(doc.run.path)
    if c.sha256:
        others = [r for r in cat.by_sha256(c.sha256) if r["lib_id"] != lib_id]
        if others:
            return Outcome(doc.doc_id, "duplicate", others[0]["lib_id"], run,
                           f"the same file is published as {others[0]['lib_id']}")
    existing = cat.get(lib_id)
    folder = library / DOCS / lib_id
    digest = content_digest(doc.records, doc.layer)
    if existing is not None and folder.is_dir():
        if existing["content_sha256"] == digest:
            if c.metadata is not None and c.metadata != existing.get("metadata"):
                _update_metadata(cat, folder, lib_id, c.metadata)
                return Outcome(doc.doc_id, "unchanged", lib_id, run, "metadata updated")
            return Outcome(doc.doc_id, "unchanged", lib_id, run)
        if not replace and _row_rank(existing) >= _doc_rank(doc):
            return Outcome(doc.doc_id, "kept", lib_id, run,
                           f"the library holds an equal or better version (from {existing['run']}); --replace to override")
    text_sha = None
    if c.source_path is not None:
        from .dedup import text_digest

        text_sha = text_digest(c.source_path)[0]
    if c.metadata is None and existing is not None:
        c.metadata = existing.get("metadata")
    built = build(c, text_sha)
    staging = library / STAGING
    staging.mkdir(exist_ok=True)
    (library / DOCS).mkdir(exist_ok=True)
    staged = staging / f"{lib_id}.{os.getpid()}"
    if staged.exists():
        shutil.rmtree(staged)
    _write_folder(staged, built.files)
    cat.begin()
    try:
        cat.put_document(built.row, built.page_rows, built.texts, built.identifiers)
        old = _install(staged, folder)
        fsync_dir(library / DOCS)
        kill_point("publish-installed")  # the window `_restore_committed` repairs
        cat.commit()
    except BaseException:
        cat.rollback()
        shutil.rmtree(staged, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    if existing is not None:
        return Outcome(doc.doc_id, "updated", lib_id, run, f"replaced the version from {existing['run']}")
    return Outcome(doc.doc_id, "published", lib_id, run)


def _update_metadata(cat: Catalog, folder: Path, lib_id: str, metadata: dict[str, Any]) -> None:
    cat.begin()
    try:
        cat.set_metadata(lib_id, metadata)
        meta_path = folder / META_FILE
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        meta["metadata"] = metadata
        write_text_atomic(meta_path, json.dumps(meta, ensure_ascii=False, indent=2, sort_keys=True) + "\n")
        cat.commit()
    except BaseException:
        cat.rollback()
        raise
