"""A publisher killed for real (SIGKILL, `VLMOCR_KILL_AT`) between swapping a document's folder
into the library and committing its catalog transaction: the next publish must put the folder
back in agreement with the catalog and its search index, and publishing again must work."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
from pathlib import Path

import orjson
import pytest

from support.cli import run_cli, textlayer_run
from support.documents import make_doc
from support.library import catalog_rows
from vlmocr.files import KILL_AT_ENV
from vlmocr.library import Catalog
from vlmocr.library.publish import publish
from vlmocr.runfolder.store import checked_line, iter_records


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("crash")
    src = root / "src"
    make_doc(src, "book.pdf", 2, 2)
    make_doc(src, "notes.pdf", 3, 1)
    first = root / "first"
    textlayer_run(first, src)
    # A second version of the same documents: book's first page says something new.
    second = root / "second"
    shutil.copytree(first, second)
    lines = []
    for rec in iter_records(second / "pages.jsonl"):
        if rec["doc_id"] == "book" and rec["page"] == 1:
            rec["text"] += "\nzeppelin"
        lines.append(checked_line(rec))
    (second / "pages.jsonl").write_bytes(b"".join(lines))
    return {"first": first, "second": second}


def folder_digest(folder: Path) -> str:
    layer = json.loads((folder / "meta.json").read_text(encoding="utf-8"))["layer"]
    return hashlib.sha256((folder / "pages.jsonl").read_bytes() + b"\0" + layer.encode()).hexdigest()


def disagreements(lib: Path) -> list[str]:
    """Where the catalog, its FTS index and the folders tell different stories."""
    out = []
    for lib_id, digest in catalog_rows(lib, "SELECT lib_id, content_sha256 FROM documents"):
        folder = lib / "docs" / lib_id
        if folder_digest(folder) != digest:
            out.append(f"{lib_id}: folder holds another version than the catalog")
        pages = [orjson.loads(x) for x in (folder / "pages.jsonl").read_bytes().splitlines()]
        fts = catalog_rows(lib, "SELECT page, text FROM pages_fts WHERE lib_id=? ORDER BY page", lib_id)
        if [(p["page"], p["text"]) for p in pages] != [(int(p), t) for p, t in fts]:
            out.append(f"{lib_id}: search index holds other text than the folder")
    return out


def search(lib: Path, query: str) -> set[str]:
    with Catalog(lib, readonly=True) as cat:
        return {h.doc_id for h in cat.search(query)}


def test_a_publisher_killed_before_its_commit_is_repaired_at_the_next_publish(runs, tmp_path):
    lib = tmp_path / "lib"
    publish([runs["first"]], lib)
    assert disagreements(lib) == []

    proc = run_cli("publish", str(runs["second"]), "--library", str(lib), "--replace",
                   env={KILL_AT_ENV: "publish-installed"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # The window was hit: the folder holds the new version, the catalog still the old one.
    book = next((lib / "docs").glob("book--*"))
    assert "zeppelin" in (book / "document.txt").read_text(encoding="utf-8")
    assert disagreements(lib) == [f"{book.name}: folder holds another version than the catalog",
                                  f"{book.name}: search index holds other text than the folder"]

    # The next publish (of the old runs: nothing to do but repair) restores agreement…
    again = publish([runs["first"]], lib)
    assert any(r.startswith(f"restored docs/{book.name}") for r in again.repaired), again.repaired
    assert {o.doc_id: o.action for o in again.outcomes} == {"book": "unchanged", "notes": "unchanged"}
    assert disagreements(lib) == []
    assert search(lib, "zeppelin") == set()
    assert list((lib / "staging").iterdir()) == []

    # … and the interrupted publication goes through in full when asked again.
    done = publish([runs["second"]], lib, replace=True)
    assert {o.doc_id: o.action for o in done.outcomes} == {"book": "updated", "notes": "unchanged"}
    assert disagreements(lib) == []
    assert search(lib, "zeppelin") == {"book"}

