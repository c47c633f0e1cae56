"""The rate of a corpus's own pages, measured now: a sample read with `vlmocr.reading.scheduler` —
the same engine, retries and settings a real run uses — in a temporary run directory, against an
endpoint (pages/h per GPU) or with a CPU engine (pages/h per core: the pool's rate divided by its
workers, one process per core). `vlmocr plan --measure` plans with it (corpus/plan.py)."""

from __future__ import annotations

import csv
import io
import random
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from ..corpus.plan import Measurement
from ..corpus.triage import estimated_text_pages, read_rows
from ..engines.registry import HTTP_ENGINE, peak_worker_mb
from ..exceptions import UsageError, VlmocrError
from ..progress import RunProgress
from ..reading.scheduler import run
from ..runfolder.store import iter_rows
from ..settings.config import load_config


def _busy_window(pages_jsonl: Path) -> float:
    """Seconds from the start of the first page to the end of the last, from the records."""
    starts, ends = [], []
    for rec in iter_rows(pages_jsonl):
        try:
            end = datetime.fromisoformat(rec.finished_at).timestamp()
        except ValueError:
            continue
        ends.append(end)
        starts.append(end - rec.seconds)
    return max(ends) - min(starts) if ends else 0.0


def sample_pages(triage_csv: Path, n: int, seed: int = 0) -> list[tuple[str, str, list[int]]]:
    """Up to `n` pages to read, spread over documents that need OCR (reservoir sampling, so
    the triage CSV is streamed): [(doc_id, path, pages)], in triage order."""
    rng = random.Random(seed)
    chosen: list[tuple[int, dict[str, str]]] = []
    seen = 0
    fallback: list[tuple[int, dict[str, str]]] = []
    for i, row in enumerate(read_rows(triage_csv)):
        if row["status"] != "ok" or row["duplicate_of"] or not int(row["pages"] or 0):
            continue
        needs_ocr = int(row["pages"]) - estimated_text_pages(row) > 0
        if not needs_ocr:
            if len(fallback) < n:
                fallback.append((i, row))
            continue
        seen += 1
        if len(chosen) < n:
            chosen.append((i, row))
        else:
            j = rng.randrange(seen)
            if j < n:
                chosen[j] = (i, row)
    if not chosen:
        chosen = fallback  # every page has a text layer: measure on those pages then
    chosen.sort(key=lambda x: x[0])
    picks: list[tuple[str, str, list[int]]] = []
    if not chosen:
        return picks
    per_doc = [1] * len(chosen)
    k = 0
    while sum(per_doc) < n and any(per_doc[j] < int(chosen[j][1]["pages"]) for j in range(len(chosen))):
        j = k % len(chosen)
        if per_doc[j] < int(chosen[j][1]["pages"]):
            per_doc[j] += 1
        k += 1
    for (_, row), want in zip(chosen, per_doc):
        total = int(row["pages"])
        pages = sorted(rng.sample(range(1, total + 1), min(want, total)))
        picks.append((row["doc_id"], row["path"], pages))
    return picks


def _sample_manifest(path: Path, picks: list[tuple[str, str, list[int]]], languages: dict[str, str]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    suggested = any(languages.get(doc_id) for doc_id, _, _ in picks)
    # Triage's suggested language goes with each document, as `vlmocr manifest --triage` writes it:
    # a Fraktur book is measured with the model a real run would read it with.
    w.writerow(["doc_id", "path", "pages", *(["language", "language_from"] if suggested else [])])
    for doc_id, doc_path, pages in picks:
        lang = languages.get(doc_id, "")
        w.writerow([doc_id, doc_path, ",".join(map(str, pages)),
                    *([lang, "triage" if lang else ""] if suggested else [])])
    path.write_text(buf.getvalue(), encoding="utf-8")


def measure(triage_csv: Path, endpoint: str | None = None, profile: str | None = None, model: str | None = None,
            sample: int = 20, concurrency: int | None = None, workdir: Path | None = None,
            progress: bool = False, seed: int = 0, engine: str = HTTP_ENGINE, workers: int | None = None,
            lang: str | None = None) -> Measurement:
    """Read a sample of the corpus's pages with `vlmocr.reading.scheduler` and return the rate over
    the busy window (first page started → last page finished, from the records), so the run's
    start-up (model check, worker pool, an engine's models loading) does not count; slow pages and
    retries do. `engine` openai reads against `endpoint`; a CPU engine reads with `workers`
    processes (default 1: the rate of one core)."""
    cpu = engine != HTTP_ENGINE
    if not cpu and not endpoint:
        raise UsageError("--measure needs --endpoint URL (a VLM endpoint), or --engine with a CPU engine")
    picks = sample_pages(triage_csv, sample, seed)
    if not picks:
        raise UsageError(f"{triage_csv}: no readable pages to measure on")
    languages = {row["doc_id"]: (row.get("suggest_lang") or "").strip() for row in read_rows(triage_csv)} if cpu else {}
    with tempfile.TemporaryDirectory(prefix="vlmocr-measure-") as tmp:
        base = Path(workdir) if workdir else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        manifest = base / "sample.csv"
        _sample_manifest(manifest, picks, languages)
        # The same layers as `vlmocr run` (VLMOCR_* environment, defaults).
        settings: dict[str, Any] = dict(manifest=manifest, out=base / "run", engine=engine, force=True)
        if cpu:
            settings.update(workers=workers or 1, lang=lang)
        else:
            settings.update(endpoint=endpoint, profile=profile, model=model, concurrency=concurrency)
        # every sampled page, whatever the environment says of shards and retries
        cfg = load_config({k: v for k, v in settings.items() if v is not None}).model_copy(
            update={"shard": None, "retry_only": False, "inputs": []})
        summary = run(cfg, RunProgress(enabled=progress))
        window = _busy_window(base / "run" / "pages.jsonl")
        used = _engines_used(base / "run" / "pages.jsonl") if cpu else ()
    if summary.interrupted:
        raise VlmocrError("measurement interrupted", exit_code=summary.exit_code())
    read = summary.ok + summary.fallback + summary.review
    if not read:
        raise VlmocrError(f"no page of the sample was read ({summary.done_line()})", exit_code=summary.exit_code())
    if window <= 0:
        window = summary.seconds
    pool = summary.workers if cpu else 0
    # Pages read (ok, fallback or review), not records: a page the ladder read three times
    # counts once, and its three attempts' time is in the window.
    return Measurement(pages=read, seconds=round(window, 2),
                       pages_per_hour=round(read / window * 3600, 1),
                       run_seconds=round(summary.seconds, 2), run_pages_per_hour=round(summary.pages_per_hour, 1),
                       statuses=dict(summary.statuses), endpoint=endpoint or "",
                       profile=(profile or "generic") if not cpu else "", engine=engine, workers=pool,
                       worker_mb=peak_worker_mb(used) if cpu else None, read_by=list(used))


def _engines_used(pages_jsonl: Path) -> tuple[str, ...]:
    """The CPU engines that read the sample (auto picks per document), for their memory."""
    return tuple(sorted({r.engine for r in iter_rows(pages_jsonl) if r.engine}))
