"""The library: finished documents published out of runs, deduplicated, identified, searchable
and exportable (DESIGN.md).

- `dedup.dedup`        inputs → what is new (bytes and text duplicates, within and against a library)
- `publish.publish`    complete documents of runs → LIB (atomic per document, idempotent, locked)
- `identify`           DOI / arXiv / ISBN with evidence; the optional, cached Crossref lookup
- `catalog.Catalog`    the SQLite (WAL) catalog, FTS5 search
- `export.export`      RUN|LIB → md, txt, jsonl, parquet, hf
- `library_holds`, `skip_held`: what `vlmocr run --library LIB` needs to skip published work
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, TypeVar

from .catalog import CATALOG, Catalog, LibraryLock, is_library
from .runs import safe_sha256

__all__ = ["CATALOG", "Catalog", "LibraryLock", "is_library", "library_holds", "skip_held"]

D = TypeVar("D")


def library_holds(lib: Path) -> Callable[[str, str | None], bool]:
    """A predicate `holds(doc_id, sha256)` over a snapshot of the library taken now (read-only;
    never waits for a publisher). With the source file's sha256 it answers "does the library
    hold these bytes?" (whatever their doc_id); with None, "does it hold a document of that id?".
    A library that does not exist holds nothing."""
    if not is_library(lib):
        def nothing(doc_id: str, sha256: str | None = None) -> bool:
            return False

        return nothing
    with Catalog(lib, readonly=True) as cat:
        by_doc, by_sha, _by_text = cat.index()
    doc_ids = frozenset(by_doc)
    shas = frozenset(by_sha)

    def holds(doc_id: str, sha256: str | None = None) -> bool:
        if sha256:
            return sha256 in shas
        return doc_id in doc_ids

    return holds


def skip_held(lib: Path | None, docs: Iterable[D]) -> tuple[list[D], list[D]]:
    """(documents to read, documents the library already holds) for `vlmocr run --library`.

    Only a document whose doc_id the library holds is hashed, and it is skipped only when the
    library holds the same bytes (a file replaced under the same name is read again). Files it
    cannot read are kept: the run gives them their `bad_input` record. Works on anything with
    `doc_id` and `path` attributes (`sources.Document`)."""
    docs = list(docs)
    if lib is None or not is_library(lib):
        return docs, []
    holds = library_holds(lib)
    keep: list[D] = []
    held: list[D] = []
    for d in docs:
        doc_id: str = d.doc_id  # type: ignore[attr-defined]
        if holds(doc_id, None) and holds(doc_id, safe_sha256(Path(d.path)) or "\0"):  # type: ignore[attr-defined]
            held.append(d)
        else:
            keep.append(d)
    return keep, held
