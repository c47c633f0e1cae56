"""The library catalog: one SQLite file (WAL) beside the published document folders.

```
LIB/
  catalog.sqlite        documents, pages, identifiers, runs; pages_fts (FTS5) over page text
  .lock                 held (fcntl.flock) by the one publisher at work; readers never take it
  staging/              documents being assembled (renamed into docs/ when complete)
  docs/<lib_id>/        document.txt, document.md, pages.jsonl, meta.json
  cache/crossref/       answers of the optional Crossref lookup
```

`lib_id` = ``<doc_id>--<first 12 hex of the source file's sha256>``: named from the document, and
two different files that happen to share a doc_id never collide. `publish` is the only writer
(DESIGN.md); `search`, `export` and `run --library` only read, concurrently with a publisher
(WAL readers see the last committed state)."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..exceptions import ExitCode, UsageError, VlmocrError
from ..files import DirLock
from ..runfolder.record import JsonObject

CATALOG = "catalog.sqlite"
LOCK = ".lock"
DOCS = "docs"
DOC_PAGES = "pages.jsonl"  # a library document's page records (a run folder's are RunDir.pages)
STAGING = "staging"
CACHE = "cache"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    lib_id          TEXT PRIMARY KEY,          -- folder name under docs/
    doc_id          TEXT NOT NULL,
    sha256          TEXT,                      -- of the source file (NULL: source not found)
    text_sha256     TEXT,                      -- digest of the normalised PDF text layer (dedup)
    content_sha256  TEXT NOT NULL,             -- of the published pages.jsonl (what changed?)
    original_name   TEXT,
    source          TEXT,                      -- as the records name it
    source_path     TEXT,                      -- where publish found the file
    source_bytes    INTEGER,
    pages           INTEGER NOT NULL,          -- pages published (the selected pages)
    doc_pages       INTEGER,                   -- pages in the source document
    ok_pages        INTEGER NOT NULL,
    fallback_pages  INTEGER NOT NULL,
    review_pages    INTEGER NOT NULL,
    failed_pages    INTEGER NOT NULL,
    statuses        TEXT NOT NULL,             -- JSON {"ok": 3, …}
    chars           INTEGER NOT NULL,
    layer           TEXT NOT NULL,             -- raw | clean
    clean_rules     TEXT,                      -- rule-set hash of a cleaned layer
    run             TEXT NOT NULL,             -- the run directory it was published from
    settings_key    TEXT,
    engines         TEXT NOT NULL,             -- JSON list
    model           TEXT,
    revision        TEXT,
    prompt_id       TEXT,
    provenance      TEXT NOT NULL,             -- JSON: settings, key material, versions, git commit
    metadata        TEXT,                      -- JSON from the Crossref lookup, when asked for
    path            TEXT NOT NULL,             -- docs/<lib_id>, relative to the library
    finished_at     TEXT,                      -- newest record of the document
    published_at    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_doc_id ON documents(doc_id);
CREATE INDEX IF NOT EXISTS documents_sha256 ON documents(sha256);
CREATE INDEX IF NOT EXISTS documents_text_sha256 ON documents(text_sha256);
CREATE TABLE IF NOT EXISTS pages (
    lib_id   TEXT NOT NULL REFERENCES documents(lib_id) ON DELETE CASCADE,
    page     INTEGER NOT NULL,
    status   TEXT NOT NULL,
    engine   TEXT,
    chars    INTEGER NOT NULL,
    start    INTEGER NOT NULL,                 -- character span in document.txt
    "end"    INTEGER NOT NULL,
    PRIMARY KEY (lib_id, page)
);
CREATE TABLE IF NOT EXISTS identifiers (
    lib_id   TEXT NOT NULL REFERENCES documents(lib_id) ON DELETE CASCADE,
    type     TEXT NOT NULL,                    -- doi | arxiv | isbn
    value    TEXT NOT NULL,
    page     INTEGER NOT NULL,
    snippet  TEXT NOT NULL,
    PRIMARY KEY (lib_id, type, value)
);
CREATE INDEX IF NOT EXISTS identifiers_value ON identifiers(type, value);
CREATE VIRTUAL TABLE IF NOT EXISTS pages_fts USING fts5(
    text, lib_id UNINDEXED, page UNINDEXED, tokenize = 'unicode61 remove_diacritics 2'
);
"""

DOC_COLUMNS = (
    "lib_id", "doc_id", "sha256", "text_sha256", "content_sha256", "original_name", "source", "source_path",
    "source_bytes", "pages", "doc_pages", "ok_pages", "fallback_pages", "review_pages", "failed_pages", "statuses",
    "chars", "layer", "clean_rules", "run", "settings_key", "engines", "model", "revision", "prompt_id",
    "provenance", "metadata", "path", "finished_at", "published_at",
)
JSON_COLUMNS = ("statuses", "engines", "provenance", "metadata")


# FTS5 work grows with the terms OR'd together, and a short prefix (a*) stands for a large share
# of the vocabulary: over 4 000 pages of random words, 10 one-letter prefixes OR'd took 0.6 s,
# 100 took 11 s and 300 a minute (and 3 000, minutes on end). A query is bounded before SQLite
# sees it.
MAX_QUERY_CHARS = 1000
MAX_QUERY_TERMS = 64
MAX_PREFIX_TERMS = 8
MAX_SEARCH_LIMIT = 10_000
_TERM = re.compile(r"\w+\*?")
_OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})


def query_words(query: str) -> list[str]:
    """The words of an FTS5 query, without its operators; `word*` keeps its star (a prefix)."""
    return [t for t in _TERM.findall(query) if t not in _OPERATORS]


def check_query(query: str, limit: int = 20) -> None:
    """Refuse (exit 3, one line) a search that would keep SQLite busy for minutes."""
    if not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise UsageError(f"--limit {limit}: choose 1…{MAX_SEARCH_LIMIT}")
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"search query of {len(query)} characters: at most {MAX_QUERY_CHARS}")
    terms = query_words(query)
    if len(terms) > MAX_QUERY_TERMS:
        raise UsageError(f"search query of {len(terms)} terms: at most {MAX_QUERY_TERMS}")
    prefixes = sum(1 for t in terms if t.endswith("*"))
    if prefixes > MAX_PREFIX_TERMS:
        raise UsageError(f"search query with {prefixes} prefix terms (word*): at most {MAX_PREFIX_TERMS}")


class LibraryLocked(VlmocrError):
    exit_code = ExitCode.locked


def is_library(path: Path) -> bool:
    return (Path(path) / CATALOG).is_file()


class LibraryLock(DirLock):
    """One publisher at a time (LIB/.lock); a second one waits, or fails with exit 6 when it
    may not wait."""

    error = LibraryLocked
    kind = "library"
    busy = "library {dir} is being published by {holder}"

    def acquire(self, wait: bool = True, on_wait: Callable[[str], None] | None = None,
                timeout: float | None = None) -> None:
        super().acquire(wait=wait, on_wait=on_wait, timeout=timeout)


@dataclass
class SearchHit:
    lib_id: str
    doc_id: str
    page: int
    snippet: str
    score: float
    status: str | None
    path: str
    # Where on the page the hit lies (library/regions.py): {box, width, height, words}; None when
    # the page has no word positions or was not looked at.
    region: JsonObject | None = None

    def as_dict(self) -> JsonObject:
        return {"doc_id": self.doc_id, "lib_id": self.lib_id, "page": self.page, "snippet": self.snippet,
                "score": round(self.score, 4), "status": self.status, "path": self.path, "region": self.region}


class Catalog:
    """The SQLite catalog. Open read-only for readers (never creates anything)."""

    def __init__(self, lib: Path, readonly: bool = False) -> None:
        self.lib = Path(lib)
        self.path = self.lib / CATALOG
        self.readonly = readonly
        if readonly:
            if not self.path.is_file():
                raise UsageError(f"{self.lib} is not a library (no {CATALOG}; create it with `vlmocr publish`)")
            # mode=ro still reads the WAL; never creates a file beside the catalog.
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30, isolation_level=None)
        else:
            self.lib.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self._migrate()
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.execute("PRAGMA busy_timeout=30000")

    def _migrate(self) -> None:
        have = self.db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if have:
            row = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row and int(row[0]) > SCHEMA_VERSION:
                raise UsageError(f"{self.path}: catalog schema {row[0]} is newer than this vlmocr ({SCHEMA_VERSION})")
            if row and int(row[0]) == SCHEMA_VERSION:
                return  # nothing to write: an unchanged library stays byte-identical
        # One script, one transaction: a catalog is created whole or not at all.
        self.db.executescript(
            "BEGIN IMMEDIATE;" + _SCHEMA
            + f"INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', '{SCHEMA_VERSION}');COMMIT;")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    @staticmethod
    def _row(row: sqlite3.Row | None) -> dict[str, Any] | None:
        if row is None:
            return None
        out = dict(row)
        for col in JSON_COLUMNS:
            if out.get(col) is not None:
                out[col] = json.loads(out[col])
        return out

    def get(self, lib_id: str) -> dict[str, Any] | None:
        return self._row(self.db.execute("SELECT * FROM documents WHERE lib_id=?", (lib_id,)).fetchone())

    def by_sha256(self, sha: str) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM documents WHERE sha256=? ORDER BY lib_id", (sha,)).fetchall()
        return [self._row(r) for r in rows]  # type: ignore[misc]

    def documents(self) -> Iterator[dict[str, Any]]:
        for row in self.db.execute("SELECT * FROM documents ORDER BY doc_id, lib_id"):
            yield self._row(row)  # type: ignore[misc]

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM documents").fetchone()[0])

    def identifiers(self, lib_id: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT type, value, page, snippet FROM identifiers WHERE lib_id=? ORDER BY page, rowid", (lib_id,))
        return [dict(r) for r in rows]

    def index(self) -> tuple[dict[str, set[str | None]], dict[str, str], dict[str, str]]:
        """(doc_id → sha256s held, sha256 → lib_id, text digest → lib_id) for dedup and skipping."""
        by_doc: dict[str, set[str | None]] = {}
        by_sha: dict[str, str] = {}
        by_text: dict[str, str] = {}
        for lib_id, doc_id, sha, text in self.db.execute(
                "SELECT lib_id, doc_id, sha256, text_sha256 FROM documents ORDER BY lib_id"):
            by_doc.setdefault(doc_id, set()).add(sha)
            if sha:
                by_sha.setdefault(sha, lib_id)
            if text:
                by_text.setdefault(text, lib_id)
        return by_doc, by_sha, by_text

    def search(self, query: str, limit: int = 20) -> list[SearchHit]:
        check_query(query, limit)
        sql = (
            "SELECT f.lib_id, f.page, snippet(pages_fts, 0, '[', ']', '…', 16) AS snip, bm25(pages_fts) AS score, "
            "d.doc_id, d.path, p.status FROM pages_fts f JOIN documents d ON d.lib_id = f.lib_id "
            "LEFT JOIN pages p ON p.lib_id = f.lib_id AND p.page = f.page "
            "WHERE pages_fts MATCH ? ORDER BY score, d.doc_id, f.page LIMIT ?"
        )
        try:
            rows = self.db.execute(sql, (query, limit)).fetchall()
        except sqlite3.OperationalError:
            # Not valid FTS5 syntax (a stray quote, a hyphenated word): search its words, all of them.
            words = re.findall(r"\w+", query)
            if not words:
                return []
            rows = self.db.execute(sql, (" ".join(f'"{w}"' for w in words), limit)).fetchall()
        return [SearchHit(lib_id=r["lib_id"], doc_id=r["doc_id"], page=int(r["page"]), snippet=r["snip"],
                          score=-float(r["score"]), status=r["status"], path=r["path"]) for r in rows]

    # ------------------------------------------------------------------ writing (publish only)

    def put_document(self, row: dict[str, Any], pages: list[dict[str, Any]], texts: list[tuple[int, str]],
                     identifiers: list[dict[str, Any]]) -> None:
        """Insert or replace one document with its pages, identifiers and search text. The caller
        holds the transaction (BEGIN IMMEDIATE … COMMIT) that makes it atomic."""
        lib_id = row["lib_id"]
        self.delete_document(lib_id)
        values = [json.dumps(row[c], ensure_ascii=False, sort_keys=True) if c in JSON_COLUMNS and row.get(c) is not None
                  else row.get(c) for c in DOC_COLUMNS]
        cols = ", ".join(DOC_COLUMNS)
        self.db.execute(f"INSERT INTO documents ({cols}) VALUES ({', '.join('?' * len(DOC_COLUMNS))})", values)
        self.db.executemany(
            'INSERT INTO pages (lib_id, page, status, engine, chars, start, "end") VALUES (?, ?, ?, ?, ?, ?, ?)',
            [(lib_id, p["page"], p["status"], p.get("engine"), p["chars"], p["start"], p["end"]) for p in pages])
        self.db.executemany(
            "INSERT OR IGNORE INTO identifiers (lib_id, type, value, page, snippet) VALUES (?, ?, ?, ?, ?)",
            [(lib_id, i["type"], i["value"], i["page"], i["snippet"]) for i in identifiers])
        self.db.executemany("INSERT INTO pages_fts (text, lib_id, page) VALUES (?, ?, ?)",
                            [(text, lib_id, page) for page, text in texts])

    def delete_document(self, lib_id: str) -> None:
        self.db.execute("DELETE FROM pages_fts WHERE lib_id=?", (lib_id,))
        self.db.execute("DELETE FROM identifiers WHERE lib_id=?", (lib_id,))
        self.db.execute("DELETE FROM pages WHERE lib_id=?", (lib_id,))
        self.db.execute("DELETE FROM documents WHERE lib_id=?", (lib_id,))

    def set_metadata(self, lib_id: str, metadata: dict[str, Any] | None) -> None:
        self.db.execute("UPDATE documents SET metadata=? WHERE lib_id=?",
                        (None if metadata is None else json.dumps(metadata, ensure_ascii=False, sort_keys=True), lib_id))

    def begin(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.db.execute("COMMIT")

    def rollback(self) -> None:
        self.db.execute("ROLLBACK")

    def check(self) -> list[str]:
        """Problems found by SQLite's integrity check and the FTS5 index check ([] when none)."""
        problems = [r[0] for r in self.db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        if not self.readonly:
            try:
                self.db.execute("INSERT INTO pages_fts(pages_fts) VALUES ('integrity-check')")
            except sqlite3.DatabaseError as exc:
                problems.append(f"pages_fts: {exc}")
        return problems
