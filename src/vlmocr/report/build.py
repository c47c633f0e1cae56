"""`vlmocr report`: a static HTML report of a run, readable from a file:// URL with no network.

Layout of the output folder::

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
pages written here, ``textContent`` in report.js (which never assigns ``innerHTML``), and
``<``, ``>``, ``&`` are written as ``\\u003c``… in the data files.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import multiprocessing
import os
import re
import shutil
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
from rapidfuzz.distance import Levenshtein

from ..exceptions import UsageError
from ..evaluation import char_errors
from ..record import Status
from ..store import OUTPUT_MARKER, PAGES_FILE, check_output_dir, final_records, iter_records, write_text_atomic
from . import svg

# Every status but ok puts a page in the review queue; so does a CER above the threshold.
FLAGGED_STATUSES: tuple[str, ...] = ("loop", "truncated", "empty", "fallback", "refused", "error", "bad_input")
STATUS_ORDER: tuple[str, ...] = tuple(s.value for s in Status)
QUEUE_NAMES: tuple[str, ...] = ("all", *FLAGGED_STATUSES, "cer")
PAGE_CHUNK = 100  # pages per data chunk …
CHUNK_BYTES = 1_500_000  # … or fewer when their texts are long
QUEUE_CHUNK = 500  # references per queue file
PREVIEW_ROWS = 100  # flagged pages listed on the index page
DIFF_REFINE_CHARS = 400  # replaced word runs up to this size get a character-level diff
DATA_DIR, THUMB_DIR, ASSET_DIR = "data", "thumbs", "assets"
_KEEP_FIELDS = ("doc_id", "source", "page", "status", "text", "engine", "model", "finish_reason", "attempt", "flags",
                "error", "seconds", "width", "height", "dpi", "tokens_in", "tokens_out", "finished_at", "key")


@dataclass
class ReportOptions:
    run_dir: Path
    out: Path
    truth: Path | None = None
    thumb_size: int = 800
    max_thumbs: int = 2000
    cer_threshold: float = 0.10
    source_roots: list[Path] = field(default_factory=list)
    workers: int | None = None
    title: str | None = None


@dataclass
class ReportResult:
    out: Path
    pages: int
    documents: int
    records: int
    flagged: int
    thumbs: int
    thumbs_skipped: int
    statuses: dict[str, int]
    cer: float | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out / "index.html"

    def as_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "index": str(self.index), "pages": self.pages, "documents": self.documents,
                "records": self.records, "flagged": self.flagged, "thumbs": self.thumbs,
                "thumbs_skipped": self.thumbs_skipped, "statuses": self.statuses, "cer": self.cer,
                "seconds": round(self.seconds, 3), "notes": self.notes}


# ------------------------------------------------------------------------------ gathering


@dataclass
class Page:
    g: int  # position in document order over the whole run
    d: int  # document index
    rec: dict[str, Any]
    tries: int  # records of this page in pages.jsonl
    clean: str | None = None
    truth: str | None = None
    cer: float | None = None
    cer_clean: float | None = None
    edits: int = 0
    ref_chars: int = 0
    reasons: list[str] = field(default_factory=list)
    ordinal: int | None = None  # position in the "all" review queue
    thumb: str | None = None
    thumb_note: str | None = None

    @property
    def status(self) -> str:
        return str(self.rec.get("status"))

    @property
    def page(self) -> int:
        return int(self.rec["page"])


@dataclass
class Doc:
    i: int
    doc_id: str
    source: str
    pages: list[Page] = field(default_factory=list)


def _load_run_json(run_dir: Path, notes: list[str]) -> dict[str, Any]:
    path = run_dir / "run.json"
    if not path.is_file():
        notes.append("run.json not found: settings and throughput come from the records alone")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, json.JSONDecodeError) as exc:
        notes.append(f"run.json unreadable ({exc}): settings and throughput come from the records alone")
        return {}


def _load_records(pages_file: Path) -> tuple[dict[tuple[str, int], dict], Counter, int, list[float]]:
    """The last record of each page, the number of records per page, all records, and the
    finish times (epoch seconds) of every record for the throughput chart."""
    finals: dict[tuple[str, int], dict] = {}
    tries: Counter = Counter()
    total = 0
    times: list[float] = []
    for rec in iter_records(pages_file):
        try:
            key = (str(rec["doc_id"]), int(rec["page"]))
        except (KeyError, TypeError, ValueError):
            continue
        total += 1
        tries[key] += 1
        finals[key] = {k: rec.get(k) for k in _KEEP_FIELDS}
        stamp = rec.get("finished_at")
        if isinstance(stamp, str):
            try:
                times.append(datetime.fromisoformat(stamp).timestamp())
            except ValueError:
                pass
    return finals, tries, total, times


def _load_truth(path: Path) -> Callable[[Iterable[str]], tuple[dict[tuple[str, int], str], int]]:
    """Truth pages via `vlmocr.evaluation` (folder of name.txt + image, or a CSV), matched to the
    run's doc ids the way `vlmocr evaluate` matches them."""
    from ..evaluation import load_truth, match_truth

    truth = load_truth(path)

    def matched(doc_ids: Iterable[str]) -> tuple[dict[tuple[str, int], str], int]:
        doc_map = match_truth(truth, doc_ids)
        out = {(doc_map.get(t.doc_id, t.doc_id), t.page): t.text for t in truth}
        return out, len(truth)

    return matched


# ------------------------------------------------------------------------------ diff

_TOKEN = re.compile(r"\s+|[^\s]+")


def diff_ops(text: str, truth: str) -> list[list[str]]:
    """A word diff of the OCR text against the truth, refined to characters inside short
    replaced runs that resemble each other. Ops: ``["=", s]`` same, ``["-", s]`` in the truth only (missed),
    ``["+", s]`` in the text only (inserted). Whitespace differences are ignored as the CER
    ignores them: any whitespace run matches any other."""
    a = _TOKEN.findall(unicodedata.normalize("NFC", text))
    b = _TOKEN.findall(unicodedata.normalize("NFC", truth))
    ka = [" " if t[0].isspace() else t for t in a]
    kb = [" " if t[0].isspace() else t for t in b]
    ops: list[list[str]] = []

    def emit(op: str, s: str) -> None:
        if not s:
            return
        if ops and ops[-1][0] == op:
            ops[-1][1] += s
        else:
            ops.append([op, s])

    # Runs of changed words joined by single unchanged spaces are one change: a garbled line
    # is shown as the line it should have been and the line that was read.
    runs: list[list] = []  # [tag, text side, truth side]
    for tag, i1, i2, j1, j2 in Levenshtein.opcodes(ka, kb):
        sa, sb = "".join(a[i1:i2]), "".join(b[j1:j2])
        if tag != "equal" and runs and runs[-1][0] == "change":
            runs[-1][1] += sa
            runs[-1][2] += sb
        elif (tag == "equal" and i2 - i1 == 1 and ka[i1] == " " and runs and runs[-1][0] == "change"):
            runs.append(["space", sa, sb])
        elif tag != "equal" and len(runs) > 1 and runs[-1][0] == "space" and runs[-2][0] == "change":
            _, space_a, space_b = runs.pop()
            runs[-1][1] += space_a + sa
            runs[-1][2] += space_b + sb
        else:
            runs.append(["equal" if tag == "equal" else "change", sa, sb])
    for kind, sa, sb in runs:
        if kind != "change":
            emit("=", sa)
        elif not sb:  # in the text only
            emit("+", sa)
        elif not sa:  # in the truth only
            emit("-", sb)
        elif len(sa) + len(sb) <= DIFF_REFINE_CHARS and Levenshtein.normalized_similarity(sa, sb) >= 0.5:
            # Close enough to be a misreading: show which characters differ. Unrelated runs
            # read better as one deletion and one insertion.
            for ctag, c1, c2, d1, d2 in Levenshtein.opcodes(sa, sb):
                if ctag == "equal":
                    emit("=", sa[c1:c2])
                else:
                    emit("-", sb[d1:d2])
                    emit("+", sa[c1:c2])
        else:
            emit("-", sb)
            emit("+", sa)
    return ops


# ------------------------------------------------------------------------------ thumbnails


def _find_source(source: str, roots: list[Path], cache: dict[str, Path | None]) -> Path | None:
    if source in cache:
        return cache[source]
    p = Path(source)
    found: Path | None = None
    candidates = [p] if p.is_absolute() else [root / p for root in roots]
    for c in candidates:
        try:
            if c.is_file():
                found = c.resolve()
                break
        except OSError:
            continue
    cache[source] = found
    return found


def _thumb_name(path: Path, page: int, size: int) -> str:
    st = path.stat()
    ident = f"{path}|{st.st_mtime_ns}|{st.st_size}|{page}|{size}"
    return hashlib.sha1(ident.encode("utf-8")).hexdigest()[:20] + ".jpg"


def render_thumb(task: tuple[str, int, int, str]) -> tuple[str, bool, str, int, int]:
    """Render one page to a JPEG (in a worker process). Returns (dest, ok, note, w, h)."""
    src, page, size, dest = task
    from PIL import Image

    from ..exceptions import BadInput
    from ..render import Sizing, render_page

    d = Path(dest)
    if d.is_file():
        try:
            with Image.open(d) as im:
                return dest, True, "", im.width, im.height
        except OSError:
            pass
    try:
        img = render_page(Path(src), page, Sizing(dpi=None, longest_side=size)).image
    except BadInput as exc:
        return dest, False, f"cannot render the page: {exc.reason}", 0, 0
    except Exception as exc:  # a thumbnail must never stop the report
        return dest, False, f"cannot render the page: {type(exc).__name__}: {exc}", 0, 0
    if img.mode not in ("RGB", "L"):
        img = img.convert("RGB")
    tmp = d.with_name(f".{d.name}.{os.getpid()}.tmp")
    img.save(tmp, format="JPEG", quality=80, optimize=True)
    os.replace(tmp, d)
    return dest, True, "", img.width, img.height


def _render_thumbs(tasks: list[tuple[str, int, int, str]], workers: int) -> list[tuple[str, bool, str, int, int]]:
    if not tasks:
        return []
    if workers <= 1 or len(tasks) < 8:
        return [render_thumb(t) for t in tasks]
    # Sorted by source so each worker mostly reuses the PDF it has open; spawn, not fork,
    # because pdfium is not fork-safe.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(render_thumb, tasks, chunksize=max(1, min(16, len(tasks) // (workers * 4)))))


# ------------------------------------------------------------------------------ writing


def _js(name: str, value: Any) -> bytes:
    """A data file: a call of vlmocrData. `<`, `>`, `&` never appear raw, so nothing in the data
    can close a script element or start markup, wherever the bytes end up."""
    body = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    body = body.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    return b"vlmocrData(" + orjson.dumps(name) + b"," + body + b");\n"


def _write_bytes(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _pct(v: float | None, digits: int = 2) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 100:.{digits}f} %"


def _num(n: float | None) -> str:
    if n is None:
        return "—"
    if isinstance(n, float):
        return f"{n:,.1f}"
    return f"{n:,}"


def _page_obj(p: Page, doc: Doc) -> dict[str, Any]:
    r = p.rec
    obj: dict[str, Any] = {
        "g": p.g, "d": p.d, "page": p.page, "status": p.status, "text": r.get("text") or "",
        "engine": r.get("engine"), "model": r.get("model"), "finish_reason": r.get("finish_reason"),
        "attempt": r.get("attempt"), "tries": p.tries, "flags": r.get("flags") or [], "error": r.get("error"),
        "seconds": r.get("seconds"), "width": r.get("width"), "height": r.get("height"), "dpi": r.get("dpi"),
        "tokens_in": r.get("tokens_in"), "tokens_out": r.get("tokens_out"), "finished_at": r.get("finished_at"),
        "reasons": p.reasons, "ord": p.ordinal,
    }
    if r.get("source") and r.get("source") != doc.source:
        obj["source"] = r.get("source")
    if p.clean is not None:
        obj["clean"] = p.clean
    if p.truth is not None:
        obj["truth"] = p.truth
        obj["cer"] = p.cer
        obj["edits"] = p.edits
        obj["ref_chars"] = p.ref_chars
        obj["diff"] = diff_ops(r.get("text") or "", p.truth)
        if p.cer_clean is not None:
            obj["cer_clean"] = p.cer_clean
    if p.thumb:
        obj["thumb"] = p.thumb
    if p.thumb_note:
        obj["thumb_note"] = p.thumb_note
    return obj


def _asset(name: str) -> bytes:
    return resources.files("vlmocr.report").joinpath("static", name).read_bytes()


REPORT = "report"  # what the marker of a folder `report` made says (store.OUTPUT_MARKER)


def _report_before_markers(folder: Path) -> bool:
    """A report written before reports marked their folders: its index and its data's meta."""
    try:
        meta = (folder / DATA_DIR / "meta.js").read_bytes()
    except OSError:
        return False
    return meta.startswith(b'vlmocrData("meta",') and (folder / "index.html").is_file()


def _prepare_out(out: Path) -> None:
    """The report overwrites its files and replaces data/ and thumbnails in `out`: only a new or
    empty folder, or one a report made, may be given."""
    if (out / PAGES_FILE).exists():
        raise UsageError(f"--out {out} is a run directory; write the report elsewhere (e.g. {out / 'report'})")
    check_output_dir(out, REPORT, legacy=_report_before_markers)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / OUTPUT_MARKER).exists():
        (out / OUTPUT_MARKER).write_text(f"{REPORT}\n", encoding="utf-8")


# ------------------------------------------------------------------------------ the report


def build_report(opts: ReportOptions, log: Callable[[str], None] | None = None) -> ReportResult:
    t0 = time.monotonic()
    say = log or (lambda _msg: None)
    run_dir = Path(opts.run_dir)
    out = Path(opts.out)
    pages_file = run_dir / PAGES_FILE
    if not pages_file.is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    if opts.thumb_size < 16 or opts.thumb_size > 4000:
        raise UsageError(f"--thumb-size {opts.thumb_size}: choose 16…4000 px")
    if opts.max_thumbs < 0:
        raise UsageError("--max-thumbs must be 0 or more")
    if not 0 <= opts.cer_threshold:
        raise UsageError("--cer-threshold must be 0 or more")
    try:
        if out.resolve() == run_dir.resolve():
            raise UsageError("--out must not be the run directory itself")
    except OSError:
        pass
    _prepare_out(out)
    notes: list[str] = []
    run_info = _load_run_json(run_dir, notes)

    say("reading records")
    finals, tries, n_records, times = _load_records(pages_file)

    # A document-level failure (page 0) stands for its document only while no page was read.
    with_pages = {d for d, p in finals if p > 0}
    for key in [k for k in finals if k[1] == 0 and k[0] in with_pages]:
        del finals[key]

    doc_ids = sorted({d for d, _ in finals})
    docs: list[Doc] = []
    doc_index: dict[str, int] = {}
    for i, doc_id in enumerate(doc_ids):
        doc_index[doc_id] = i
        docs.append(Doc(i, doc_id, ""))
    for key in sorted(finals, key=lambda k: (doc_index[k[0]], k[1])):
        doc = docs[doc_index[key[0]]]
        rec = finals[key]
        if not doc.source:
            doc.source = str(rec.get("source") or "")
        doc.pages.append(Page(0, doc.i, rec, tries[key]))
    pages: list[Page] = [p for doc in docs for p in doc.pages]
    for g, p in enumerate(pages):
        p.g = g

    # The cleaned layer, shown beside the raw text when `vlmocr clean` has written it.
    clean_file = run_dir / "clean" / PAGES_FILE
    clean_state: str | None = None
    if clean_file.is_file():
        cleaned = final_records(clean_file)
        for p in pages:
            c = cleaned.get((p.rec["doc_id"], p.page))
            if c is not None:
                p.clean = c.get("text") or ""
        try:
            from ..clean import cleaned_layer_status

            clean_state = cleaned_layer_status(run_dir)
        except Exception:  # the cleaning module is optional here; the layer is shown regardless
            clean_state = "present"
        if clean_state == "missing":  # pages.jsonl is there, its rules.json is not
            clean_state = "present, without rules.json"
        if clean_state == "stale":
            notes.append("the cleaned layer is older than pages.jsonl: run `vlmocr clean` again to refresh it")

    # Ground truth: CER per page, and the diff.
    truth_pages = 0
    missing_truth: list[tuple[str, int]] = []
    if opts.truth is not None:
        say("scoring against the truth")
        matched, truth_pages = _load_truth(Path(opts.truth))(doc_ids)
        by_key = {(p.rec["doc_id"], p.page): p for p in pages}
        for key, ref in matched.items():
            p = by_key.get(key)
            if p is None:
                missing_truth.append(key)
                continue
            p.truth = ref
            p.edits, p.ref_chars = char_errors(p.rec.get("text") or "", ref)
            p.cer = p.edits / p.ref_chars if p.ref_chars else float(p.edits > 0)
            if p.clean is not None:
                e, n = char_errors(p.clean, ref)
                p.cer_clean = e / n if n else float(e > 0)

    # Review queues.
    queues: dict[str, list[Page]] = {q: [] for q in QUEUE_NAMES}
    for p in pages:
        if p.status in FLAGGED_STATUSES:
            p.reasons.append(p.status)
        if p.cer is not None and p.cer > opts.cer_threshold:
            p.reasons.append("cer")
        if p.reasons:
            p.ordinal = len(queues["all"])
            queues["all"].append(p)
            for reason in p.reasons:
                queues[reason].append(p)

    # Thumbnails of flagged pages, capped.
    thumb_dir = out / THUMB_DIR
    thumb_dir.mkdir(exist_ok=True)
    roots = [Path(r) for r in opts.source_roots] + [Path.cwd(), run_dir.parent, run_dir]
    manifest = (run_info.get("settings") or {}).get("manifest")
    if manifest:
        roots.append(Path(manifest).parent)
    src_cache: dict[str, Path | None] = {}
    tasks: list[tuple[str, int, int, str]] = []
    task_pages: dict[str, list[Page]] = {}
    skipped_cap = 0
    for p in queues["all"]:
        if p.page < 1:
            p.thumb_note = "no page image: the document could not be opened"
            continue
        if len(task_pages) >= opts.max_thumbs:
            skipped_cap += 1
            p.thumb_note = f"no thumbnail: the report renders at most {opts.max_thumbs} (--max-thumbs)"
            continue
        src = p.rec.get("source") or docs[p.d].source
        path = _find_source(str(src), roots, src_cache)
        if path is None:
            p.thumb_note = f"no thumbnail: source not found ({src}); pass --source-root"
            continue
        try:
            name = _thumb_name(path, p.page, opts.thumb_size)
        except OSError as exc:
            p.thumb_note = f"no thumbnail: {exc}"
            continue
        dest = str(thumb_dir / name)
        if dest not in task_pages:
            tasks.append((str(path), p.page, opts.thumb_size, dest))
        task_pages.setdefault(dest, []).append(p)
    workers = opts.workers or max(1, min(4, os.cpu_count() or 1))
    say(f"rendering {len(tasks)} thumbnails")
    tasks.sort(key=lambda t: (t[0], t[1]))
    thumbs_ok = 0
    used_thumbs: set[str] = set()
    for dest, ok, note, _w, _h in _render_thumbs(tasks, workers):
        for p in task_pages[dest]:
            if ok:
                p.thumb = f"{THUMB_DIR}/{Path(dest).name}"
            else:
                p.thumb_note = note
        if ok:
            thumbs_ok += 1
            used_thumbs.add(Path(dest).name)
    if skipped_cap:
        notes.append(f"{skipped_cap} flagged pages have no thumbnail: over --max-thumbs {opts.max_thumbs}")
    unfound = sorted(s for s, v in src_cache.items() if v is None)
    if unfound:
        notes.append(f"{len(unfound)} source file(s) not found for thumbnails (e.g. {unfound[0]}); "
                     f"pass --source-root DIR")

    # Write the data into a fresh folder, then swap it in: an open report never mixes two builds.
    say("writing data")
    tmp = out / f".{DATA_DIR}.{os.getpid()}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "c").mkdir(parents=True)
    chunk_starts: list[int] = []
    cur: list[dict[str, Any]] = []
    cur_docs: dict[int, dict[str, Any]] = {}
    cur_bytes = 0

    def doc_head(doc: Doc) -> dict[str, Any]:
        return {"id": doc.doc_id, "source": doc.source, "start": doc.pages[0].g, "n": len(doc.pages)}

    def flush() -> None:
        nonlocal cur, cur_docs, cur_bytes
        if not cur:
            return
        n = len(chunk_starts)
        chunk_starts.append(cur[0]["g"])
        _write_bytes(tmp / "c" / f"{n}.js", _js(f"c/{n}", {"start": cur[0]["g"], "docs": cur_docs, "pages": cur}))
        cur, cur_docs, cur_bytes = [], {}, 0

    for doc in docs:
        for p in doc.pages:
            obj = _page_obj(p, doc)
            size = len(obj["text"]) + len(obj.get("clean") or "") + 2 * len(obj.get("truth") or "") + 400
            if cur and (len(cur) >= PAGE_CHUNK or cur_bytes + size > CHUNK_BYTES):
                flush()
            cur.append(obj)
            cur_docs.setdefault(doc.i, doc_head(doc))
            cur_bytes += size
    flush()

    def chunk_of(g: int) -> int:
        return bisect.bisect_right(chunk_starts, g) - 1

    queue_sizes: dict[str, int] = {}
    for name, qpages in queues.items():
        queue_sizes[name] = len(qpages)
        if not qpages:
            continue
        (tmp / "q" / name).mkdir(parents=True)
        for n, i in enumerate(range(0, len(qpages), QUEUE_CHUNK)):
            refs = [[p.g, chunk_of(p.g), p.d, p.page, p.status, p.ordinal] for p in qpages[i:i + QUEUE_CHUNK]]
            _write_bytes(tmp / "q" / name / f"{n}.js", _js(f"q/{name}/{n}", refs))

    # The document table.
    has_truth = opts.truth is not None
    cols = ["i", "doc", "source", "pages", "ok", "fallback", "review", "failed", "flagged", "retried", "seconds",
            "cer", "cer_clean", "first", "start"]
    rows = []
    for doc in docs:
        groups = Counter(Status(p.status).group if p.status in STATUS_ORDER else "failed" for p in doc.pages)
        flagged = [p for p in doc.pages if p.reasons]
        edits = sum(p.edits for p in doc.pages if p.cer is not None)
        refs = sum(p.ref_chars for p in doc.pages if p.cer is not None)
        scored = [p for p in doc.pages if p.cer is not None]
        cer = (edits / refs if refs else float(edits > 0)) if scored else None
        cer_clean = None
        if scored and all(p.cer_clean is not None for p in scored):
            ce = sum(p.cer_clean * p.ref_chars for p in scored if p.cer_clean is not None)
            cer_clean = ce / refs if refs else None
        rows.append([doc.i, doc.doc_id, doc.source, len(doc.pages), groups["ok"], groups["fallback"],
                     groups["review"], groups["failed"], len(flagged),
                     sum(1 for p in doc.pages if int(p.rec.get("attempt") or 1) > 1),
                     round(sum(float(p.rec.get("seconds") or 0) for p in doc.pages), 3), cer, cer_clean,
                     flagged[0].ordinal if flagged else None, doc.pages[0].g])
    _write_bytes(tmp / "docs.js", _js("docs", {"cols": cols, "rows": rows}))

    title = opts.title or f"vlmocr report: {run_dir.resolve().name}"
    meta = {
        "title": title, "pages": len(pages), "docs": len(docs), "queues": queue_sizes, "queue_chunk": QUEUE_CHUNK,
        "chunk_starts": chunk_starts, "has_truth": has_truth, "has_clean": clean_file.is_file(),
        "clean_state": clean_state, "cer_threshold": opts.cer_threshold,
        "generated_at": datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    _write_bytes(tmp / "meta.js", _js("meta", meta))

    data = out / DATA_DIR
    old = out / f".{DATA_DIR}.{os.getpid()}.old"
    if data.exists():
        os.replace(data, old)
    os.replace(tmp, data)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)

    # Thumbnails no longer referenced (an earlier build) go; only our own file names are touched.
    for f in thumb_dir.iterdir():
        if re.fullmatch(r"[0-9a-f]{20}\.jpg", f.name) and f.name not in used_thumbs:
            f.unlink(missing_ok=True)

    assets = out / ASSET_DIR
    assets.mkdir(exist_ok=True)
    for name in ("report.js", "report.css"):
        dest = assets / name
        tmpf = assets / f".{name}.{os.getpid()}.tmp"
        tmpf.write_bytes(_asset(name))
        os.replace(tmpf, dest)

    # The pages.
    statuses = Counter(p.status for p in pages)
    scored = [p for p in pages if p.cer is not None]
    total_edits = sum(p.edits for p in scored)
    total_ref = sum(p.ref_chars for p in scored)
    cer_micro = (total_edits / total_ref if total_ref else float(total_edits > 0)) if scored else None
    ctx = _IndexContext(
        title=title, run_dir=run_dir, run_info=run_info, pages=pages, docs=docs, n_records=n_records,
        statuses=dict(statuses), queues=queues, times=times, opts=opts, cer_micro=cer_micro,
        cer_macro=(sum(p.cer for p in scored if p.cer is not None) / len(scored)) if scored else None,
        cer_clean=_micro_clean(scored), scored=len(scored), truth_pages=truth_pages,
        missing_truth=missing_truth, clean_present=clean_file.is_file(), clean_state=clean_state,
        thumbs=thumbs_ok, notes=notes, generated=meta["generated_at"],
    )
    write_text_atomic(out / "index.html", _index_html(ctx))
    write_text_atomic(out / "review.html", _shell_html(title, "review"))
    write_text_atomic(out / "doc.html", _shell_html(title, "doc"))

    return ReportResult(out=out, pages=len(pages), documents=len(docs), records=n_records,
                        flagged=len(queues["all"]), thumbs=thumbs_ok, thumbs_skipped=skipped_cap,
                        statuses=dict(statuses), cer=cer_micro, seconds=time.monotonic() - t0, notes=notes)


def _micro_clean(scored: list[Page]) -> float | None:
    if not scored or any(p.cer_clean is None for p in scored):
        return None
    ref = sum(p.ref_chars for p in scored)
    edits = sum((p.cer_clean or 0.0) * p.ref_chars for p in scored)
    return edits / ref if ref else None


# ------------------------------------------------------------------------------ HTML


@dataclass
class _IndexContext:
    title: str
    run_dir: Path
    run_info: dict[str, Any]
    pages: list[Page]
    docs: list[Doc]
    n_records: int
    statuses: dict[str, int]
    queues: dict[str, list[Page]]
    times: list[float]
    opts: ReportOptions
    cer_micro: float | None
    cer_macro: float | None
    cer_clean: float | None
    scored: int
    truth_pages: int
    missing_truth: list[tuple[str, int]]
    clean_present: bool
    clean_state: str | None
    thumbs: int
    notes: list[str]
    generated: str


def _head(title: str, view: str) -> str:
    # The policy allows only files (the report's own): even if some markup slipped through, no
    # inline script or event handler would run, and nothing is loaded from the network.
    # `file:` is spelled out because some browsers do not count file:// URLs as 'self'.
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'self' file:; "
        "style-src 'self' file:; img-src 'self' file:; base-uri 'none'; form-action 'none'\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{escape(title)}</title>\n"
        "<link rel=\"stylesheet\" href=\"assets/report.css\">\n</head>\n"
        f"<body data-view=\"{escape(view)}\">\n"
    )


def _nav(active: str, flagged: int | None = None) -> str:
    def link(href: str, label: str, key: str) -> str:
        cls = ' class="active"' if key == active else ""
        return f'<a href="{href}"{cls}>{escape(label)}</a>'

    review = "Review" + (f" ({flagged:,})" if flagged is not None else "")
    return (
        '<nav class="top">'
        + link("index.html#summary", "Summary", "summary")
        + link("index.html#documents", "Documents", "documents")
        + link("review.html#q=all&n=0", review, "review")
        + "</nav>\n"
    )


def _shell_html(title: str, view: str) -> str:
    return (
        _head(title, view)
        + f'<header><h1><a href="index.html">{escape(title)}</a></h1>{_nav(view)}</header>\n'
        + '<main id="app"><p class="loading">Loading…</p></main>\n'
        + "<noscript><p class=\"note\">This view needs JavaScript (the summary on index.html does not).</p>"
        + "</noscript>\n"
        + '<script src="assets/report.js"></script>\n</body>\n</html>\n'
    )


def _card(label: str, value: str, ident: str, cls: str = "") -> str:
    return (f'<div class="card {escape(cls)}"><div class="v" id="{escape(ident)}">{escape(value)}</div>'
            f'<div class="k">{escape(label)}</div></div>')


def _throughput(ctx: _IndexContext) -> tuple[float | None, float | None, int]:
    """(pages/h of the last invocation, pages/h over all invocations, invocations)."""
    summary = ctx.run_info.get("summary") or {}
    last = summary.get("pages_per_hour")
    history = [h.get("summary") or {} for h in ctx.run_info.get("history") or [] if isinstance(h, dict)]
    read = sum(float(h.get("read_now") or 0) for h in history)
    secs = sum(float(h.get("seconds") or 0) for h in history)
    overall = read / secs * 3600 if secs > 0 else None
    if overall is None and len(ctx.times) > 1:
        span = max(ctx.times) - min(ctx.times)
        overall = len(ctx.times) / span * 3600 if span > 0 else None
    return (float(last) if isinstance(last, (int, float)) else None), overall, len(history)


def _bins(values: list[float], edges: list[float], fmt: Callable[[float], str], last: str) -> list[tuple[str, int]]:
    counts = [0] * len(edges)
    for v in values:
        i = bisect.bisect_right(edges, v) - 1
        counts[max(0, min(i, len(edges) - 1))] += 1
    labels = [fmt(e) for e in edges[:-1]] + [last]
    return list(zip(labels, counts, strict=True))


def _charts(ctx: _IndexContext) -> str:
    charts = []
    status_items = [(s, ctx.statuses.get(s, 0), f"st-{s}") for s in STATUS_ORDER if ctx.statuses.get(s)]
    charts.append(svg.hbars("Pages by status", status_items, chart_id="chart-status"))
    attempts = Counter(min(int(p.rec.get("attempt") or 1), 5) for p in ctx.pages)
    charts.append(svg.histogram("Attempts per page (final record)",
                                [(str(k) if k < 5 else "5+", attempts.get(k, 0)) for k in range(1, 6)],
                                chart_id="chart-attempts", x_title="attempt number"))
    if ctx.scored:
        cers = [p.cer for p in ctx.pages if p.cer is not None]
        edges = [0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
        bins = _bins(cers, edges, lambda e: f"≥{e * 100:g}%", "≥100%")
        charts.append(svg.histogram("CER per page (pages with truth)", bins, chart_id="chart-cer", cls="bar-cer",
                                    x_title="character error rate"))
    secs = [float(p.rec.get("seconds") or 0) for p in ctx.pages if p.page > 0]
    if secs:
        edges = [0, 0.1, 0.5, 1, 2, 5, 10, 30, 60]
        charts.append(svg.histogram("Seconds per page", _bins(secs, edges, lambda e: f"{e:g}", "60+"),
                                    chart_id="chart-seconds", x_title="seconds (lower bound of bin)"))
    if len(ctx.times) > 1:
        ts = sorted(ctx.times)
        t0 = ts[0]
        step = max(1, len(ts) // 200)
        points = [(0.0, 0)] + [((ts[i] - t0) / 3600, i + 1) for i in range(0, len(ts), step)]
        if points[-1][1] != len(ts):
            points.append(((ts[-1] - t0) / 3600, len(ts)))
        charts.append(svg.cumulative("Records written over time", points, chart_id="chart-time", x_label="h"))
    return '<div class="charts">' + "".join(c for c in charts if c) + "</div>"


def _settings_table(run_info: dict[str, Any]) -> str:
    settings = run_info.get("settings") or {}
    rows = []
    for key in ("engine", "ocr_engine", "model", "profile", "endpoint", "dpi", "longest_side", "lang", "workers",
                "concurrency", "shard"):
        if settings.get(key) not in (None, "", []):
            rows.append((key, settings[key]))
    versions = run_info.get("versions") or {}
    if versions.get("vlmocr"):
        rows.append(("vlmocr", versions["vlmocr"]))
    for key in ("key", "git_commit", "host"):
        if run_info.get(key):
            rows.append((key.replace("_", " "), run_info[key]))
    inputs = settings.get("inputs")
    if inputs:
        shown = ", ".join(str(i) for i in inputs[:5]) + (" …" if len(inputs) > 5 else "")
        rows.append(("inputs", shown))
    if not rows:
        return ""
    body = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in rows)
    return f'<table class="kv" id="settings">{body}</table>'


def _snippet(text: str, n: int = 90) -> str:
    one = " ".join(text.split())
    return one[:n] + ("…" if len(one) > n else "")


def _index_html(ctx: _IndexContext) -> str:
    n_pages = len(ctx.pages)
    st = ctx.statuses
    groups = Counter()
    for s, n in st.items():
        groups[Status(s).group if s in STATUS_ORDER else "failed"] += n
    last_ph, overall_ph, invocations = _throughput(ctx)
    run_summary = ctx.run_info.get("summary") or {}
    missing = run_summary.get("missing")
    flagged = len(ctx.queues["all"])

    cards = [
        _card("pages", _num(n_pages), "n-pages"),
        _card("documents", _num(len(ctx.docs)), "n-docs"),
        _card("records (attempts)", _num(ctx.n_records), "n-records"),
        _card("ok", _num(groups["ok"]), "n-ok", "st-ok"),
        _card("fallback", _num(groups["fallback"]), "n-fallback", "st-fallback"),
        _card("review", _num(groups["review"]), "n-review", "st-loop"),
        _card("failed", _num(groups["failed"]), "n-failed", "st-error"),
        _card("flagged", _num(flagged), "n-flagged"),
    ]
    if isinstance(missing, int):
        cards.append(_card("missing (run.json)", _num(missing), "n-missing"))
    cards.append(_card("pages/h (last run)", _num(round(last_ph)) if last_ph is not None else "—", "n-pph"))
    if overall_ph is not None and invocations != 1:
        cards.append(_card(f"pages/h ({invocations} runs)" if invocations else "pages/h (records)",
                           _num(round(overall_ph)), "n-pph-all"))
    if ctx.opts.truth is not None:
        cards.append(_card("CER (micro)", _pct(ctx.cer_micro), "n-cer", "cer"))
        if ctx.cer_clean is not None:
            cards.append(_card("CER cleaned", _pct(ctx.cer_clean), "n-cer-clean", "cer"))

    status_rows = "".join(
        f'<tr data-status="{escape(s)}"><td><span class="badge st-{escape(s)}">{escape(s)}</span></td>'
        f'<td class="num" data-count="{st.get(s, 0)}">{st.get(s, 0):,}</td>'
        f'<td class="num">{(st.get(s, 0) / n_pages * 100 if n_pages else 0):.1f} %</td>'
        f'<td>{escape(Status(s).group)}</td></tr>'
        for s in STATUS_ORDER
    )
    status_table = (
        '<table class="grid" id="status-table"><thead><tr><th>status</th><th>pages</th><th>share</th>'
        f"<th>group</th></tr></thead><tbody>{status_rows}</tbody>"
        f'<tfoot><tr><th>all</th><td class="num" id="status-total">{n_pages:,}</td><td></td><td></td></tr></tfoot>'
        "</table>"
    )

    truth_html = ""
    if ctx.opts.truth is not None:
        truth_html = (
            '<h3>Measured quality</h3><table class="kv" id="quality">'
            f"<tr><th>truth</th><td>{escape(str(ctx.opts.truth))}</td></tr>"
            f"<tr><th>truth pages</th><td>{ctx.truth_pages:,}</td></tr>"
            f'<tr><th>scored (have a record)</th><td id="q-scored">{ctx.scored:,}</td></tr>'
            f'<tr><th>missing (no record)</th><td id="q-missing">{len(ctx.missing_truth):,}</td></tr>'
            f'<tr><th>CER micro (Σ edits / Σ truth chars)</th><td id="q-cer">{_pct(ctx.cer_micro)}</td></tr>'
            f"<tr><th>CER macro (mean of pages)</th><td>{_pct(ctx.cer_macro)}</td></tr>"
            + (f"<tr><th>CER of the cleaned layer</th><td>{_pct(ctx.cer_clean)}</td></tr>" if ctx.cer_clean is not None
               else "")
            + f"<tr><th>review threshold</th><td>CER &gt; {ctx.opts.cer_threshold * 100:g} %</td></tr></table>"
        )
        if ctx.missing_truth:
            shown = ", ".join(f"{d} p{p}" for d, p in ctx.missing_truth[:10])
            more = " …" if len(ctx.missing_truth) > 10 else ""
            truth_html += f'<p class="note">Truth pages without a record: {escape(shown + more)}</p>'

    queue_links = "".join(
        f'<li><a href="review.html#q={escape(q)}&amp;n=0" data-queue="{escape(q)}">'
        f'<span class="badge st-{escape(q)}">{escape(_queue_label(q, ctx.opts.cer_threshold))}</span></a> '
        f'<span class="num" data-count="{len(ps)}">{len(ps):,}</span></li>'
        for q, ps in ctx.queues.items() if q != "all" and ps
    )
    preview = []
    for p in ctx.queues["all"][:PREVIEW_ROWS]:
        doc = ctx.docs[p.d]
        reasons = " ".join(f'<span class="badge st-{escape(r)}">{escape(r)}</span>' for r in p.reasons)
        cer = f"<td class=\"num\">{_pct(p.cer, 1)}</td>" if ctx.opts.truth is not None else ""
        preview.append(
            f'<tr><td class="num">{(p.ordinal or 0) + 1}</td>'
            f'<td><a href="review.html#q=all&amp;n={p.ordinal}">{escape(doc.doc_id)}</a></td>'
            f'<td class="num">{p.page}</td><td>{reasons}</td>{cer}'
            f'<td class="snip">{escape(_snippet(p.rec.get("text") or p.rec.get("error") or ""))}</td></tr>'
        )
    preview_html = ""
    if preview:
        more = (f'<p class="note">The first {PREVIEW_ROWS} of {flagged:,} are listed; '
                f'<a href="review.html#q=all&amp;n=0">open the review</a> to go through all of them '
                f"(keys j / k or ← / →).</p>" if flagged > PREVIEW_ROWS else "")
        cer_th = "<th>CER</th>" if ctx.opts.truth is not None else ""
        preview_html = (
            '<table class="grid" id="flagged-table"><thead><tr><th>#</th><th>document</th><th>page</th>'
            f"<th>why</th>{cer_th}<th>text</th></tr></thead><tbody>{''.join(preview)}</tbody></table>{more}"
        )

    clean_note = ""
    if ctx.clean_present:
        clean_note = f'<p class="note">Cleaned layer: RUN/clean ({escape(ctx.clean_state or "present")}).</p>'
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in ctx.notes)
    doc_cols = [("doc", "document"), ("pages", "pages"), ("ok", "ok"), ("fallback", "fallback"),
                ("review", "review"), ("failed", "failed"), ("flagged", "flagged"), ("retried", "retried"),
                ("seconds", "seconds")]
    if ctx.opts.truth is not None:
        doc_cols.append(("cer", "CER"))
        if ctx.clean_present:
            doc_cols.append(("cer_clean", "CER cleaned"))
    head = "".join(f'<th data-col="{c}" tabindex="0" role="columnheader" aria-sort="none">{escape(label)}</th>'
                   for c, label in doc_cols)

    return (
        _head(ctx.title, "index")
        + f'<header><h1><a href="index.html">{escape(ctx.title)}</a></h1>{_nav("summary", flagged)}</header>\n'
        + "<main>\n"
        + '<section id="summary"><h2>Summary</h2>'
        + f'<p class="sub">Run <code>{escape(str(ctx.run_dir))}</code> · report generated {escape(ctx.generated)}'
        + f" · {ctx.thumbs:,} thumbnails</p>"
        + notes
        + f'<div class="cards">{"".join(cards)}</div>'
        + f'<div class="two">{status_table}{_settings_table(ctx.run_info)}</div>'
        + truth_html
        + clean_note
        + _charts(ctx)
        + "</section>\n"
        + '<section id="review"><h2>Review queue</h2>'
        + (f'<p>{flagged:,} flagged pages (every status but ok'
           + (f", and CER above {ctx.opts.cer_threshold * 100:g} %" if ctx.opts.truth is not None else "")
           + '). <a class="button" href="review.html#q=all&amp;n=0" id="start-review">Start the review</a> '
           "(keys: j / k or ← / → between flagged pages, in the review view).</p>"
           if flagged else "<p>No flagged pages.</p>")
        + (f'<ul class="queues">{queue_links}</ul>' if queue_links else "")
        + preview_html
        + "</section>\n"
        + '<section id="documents"><h2>Documents</h2>'
        + '<div class="tools"><input id="doc-filter" type="search" placeholder="filter documents" '
        + 'aria-label="filter documents"> <label><input type="checkbox" id="doc-flagged-only"> '
        + 'flagged only</label> <span id="doc-count"></span></div>'
        + f'<table class="grid sortable" id="doc-table"><thead><tr>{head}</tr></thead><tbody></tbody></table>'
        + '<div class="pager" id="doc-pager"></div>'
        + '<noscript><p class="note">The document table needs JavaScript.</p></noscript>'
        + "</section>\n</main>\n"
        + '<script src="assets/report.js"></script>\n</body>\n</html>\n'
    )


def _queue_label(q: str, threshold: float) -> str:
    return f"CER > {threshold * 100:g} %" if q == "cer" else q
