"""Assembled documents: derived from page records, rebuilt at any time (with their figures' descriptions
in place: figures/placement.rebuild_documents)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..files import write_text_atomic
from .record import Row
from .rundir import RunDir


def page_marker(rec: Row) -> str:
    """An HTML comment: invisible when the Markdown renders, easy to split on."""
    parts = [f"page {rec.page}", rec.status.value, rec.engine or "?"]
    if rec.error:
        parts.append(rec.error.splitlines()[0].replace("--", "- -")[:200])
    return "<!-- " + " | ".join(parts) + " -->"


def assemble_markdown(records: Iterable[Row]) -> str:
    chunks = []
    for rec in sorted(records, key=lambda r: r.page):
        text = rec.text.strip("\n")
        chunks.append(page_marker(rec) + ("\n\n" + text if text else ""))
    return "\n\n".join(chunks) + "\n"


def write_document(run_dir: Path, doc_id: str, records: Iterable[Row]) -> Path:
    path = RunDir(run_dir).doc(doc_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, assemble_markdown(records))
    return path
