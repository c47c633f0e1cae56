"""A run's records read back as written (RUN/pages.jsonl), without each line's check."""

from __future__ import annotations

import json
from pathlib import Path


def read_records(run_dir: Path) -> list[dict]:
    """The records of RUN/pages.jsonl as written, without each line's check."""
    from vlmocr.runfolder.store import CHECK_KEY

    lines = (run_dir / "pages.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    for rec in records:
        rec.pop(CHECK_KEY, None)
    return records


def finals(run_dir: Path) -> dict[tuple[str, int], dict]:
    out = {}
    for rec in read_records(run_dir):
        out[(rec["doc_id"], rec["page"])] = rec
    return out


def finals_by_doc(run: Path) -> dict[str, list[dict]]:
    """The final records of the pages (page > 0), per document in page order."""
    out: dict[str, list[dict]] = {}
    for (doc, page), rec in sorted(finals(run).items()):
        if page > 0:
            out.setdefault(doc, []).append(rec)
    return out
