"""A cascade's cost for a whole corpus, from a pilot run over a sample of it:
`vlmocr plan --triage t.csv --pilot RUN [--pages-per-hour N] [--cpu-price P] [--gpu-price P]`.

The pilot is a run with the tiers the corpus will be read with (`--engine tesseract,rapidocr`,
`--vlm-tier`): its records say, page by page, which tiers read the page and how long each engine
took (`tiers`). From them, per tier: the share of pages that reached it and the engine seconds a
page there; times the corpus's pages to OCR (triage), the core-hours of each CPU tier and — at the
VLM's pages per hour on one GPU (`--pages-per-hour`, as `plan` takes it; a request's latency in the
pilot is not a GPU's throughput) — the GPU-hours of the VLM tier; with a price per hour, what each
tier costs per 1,000 pages of the corpus. Pages read from their text layer or never escalated
cost no later tier anything."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..exceptions import UsageError
from ..runfolder.record import JsonObject, Status, tier_went_on
from ..runfolder.rundir import RunDir
from .plan import Corpus

VLM = "openai"


@dataclass
class TierLoad:
    tier: int
    engines: list[str]
    gpu: bool  # the VLM tier
    reached: int  # pilot pages that reached it
    share: float  # of the pilot's OCR pages
    seconds_per_page: float  # mean engine seconds a page there (CPU: one core; VLM: a request's latency)
    corpus_pages: int  # the corpus's OCR pages expected to reach it
    hours: float | None  # core-hours (CPU), GPU-hours (VLM, with a rate); None without one
    cost_per_1000: float | None = None  # per 1,000 OCR pages of the corpus, with a price
    went_on: dict[str, int] = field(default_factory=dict)  # why pages went on from it (their status here)


@dataclass
class TierPlan:
    pilot: str
    pilot_pages: int  # OCR pages the pilot read (with a `tiers` list, or one engine)
    corpus_ocr_pages: int
    tiers: list[TierLoad]
    gpu_pages_per_hour: float | None
    cpu_price: float | None
    gpu_price: float | None

    def as_dict(self) -> JsonObject:
        return asdict(self)


def pilot_tiers(run_dir: Path) -> tuple[int, list[dict]]:
    """(OCR pages of the pilot, per tier: engines, pages reached, engine seconds, why went on)
    from the final records of `run_dir`. A page one engine read counts as tier 1 of it."""
    run = RunDir(run_dir)
    if not run.pages.exists():
        raise UsageError(f"--pilot {run_dir}: no pages.jsonl (a run folder of the pilot run)")
    rows: list[dict] = []
    pages = 0
    reading = run.reading()
    for key in reading:
        rec = reading[key]
        if rec.page == 0 or rec.status in (Status.bad_input, Status.error) or rec.engine == "textlayer":
            continue  # not read by an OCR tier: no tier's cost
        tiers = rec.tiers or ({"engine": rec.engine, "status": rec.status.value, "seconds": rec.seconds},)
        pages += 1
        for k, t in enumerate(tiers):
            while len(rows) <= k:
                rows.append({"engines": Counter(), "reached": 0, "seconds": 0.0, "went_on": Counter()})
            rows[k]["engines"][str(t.get("engine") or "?")] += 1
            rows[k]["reached"] += 1
            rows[k]["seconds"] += float(t.get("seconds") or 0.0)
            if k + 1 < len(tiers):
                rows[k]["went_on"][tier_went_on(t)] += 1
    if not pages:
        raise UsageError(f"--pilot {run_dir}: no page there was read by an OCR engine")
    return pages, rows


def make_tier_plan(corpus: Corpus, pilot: Path, gpu_pages_per_hour: float | None = None,
                   cpu_price: float | None = None, gpu_price: float | None = None) -> TierPlan:
    pages, rows = pilot_tiers(pilot)
    loads = []
    for k, row in enumerate(rows):
        engines = sorted(row["engines"])
        gpu = VLM in engines
        share = row["reached"] / pages
        per_page = row["seconds"] / row["reached"]
        corpus_pages = round(corpus.ocr_pages * share)
        if gpu:
            hours = corpus_pages / gpu_pages_per_hour if gpu_pages_per_hour else None
            price = gpu_price
        else:
            hours = corpus_pages * per_page / 3600
            price = cpu_price
        cost = (hours * price / corpus.ocr_pages * 1000
                if hours is not None and price is not None and corpus.ocr_pages else None)
        loads.append(TierLoad(tier=k + 1, engines=engines, gpu=gpu, reached=row["reached"], share=round(share, 4),
                              seconds_per_page=round(per_page, 3), corpus_pages=corpus_pages,
                              hours=round(hours, 2) if hours is not None else None,
                              cost_per_1000=round(cost, 4) if cost is not None else None,
                              went_on=dict(row["went_on"])))
    return TierPlan(pilot=str(pilot), pilot_pages=pages, corpus_ocr_pages=corpus.ocr_pages, tiers=loads,
                    gpu_pages_per_hour=gpu_pages_per_hour, cpu_price=cpu_price, gpu_price=gpu_price)


def render_tier_plan(plan: TierPlan) -> str:
    lines = [f"Tiers from the pilot {plan.pilot} ({plan.pilot_pages} pages read by OCR), for the corpus's "
             f"{plan.corpus_ocr_pages:,} pages to OCR:", "",
             f"{'tier':<5} {'engine':<22} {'reached':>8} {'pages':>12} {'s/page':>8} {'hours':>12} {'per 1,000 pages':>16}  went on"]
    for t in plan.tiers:
        unit = "GPU-h" if t.gpu else "core-h"
        hours = f"{t.hours:,.1f} {unit}" if t.hours is not None else f"? {unit}"
        cost = f"{t.cost_per_1000:,.2f}" if t.cost_per_1000 is not None else "—"
        went = ", ".join(f"{n} {why}" for why, n in sorted(t.went_on.items(), key=lambda x: -x[1])) or "—"
        lines.append(f"{t.tier:<5} {', '.join(t.engines):<22} {t.share:>8.1%} {t.corpus_pages:>12,} "
                     f"{t.seconds_per_page:>8.2f} {hours:>12} {cost:>16}  {went}")
    notes = []
    if any(t.gpu and t.hours is None for t in plan.tiers):
        notes.append("GPU-hours need the VLM's pages per hour on one GPU: --pages-per-hour N (or `plan --measure`).")
    if any(t.cost_per_1000 is None for t in plan.tiers) and (plan.cpu_price is None or plan.gpu_price is None):
        notes.append("Costs need a price per hour: --cpu-price (a core-hour), --gpu-price (a GPU-hour).")
    if not any(t.gpu for t in plan.tiers):
        notes.append("The pilot had no VLM tier: `run --vlm-tier` adds one.")
    return "\n".join(lines + [""] + notes) + "\n"
