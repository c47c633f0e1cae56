"""Run directories and truth CSVs written for the evaluation tests."""

from __future__ import annotations

import csv
from pathlib import Path

from vlmocr.record import PageRecord
from vlmocr.store import RecordWriter


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
