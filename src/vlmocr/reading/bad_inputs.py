"""RUN/bad_inputs.csv: the pages a run cannot read (their final record is `bad_input`), with why.

A resubmit cannot help them, so a run that owes nothing else exits 9 (`ExitCode.bad_inputs`),
which SLURM's job script and `slurm submit` count as done; this file is what a person reads to
fix the files before `vlmocr run --force-bad` reads them again. Columns: doc_id, page (0: the
whole document, which could not be opened), path (the input as given), reason. Rewritten whole
(atomically) at the end of every run; removed when no page is a bad input any more."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson

from ..files import write_text_atomic
from ..inputs.sources import Document, neutralise_cell
from ..runfolder.record import Status
from ..runfolder.rundir import RunDir
from ..runfolder.store import DocState, ResumeIndex, line_intact

BAD_INPUTS = "bad_inputs.csv"
COLUMNS = ("doc_id", "page", "path", "reason")


def _bad_pages(state: DocState | None) -> list[int]:
    if state is None:
        return []
    last = state.doc_pages if state.doc_pages is not None else 0
    pages = range(0, 1) if state.doc_pages is None else range(1, last + 1)
    return [p for p in pages if state.status(p) is Status.bad_input]


def _reasons(pages_path: Path, wanted: set[tuple[str, str, int]]) -> dict[tuple[str, int], str]:
    """The `error` of the last bad_input record of each wanted (key, doc_id, page): only lines
    naming bad_input are parsed (a shard's records are mostly text), each checked as written."""
    found: dict[tuple[str, int], str] = {}
    with pages_path.open("rb") as fh:
        for line in fh:
            if b'"bad_input"' not in line or not line_intact(line):
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if rec.get("status") != Status.bad_input.value:
                continue
            where = (str(rec.get("key")), str(rec.get("doc_id")), int(rec.get("page") or 0))
            if where in wanted:
                found[where[1:]] = str(rec.get("error") or "")
    return found


def write_bad_inputs(run_dir: Path, docs: list[Document], keys: dict[str, str], index: ResumeIndex) -> int:
    """Write RUN/bad_inputs.csv for `docs` (remove it when none is bad); the number of pages."""
    path = Path(run_dir) / BAD_INPUTS
    rows: list[tuple[Document, int]] = []
    for doc in docs:
        state = index.get(keys[doc.doc_id], doc.doc_id)
        pages = _bad_pages(state)
        if state is not None and state.doc_pages is not None and doc.pages:
            pages = [p for p in pages if p in doc.pages]
        rows += [(doc, p) for p in pages]
    if not rows:
        path.unlink(missing_ok=True)
        return 0
    reasons = _reasons(RunDir(run_dir).pages, {(keys[d.doc_id], d.doc_id, p) for d, p in rows})
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for doc, page in rows:
        writer.writerow([neutralise_cell(doc.doc_id), page, neutralise_cell(doc.source),
                         neutralise_cell(reasons.get((doc.doc_id, page), ""))])
    write_text_atomic(path, buf.getvalue())
    return len(rows)
