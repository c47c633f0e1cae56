"""Shared makers for the library tests: born-digital PDFs with real text layers, runs made by the
real `vlmocr run --engine textlayer` (fast), and a look at a library's files."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

from conftest import make_text_pdf, read_records, run_cli

WORDS = ("archive letter river council harvest railway winter printer harbour village market bridge "
         "teacher garden engine lantern orchard mill chapel ledger").split()


def body_lines(doc: int, page: int, n: int = 5) -> list[str]:
    """Lines long enough for a usable text layer, different per document and page."""
    out = []
    for i in range(n):
        words = [WORDS[(doc * 7 + page * 3 + i * 5 + k) % len(WORDS)] for k in range(8)]
        out.append(f"Doc{doc} page {page} line {i}: " + " ".join(words))
    return out


def make_doc(folder: Path, name: str, doc: int, pages: int, extra: dict[int, list[str]] | None = None) -> Path:
    content = []
    for p in range(1, pages + 1):
        lines = list((extra or {}).get(p, [])) + body_lines(doc, p)
        content.append(lines)
    folder.mkdir(parents=True, exist_ok=True)
    return make_text_pdf(folder / name, content)


def textlayer_run(out: Path, *inputs: Path | str, extra: tuple[str, ...] = ()) -> None:
    proc = run_cli("run", *[str(i) for i in inputs], "--out", str(out), "--engine", "textlayer", "--workers", "1",
                   *extra)
    assert proc.returncode in (0, 1), proc.stderr


def publish_cli(*args: str) -> tuple[int, dict]:
    proc = run_cli("publish", *args, "--json")
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """path → (sha256, mtime_ns) of every file under root."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def catalog_rows(lib: Path, sql: str, *params) -> list[tuple]:
    db = sqlite3.connect(f"file:{lib / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def finals_by_doc(run: Path) -> dict[str, list[dict]]:
    last: dict[tuple[str, int], dict] = {}
    for rec in read_records(run):
        last[(rec["doc_id"], rec["page"])] = rec
    out: dict[str, list[dict]] = {}
    for (doc, page), rec in sorted(last.items()):
        if page > 0:
            out.setdefault(doc, []).append(rec)
    return out


def drop_records(run: Path, doc_id: str, pages: set[int]) -> None:
    """Make a run partial: as if it had been killed before these pages were read."""
    path = run / "pages.jsonl"
    keep = [line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
            if not (json.loads(line)["doc_id"] == doc_id and json.loads(line)["page"] in pages)]
    path.write_text("".join(keep), encoding="utf-8")
    md = run / "docs" / f"{doc_id}.md"
    if md.exists():
        os.unlink(md)
