"""Run directories and truth CSVs written for tests, and a run made partial as a kill leaves it."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from vlmocr.runfolder.record import PageRecord
from vlmocr.runfolder.store import RecordWriter


def write_run(run: Path, pages: list[tuple[str, int, str, str]]) -> Path:
    """A run directory with one record per (doc_id, page, status, text), in that order."""
    with RecordWriter(run / "pages.jsonl") as w:
        for doc_id, page, status, text in pages:
            w.append(PageRecord(doc_id=doc_id, source=f"{doc_id}.pdf", page=page, key="k1", status=status,
                                text=text, engine="test"))
    return run


def write_truth_csv(path: Path, rows: list[tuple[str, int, str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["doc_id", "page", "set", "text"])
        for doc_id, page, set_name, text in rows:
            w.writerow([doc_id, page, set_name, text])
    return path


def drop_records(run: Path, doc_id: str, pages: set[int]) -> None:
    """Make a run partial: as if it had been killed before these pages were read."""
    path = run / "pages.jsonl"
    keep = [line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
            if not (json.loads(line)["doc_id"] == doc_id and json.loads(line)["page"] in pages)]
    path.write_text("".join(keep), encoding="utf-8")
    md = run / "docs" / f"{doc_id}.md"
    if md.exists():
        os.unlink(md)
