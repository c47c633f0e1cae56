"""Assembled documents: derived from page records, rebuilt at any time."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..figures.placement import add_figures, figures_by_page
from .record import Row
from .rundir import RunDir
from .store import final_records, write_text_atomic


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


def rebuild_documents(run_dir: Path, wanted: dict[str, str] | None = None, docs: set[str] | None = None) -> int:
    """Re-assemble documents from pages.jsonl, figure descriptions (vlmocr describe) in place
    as alt text beside their figures. `wanted` maps doc_id → settings key; None assembles every
    document (or those in `docs`) with the key of its latest record."""
    finals = final_records(
        RunDir(run_dir).pages,
        keys=set(wanted.values()) if wanted else None,
        docs=set(wanted) if wanted else docs,
    )
    by_doc: dict[str, list[Row]] = {}
    for (doc_id, _page), rec in finals.items():
        if wanted and rec.key != wanted.get(doc_id):
            continue
        by_doc.setdefault(doc_id, []).append(rec)
    for doc_id, recs in by_doc.items():
        pages = [r for r in recs if r.page > 0]
        # A document-level failure (page 0) is shown only while no page of it was read.
        write_document(run_dir, doc_id, add_figures(run_dir, pages or recs))
    return len(by_doc)


def rebuild_with_figures(run_dir: str | Path) -> int:
    """Re-assemble every document with described figures (after `vlmocr describe`)."""
    run_dir = Path(run_dir)
    docs = {doc for doc, _ in figures_by_page(run_dir)}
    return rebuild_documents(run_dir, docs=docs) if docs else 0
