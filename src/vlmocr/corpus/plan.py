"""From a triage CSV to an estimate: pages to OCR, hours on 1…N GPUs, and where to run.

The rate is either given (`pages_per_hour`, per GPU) or measured now by reading a sample of
the corpus's own pages against an endpoint with `vlmocr.reading.scheduler` — the same client, retries and
settings a real run uses — in a temporary run directory."""

from __future__ import annotations

import csv
import io
import math
import random
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..exceptions import UsageError, VlmocrError
from .triage import estimated_text_pages, read_rows

RETRY_OVERHEAD = 0.30  # extra time for retries, ladder steps and re-reads
OVERNIGHT_HOURS = 12.0  # what "a night on the local machine" means
DEFAULT_GPUS = (1, 2, 4, 8)


@dataclass
class Corpus:
    """Totals of a triage CSV. Duplicates and unreadable files are counted, not planned."""

    docs: int = 0
    planned_docs: int = 0
    duplicates: int = 0
    unreadable: int = 0
    pages: int = 0
    pages_checked: int = 0
    text_pages: int = 0  # estimated for all pages from the checked ones
    ocr_pages: int = 0
    image_only_pages: int = 0
    blank_pages: int = 0
    duplicate_pages: int = 0

    @property
    def sampled(self) -> bool:
        return self.pages_checked < self.pages


def load_corpus(triage_csv: Path) -> Corpus:
    c = Corpus()
    for row in read_rows(triage_csv):
        if row["status"] == "skipped":
            continue  # a file of a folder that is no document (triage lists it; run skips it)
        c.docs += 1
        pages = int(row["pages"] or 0)
        if row["status"] != "ok":
            c.unreadable += 1
            continue
        if row["duplicate_of"]:
            c.duplicates += 1
            c.duplicate_pages += pages
            continue
        c.planned_docs += 1
        c.pages += pages
        c.pages_checked += int(row["pages_checked"] or 0)
        c.image_only_pages += int(row.get("image_only_pages") or 0)
        c.blank_pages += int(row.get("blank_pages") or 0)
        text = estimated_text_pages(row)
        c.text_pages += text
        c.ocr_pages += pages - text
    return c


# ---------------------------------------------------------------- measuring


@dataclass
class Measurement:
    pages: int
    seconds: float  # the busy window: first page started → last page finished
    pages_per_hour: float  # of the endpoint as measured (all its GPUs), over the busy window
    run_seconds: float = 0.0  # the whole run, with start-up (model check, worker pool)
    run_pages_per_hour: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    endpoint: str = ""
    profile: str = ""


def _busy_window(pages_jsonl: Path) -> float:
    """Seconds from the start of the first page to the end of the last, from the records."""
    from datetime import datetime

    from ..store import iter_records

    starts, ends = [], []
    for rec in iter_records(pages_jsonl):
        try:
            end = datetime.fromisoformat(rec["finished_at"]).timestamp()
        except (KeyError, TypeError, ValueError):
            continue
        ends.append(end)
        starts.append(end - float(rec.get("seconds") or 0.0))
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


def measure(triage_csv: Path, endpoint: str, profile: str | None = None, model: str | None = None,
            sample: int = 20, concurrency: int | None = None, workdir: Path | None = None,
            progress: bool = False, seed: int = 0) -> Measurement:
    """Read a sample of the corpus's pages against `endpoint` with `vlmocr.reading.scheduler` and return the
    rate over the busy window (first page started → last page finished, from the records), so
    the run's start-up (model check, worker pool) does not count; slow pages and retries do."""
    from ..config import load_config
    from ..progress import RunProgress
    from ..reading.scheduler import run

    picks = sample_pages(triage_csv, sample, seed)
    if not picks:
        raise UsageError(f"{triage_csv}: no readable pages to measure on")
    with tempfile.TemporaryDirectory(prefix="vlmocr-measure-") as tmp:
        base = Path(workdir) if workdir else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        manifest = base / "sample.csv"
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["doc_id", "path", "pages"])
        for doc_id, path, pages in picks:
            w.writerow([doc_id, path, ",".join(map(str, pages))])
        manifest.write_text(buf.getvalue(), encoding="utf-8")
        # The same layers as `vlmocr run` (VLMOCR_* environment, defaults), read by the VLM engine.
        cfg = load_config(dict(manifest=manifest, out=base / "run", engine="openai", endpoint=endpoint,
                               profile=profile, model=model, concurrency=concurrency, force=True))
        cfg.shard, cfg.retry_only, cfg.inputs = None, False, []  # every sampled page, whatever the environment
        summary = run(cfg, RunProgress(enabled=progress))
        window = _busy_window(base / "run" / "pages.jsonl")
    if summary.interrupted:
        raise VlmocrError("measurement interrupted", exit_code=summary.exit_code())
    read = summary.ok + summary.fallback + summary.review
    if not read:
        raise VlmocrError(f"no page of the sample was read ({summary.done_line()})", exit_code=summary.exit_code())
    if window <= 0:
        window = summary.seconds
    # Pages read (ok, fallback or review), not records: a page the ladder read three times
    # counts once, and its three attempts' time is in the window.
    return Measurement(pages=read, seconds=round(window, 2),
                       pages_per_hour=round(read / window * 3600, 1),
                       run_seconds=round(summary.seconds, 2), run_pages_per_hour=round(summary.pages_per_hour, 1),
                       statuses=dict(summary.statuses), endpoint=endpoint, profile=profile or "generic")


# ---------------------------------------------------------------- the plan


@dataclass
class Plan:
    corpus: Corpus
    pages_per_hour: float  # per GPU
    rate_source: str
    retry_overhead: float
    overnight_hours: float
    hours: dict[int, float]  # GPUs → wall hours for the OCR pages, retries included
    recommendation: str
    measurement: Measurement | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hours"] = {str(g): round(h, 2) for g, h in self.hours.items()}
        d["corpus"]["sampled"] = self.corpus.sampled
        return d


def parse_gpus(spec: str | Iterable[int]) -> list[int]:
    if isinstance(spec, str):
        try:
            values = [int(x) for x in spec.replace(" ", "").split(",") if x]
        except ValueError:
            raise UsageError(f"--gpus {spec!r}: expected a list like 1,2,4,8") from None
    else:
        values = list(spec)
    if not values or any(v < 1 for v in values):
        raise UsageError("--gpus: give at least one GPU count, each >= 1")
    return sorted(set(values))


def _duration(hours: float) -> str:
    if hours < 1:
        return f"{hours * 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours:.0f} h (≈{hours / 24:.1f} days)"


def make_plan(corpus: Corpus, pages_per_hour: float, gpus: Iterable[int] = DEFAULT_GPUS,
              rate_source: str = "given", retry_overhead: float = RETRY_OVERHEAD,
              overnight_hours: float = OVERNIGHT_HOURS, measurement: Measurement | None = None) -> Plan:
    if pages_per_hour <= 0:
        raise UsageError("the rate must be more than 0 pages/h")
    counts = parse_gpus(gpus)
    one = corpus.ocr_pages * (1 + retry_overhead) / pages_per_hour
    hours = {g: one / g for g in counts}
    rate = f"{pages_per_hour:,.0f} pages/h per GPU"
    if corpus.ocr_pages == 0:
        rec = (f"Nothing needs a GPU: the text layer serves all {corpus.pages:,} pages. Run "
               "`vlmocr run --engine auto` on this machine (CPU only).")
    elif one <= overnight_hours:
        rec = (f"Run it locally overnight: {corpus.ocr_pages:,} pages to OCR at {rate} take "
               f"{_duration(one)} on one GPU (+{retry_overhead:.0%} for retries), within a "
               f"{overnight_hours:g} h night. A cluster is not worth the queue.")
    else:
        nights = math.ceil(one / overnight_hours)
        fits = [g for g in counts if hours[g] <= overnight_hours]
        needed = math.ceil(one / overnight_hours)
        if fits:
            g = fits[0]
            rec = (f"Use a cluster: on one local GPU the {corpus.ocr_pages:,} pages to OCR take "
                   f"{_duration(one)} at {rate} (+{retry_overhead:.0%} for retries), {nights} nights; "
                   f"with {g} GPUs they take {_duration(hours[g])}, one night "
                   f"(`vlmocr slurm submit --manifest … --shards {g}`).")
        else:
            g = counts[-1]
            rec = (f"Use a cluster, as large as you can get: {corpus.ocr_pages:,} pages to OCR take "
                   f"{_duration(one)} on one GPU at {rate} (+{retry_overhead:.0%} for retries); even "
                   f"{g} GPUs need {_duration(hours[g])}. About {needed} GPUs would finish in one "
                   f"{overnight_hours:g} h night; or start with the priority documents (`vlmocr manifest`).")
    return Plan(corpus, pages_per_hour, rate_source, retry_overhead, overnight_hours, hours, rec, measurement)


def render_plan(plan: Plan) -> str:
    c = plan.corpus
    out = io.StringIO()
    share = (c.text_pages / c.pages) if c.pages else 0.0
    out.write(f"Corpus: {c.docs:,} documents; planned {c.planned_docs:,} "
              f"(skipped {c.duplicates:,} duplicates with {c.duplicate_pages:,} pages, {c.unreadable:,} unreadable)\n")
    out.write(f"  pages:                   {c.pages:,}\n")
    out.write(f"  served by the text layer: {c.text_pages:,} ({share:.0%}; CPU, no GPU time)\n")
    out.write(f"  to OCR:                  {c.ocr_pages:,} (scans: {c.image_only_pages:,} of the checked pages, "
              f"blank: {c.blank_pages:,})\n")
    if c.sampled:
        out.write(f"  (text-layer share estimated from {c.pages_checked:,} checked pages)\n")
    out.write(f"Rate: {plan.pages_per_hour:,.0f} pages/h per GPU ({plan.rate_source})\n")
    out.write(f"Hours for the pages to OCR, +{plan.retry_overhead:.0%} for retries:\n")
    out.write("  GPUs       hours  fits a night?\n")
    for g, h in plan.hours.items():
        out.write(f"  {g:>4}  {h:>10.2f}  {'yes' if h <= plan.overnight_hours else 'no'}\n")
    out.write(f"Recommendation: {plan.recommendation}\n")
    return out.getvalue()
