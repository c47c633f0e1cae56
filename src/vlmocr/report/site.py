"""The report's output folder: its data files and assets. The whole folder is readable from a
file:// URL with no network. Its layout::

    report/
      index.html            summary, charts (inline SVG), review queues, the document table
      review.html           one flagged page at a time: image, raw/cleaned text, diff, facts
      doc.html              the pages of one document, 50 at a time
      assets/report.js|css  the only code and style (no CDN)
      data/meta.js          queue sizes, chunk starts, options
      data/docs.js          one compact row per document (the document table)
      data/c/<n>.js         the final pages, ~100 per chunk, in document order (texts, diff, facts)
      data/q/<queue>/<n>.js the review queues: references into the chunks, 500 per file
      thumbs/<hash>.jpg     thumbnails of flagged pages only (capped by --max-thumbs)

Data files are scripts that call ``vlmocrData(name, value)``, loaded on demand with a
``<script>`` element, because a browser refuses ``fetch`` on file:// URLs. So the index of a
100 000-page run stays a few kilobytes plus the document table, and a review page loads one
chunk at a time. Everything that comes from OCR output is escaped: ``html.escape`` in the
HTML pages (html_pages.py), ``textContent`` in report.js (which never assigns ``innerHTML``), and
``<``, ``>``, ``&`` are written as ``\\u003c``… in the data files.
"""

from __future__ import annotations

import bisect
import os
import shutil
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from ..exceptions import UsageError
from ..files import OUTPUT_MARKER, check_output_dir, write_text_atomic
from ..runfolder.rundir import RunDir
from .diff import diff_ops
from .gather import Doc, Page, ReportOptions, RunData, languages_read, micro_cer, micro_cer_clean, status_group

PAGE_CHUNK = 100  # pages per data chunk …
CHUNK_BYTES = 1_500_000  # … or fewer when their texts are long
QUEUE_CHUNK = 500  # references per queue file
DATA_DIR, ASSET_DIR = "data", "assets"
REPORT = "report"  # what the marker of a folder `report` made says (store.OUTPUT_MARKER)
_DOC_COLS = ["i", "doc", "source", "lang", "pages", "ok", "fallback", "review", "failed", "flagged", "retried",
             "seconds", "cer", "cer_clean", "first", "start"]



def prepare_out(out: Path) -> None:
    """The report overwrites its files and replaces data/ and thumbnails in `out`: only a new or
    empty folder, or one a report made, may be given."""
    if RunDir(out).pages.exists():
        raise UsageError(f"--out {out} is a run directory; write the report elsewhere (e.g. {out / 'report'})")
    check_output_dir(out, REPORT, legacy=_report_before_markers)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / OUTPUT_MARKER).exists():
        (out / OUTPUT_MARKER).write_text(f"{REPORT}\n", encoding="utf-8")


def _report_before_markers(folder: Path) -> bool:
    """A report written before reports marked their folders: its index and its data's meta."""
    try:
        meta = (folder / DATA_DIR / "meta.js").read_bytes()
    except OSError:
        return False
    return meta.startswith(b'vlmocrData("meta",') and (folder / "index.html").is_file()


def write_data(out: Path, run: RunData, queues: dict[str, list[Page]], opts: ReportOptions,
               title: str) -> dict[str, Any]:
    """Writes data/ (page chunks, queue files, the document table, meta) and returns the meta.
    The data goes into a fresh folder that is then swapped in: an open report never mixes two builds."""
    tmp = out / f".{DATA_DIR}.{os.getpid()}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "c").mkdir(parents=True)
    chunk_starts = _write_chunks(tmp, run)
    queue_sizes = _write_queues(tmp, queues, chunk_starts)
    (tmp / "docs.js").write_bytes(_js("docs", {"cols": _DOC_COLS, "rows": [_doc_row(doc) for doc in run.docs]}))
    meta = {
        "title": title, "pages": len(run.pages), "docs": len(run.docs), "queues": queue_sizes,
        "queue_chunk": QUEUE_CHUNK, "chunk_starts": chunk_starts, "has_truth": opts.truth is not None,
        "has_clean": run.clean_present, "clean_state": run.clean_state, "cer_threshold": opts.cer_threshold,
        "generated_at": datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    (tmp / "meta.js").write_bytes(_js("meta", meta))

    data = out / DATA_DIR
    old = out / f".{DATA_DIR}.{os.getpid()}.old"
    if data.exists():
        os.replace(data, old)
    os.replace(tmp, data)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
    return meta


def write_assets(out: Path) -> None:
    """assets/report.js and report.css: the only code and style the pages load."""
    assets = out / ASSET_DIR
    assets.mkdir(exist_ok=True)
    for name in ("report.js", "report.css"):
        text = resources.files("vlmocr.report").joinpath("static", name).read_text(encoding="utf-8")
        write_text_atomic(assets / name, text)


def _js(name: str, value: Any) -> bytes:
    """A data file: a call of vlmocrData. `<`, `>`, `&` never appear raw, so nothing in the data
    can close a script element or start markup, wherever the bytes end up."""
    body = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    body = body.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    return b"vlmocrData(" + orjson.dumps(name) + b"," + body + b");\n"


def _write_chunks(tmp: Path, run: RunData) -> list[int]:
    """data/c/<n>.js: the pages in document order, PAGE_CHUNK to a file or fewer when their texts
    are long, each with the heads of the documents it holds. Returns the first page of each."""
    chunk_starts: list[int] = []
    cur: list[dict[str, Any]] = []
    cur_docs: dict[int, dict[str, Any]] = {}
    cur_bytes = 0

    def flush() -> None:
        nonlocal cur, cur_docs, cur_bytes
        if not cur:
            return
        n = len(chunk_starts)
        chunk_starts.append(cur[0]["g"])
        (tmp / "c" / f"{n}.js").write_bytes(_js(f"c/{n}", {"start": cur[0]["g"], "docs": cur_docs, "pages": cur}))
        cur, cur_docs, cur_bytes = [], {}, 0

    for doc in run.docs:
        full = run.pages_read(doc)  # this document's, read now: one document's text at a time
        cleans = run.clean_texts(doc)
        for p in doc.pages:
            read = full.get(p.page)
            obj = _page_obj(p, doc, read.text if read else "", cleans.get(p.page) if p.has_clean else None,
                            read.positions if read else None)
            size = (len(obj["text"]) + len(obj.get("clean") or "") + 2 * len(obj.get("truth") or "") + 400
                    + 20 * len(obj.get("boxes") or ()))
            if cur and (len(cur) >= PAGE_CHUNK or cur_bytes + size > CHUNK_BYTES):
                flush()
            cur.append(obj)
            cur_docs.setdefault(doc.i, {"id": doc.doc_id, "source": doc.source, "start": doc.pages[0].g,
                                        "n": len(doc.pages)})
            cur_bytes += size
    flush()
    return chunk_starts


def _write_queues(tmp: Path, queues: dict[str, list[Page]], chunk_starts: list[int]) -> dict[str, int]:
    """data/q/<queue>/<n>.js: references into the chunks, QUEUE_CHUNK to a file. Returns the sizes."""
    sizes: dict[str, int] = {}
    for name, qpages in queues.items():
        sizes[name] = len(qpages)
        if not qpages:
            continue
        (tmp / "q" / name).mkdir(parents=True)
        for n, i in enumerate(range(0, len(qpages), QUEUE_CHUNK)):
            refs = [[p.g, bisect.bisect_right(chunk_starts, p.g) - 1, p.d, p.page, p.status, p.ordinal]
                    for p in qpages[i:i + QUEUE_CHUNK]]
            (tmp / "q" / name / f"{n}.js").write_bytes(_js(f"q/{name}/{n}", refs))
    return sizes


def _doc_row(doc: Doc) -> list[Any]:
    """One row of the document table, in the order of _DOC_COLS."""
    groups = Counter(status_group(p.status) for p in doc.pages)
    flagged = [p for p in doc.pages if p.reasons]
    return [doc.i, doc.doc_id, doc.source, languages_read(doc.pages), len(doc.pages), groups["ok"], groups["fallback"],
            groups["review"], groups["failed"], len(flagged),
            sum(1 for p in doc.pages if p.rec.attempt > 1),
            round(sum(p.rec.seconds for p in doc.pages), 3), micro_cer(doc.pages),
            micro_cer_clean(doc.pages), flagged[0].ordinal if flagged else None, doc.pages[0].g]


def _word_boxes(positions: Mapping[str, Any] | None) -> list[list[int]]:
    """[[x0, y0, x1, y1] in thousandths of the page] of each word of a record's stored positions
    (read as stored: no model is built for each of a large run's pages)."""
    if not positions:
        return []
    width, height = positions.get("width") or 0, positions.get("height") or 0
    if not width or not height:
        return []
    out = []
    for line in positions.get("lines") or ():
        for w in line.get("words") or ():
            out.append([round(w[0] * 1000 / width), round(w[1] * 1000 / height),
                        round(w[2] * 1000 / width), round(w[3] * 1000 / height)])
    return out


def _page_obj(p: Page, doc: Doc, text: str, clean: str | None = None,
              positions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    r = p.rec
    obj: dict[str, Any] = {
        "g": p.g, "d": p.d, "page": p.page, "status": p.status, "text": text,
        "engine": r.engine, "model": r.model, "finish_reason": r.finish_reason,
        "attempt": r.attempt, "tries": p.tries, "flags": list(r.flags), "error": r.error,
        "seconds": r.seconds, "width": r.width, "height": r.height, "dpi": r.dpi,
        "tokens_in": r.tokens_in, "tokens_out": r.tokens_out, "finished_at": r.finished_at,
        "reasons": p.reasons, "ord": p.ordinal, "quality": r.quality.as_dict() if r.quality else None,
        "language": r.language, "language_from": r.language_from,
    }
    if r.source and r.source != doc.source:
        obj["source"] = r.source
    if clean is not None:
        obj["clean"] = clean
    if p.truth is not None:
        obj["truth"] = p.truth
        obj["cer"] = p.cer
        obj["edits"] = p.edits
        obj["ref_chars"] = p.ref_chars
        obj["diff"] = diff_ops(text, p.truth)
        if p.cer_clean is not None:
            obj["cer_clean"] = p.cer_clean
    boxes = _word_boxes(positions)
    if boxes:
        # The words' boxes in thousandths of the page (the thumbnail is the page scaled): the review
        # page draws them over the scan, so a reviewer sees whether the positions are right.
        obj["boxes"] = boxes
        obj["boxes_from"] = (positions or {}).get("source")
    if p.thumb:
        obj["thumb"] = p.thumb
    if p.thumb_note:
        obj["thumb_note"] = p.thumb_note
    return obj
