"""From a triage CSV to an estimate: pages to OCR, hours on 1…N GPUs or cores, and where to run.

The rate is either given (`pages_per_hour`, per GPU) or measured (a `Measurement`: trials/rate.py
reads a sample of the corpus's own pages as a real run would)."""

from __future__ import annotations

import io
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from ..engines.registry import HTTP_ENGINE
from ..exceptions import UsageError
from ..runfolder.record import JsonObject
from .triage import estimated_text_pages, read_rows

RETRY_OVERHEAD = 0.30  # extra time for retries, ladder steps and re-reads
OVERNIGHT_HOURS = 12.0  # what "a night on the local machine" means
DEFAULT_GPUS = (1, 2, 4, 8)
DEFAULT_CORES = (1, 8, 32, 128, 512)
DEFAULT_CORES_PER_TASK = 32  # CPUs of one SLURM task in the proposed CPU array


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
    engine: str = "openai"  # what read the sample: openai (a VLM endpoint) or a CPU engine
    workers: int = 0  # a CPU measurement's worker processes (the rate per core is ÷ this)
    worker_mb: int | None = None  # a CPU engine's peak memory per worker (engines/registry.py)
    read_by: list[str] = field(default_factory=list)  # the engines that read the sample (auto picks)

    @property
    def engines(self) -> str:
        """`auto (rapidocr)`: the engine asked for, and what read the pages when that differs."""
        used = ", ".join(self.read_by)
        return f"{self.engine} ({used})" if used and used != self.engine else self.engine

    @property
    def cpu(self) -> bool:
        return self.engine != HTTP_ENGINE

    @property
    def per_unit(self) -> float:
        """Pages/h of one core (a CPU measurement) or of the whole endpoint."""
        return round(self.pages_per_hour / self.workers, 1) if self.cpu and self.workers else self.pages_per_hour


# ---------------------------------------------------------------- the plan


@dataclass
class Plan:
    corpus: Corpus
    pages_per_hour: float  # per GPU, or per core
    rate_source: str
    retry_overhead: float
    overnight_hours: float
    hours: dict[int, float]  # GPUs (cores) → wall hours for the OCR pages, retries included
    recommendation: str
    measurement: Measurement | None = None
    unit: str = "GPU"  # GPU | core
    cpu_job: CpuJob | None = None  # the SLURM CPU array that reads the corpus in one night

    def as_dict(self) -> JsonObject:
        d = asdict(self)
        d["hours"] = {str(g): round(h, 2) for g, h in self.hours.items()}
        d["corpus"]["sampled"] = self.corpus.sampled
        if self.cpu_job is not None:
            d["cpu_job"]["command"] = self.cpu_job.command()
        return d


@dataclass
class CpuJob:
    """A SLURM array of CPU tasks sized to finish in one night: `vlmocr slurm submit` with the
    engine's workers filling each task's CPUs (one worker process per core)."""

    tasks: int
    cores_per_task: int
    hours_per_task: float  # expected, retries included
    time_limit: str  # the expected hours ×1.5 and a quarter hour for start-up, rounded up to 15 min
    mem: str  # the engine's workers' peak memory ×1.25, and 2 GB for the rest
    engine: str
    manifest: str = "MANIFEST"
    run: str = "RUN"

    def command(self) -> str:
        return (f"vlmocr slurm submit --manifest {self.manifest} --out {self.run} --shards {self.tasks} "
                f"--cpus-per-task {self.cores_per_task} --mem {self.mem} --time {self.time_limit} "
                f"-- --engine {self.engine} --workers {self.cores_per_task}")


def cpu_job(core_hours: float, cores_per_task: int, overnight_hours: float, engine: str,
            worker_mb: int | None, manifest: str = "MANIFEST", run: str = "RUN") -> CpuJob:
    tasks = max(1, math.ceil(core_hours / (cores_per_task * overnight_hours)))
    per_task = core_hours / (tasks * cores_per_task)
    minutes = math.ceil((per_task * 1.5 * 60 + 15) / 15) * 15
    mem_gb = math.ceil(((worker_mb or 256) * cores_per_task * 1.25 + 2048) / 1024)
    return CpuJob(tasks=tasks, cores_per_task=cores_per_task, hours_per_task=round(per_task, 2),
                  time_limit=f"{minutes // 60}:{minutes % 60:02d}:00", mem=f"{mem_gb}G", engine=engine,
                  manifest=manifest, run=run)


def parse_gpus(spec: str | Iterable[int], option: str = "--gpus") -> list[int]:
    """GPU (or, for `option` --cores, core) counts from a list like 1,2,4,8."""
    what = "core" if option == "--cores" else "GPU"
    if isinstance(spec, str):
        try:
            values = [int(x) for x in spec.replace(" ", "").split(",") if x]
        except ValueError:
            raise UsageError(f"{option} {spec!r}: expected a list like 1,2,4,8") from None
    else:
        values = list(spec)
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{option}: give at least one {what} count, each >= 1")
    return sorted(set(values))


def duration(hours: float) -> str:
    """`40 min`, `7.8 h`, `156 h (≈6.5 days)`: a plan's hours as a person reads them."""
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
               f"{duration(one)} on one GPU (+{retry_overhead:.0%} for retries), within a "
               f"{overnight_hours:g} h night. A cluster is not worth the queue.")
    else:
        nights = math.ceil(one / overnight_hours)
        fits = [g for g in counts if hours[g] <= overnight_hours]
        needed = math.ceil(one / overnight_hours)
        if fits:
            g = fits[0]
            rec = (f"Use a cluster: on one local GPU the {corpus.ocr_pages:,} pages to OCR take "
                   f"{duration(one)} at {rate} (+{retry_overhead:.0%} for retries), {nights} nights; "
                   f"with {g} GPUs they take {duration(hours[g])}, one night "
                   f"(`vlmocr slurm submit --manifest … --shards {g}`).")
        else:
            g = counts[-1]
            rec = (f"Use a cluster, as large as you can get: {corpus.ocr_pages:,} pages to OCR take "
                   f"{duration(one)} on one GPU at {rate} (+{retry_overhead:.0%} for retries); even "
                   f"{g} GPUs need {duration(hours[g])}. About {needed} GPUs would finish in one "
                   f"{overnight_hours:g} h night; or start with the priority documents (`vlmocr manifest`).")
    return Plan(corpus, pages_per_hour, rate_source, retry_overhead, overnight_hours, hours, rec, measurement)


def make_cpu_plan(corpus: Corpus, measurement: Measurement, cores: Iterable[int] = DEFAULT_CORES,
                  local_cores: int = 1, cores_per_task: int = DEFAULT_CORES_PER_TASK,
                  retry_overhead: float = RETRY_OVERHEAD, overnight_hours: float = OVERNIGHT_HOURS,
                  manifest: str = "MANIFEST", run: str = "RUN") -> Plan:
    """The plan for a CPU engine, from a rate per core measured on the corpus's own pages: hours on
    N cores, this machine's included, and the SLURM CPU array that finishes in one night."""
    rate = measurement.per_unit
    if rate <= 0:
        raise UsageError("the measured rate is 0 pages/h")
    counts = sorted(set(parse_gpus(cores, "--cores")) | {local_cores})
    core_hours = corpus.ocr_pages * (1 + retry_overhead) / rate
    hours = {n: core_hours / n for n in counts}
    engine = measurement.engine
    said = f"{rate:,.0f} pages/h per core with {measurement.engines}"
    sized = cpu_job(core_hours, cores_per_task, overnight_hours, engine, measurement.worker_mb, manifest, run)
    job: CpuJob | None = sized
    here = hours[local_cores]
    if corpus.ocr_pages == 0:
        rec = (f"Nothing needs OCR: the text layer serves all {corpus.pages:,} pages. Run "
               "`vlmocr run --engine auto` on this machine.")
        job = None
    elif here <= overnight_hours:
        rec = (f"Run it here overnight: {corpus.ocr_pages:,} pages to OCR at {said} take {duration(here)} on "
               f"this machine's {local_cores} core(s) (+{retry_overhead:.0%} for retries), within a "
               f"{overnight_hours:g} h night (`vlmocr run --manifest {manifest} --out {run} --engine {engine}`).")
        job = None
    else:
        rec = (f"Use a CPU cluster: {corpus.ocr_pages:,} pages to OCR at {said} take {duration(here)} on this "
               f"machine's {local_cores} core(s) (+{retry_overhead:.0%} for retries); {sized.tasks} task(s) of "
               f"{sized.cores_per_task} cores ({sized.tasks * sized.cores_per_task:,} cores) take about "
               f"{duration(sized.hours_per_task)}, one night: `{sized.command()}`")
    source = (f"measured now: {measurement.pages} pages in {measurement.seconds:.1f} s with {measurement.engines}, "
              f"{measurement.workers} worker process(es)")
    return Plan(corpus, rate, source, retry_overhead, overnight_hours, hours, rec, measurement, unit="core",
                cpu_job=job)


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
    unit = plan.unit
    out.write(f"Rate: {plan.pages_per_hour:,.0f} pages/h per {unit} ({plan.rate_source})\n")
    out.write(f"Hours for the pages to OCR, +{plan.retry_overhead:.0%} for retries:\n")
    out.write(f"  {unit + 's':>5}       hours  fits a night?\n")
    for g, h in plan.hours.items():
        out.write(f"  {g:>5}  {h:>10.2f}  {'yes' if h <= plan.overnight_hours else 'no'}\n")
    if plan.measurement is not None and plan.measurement.worker_mb:
        out.write(f"Memory: ~{plan.measurement.worker_mb:,} MB per worker process ({plan.measurement.engines})\n")
    out.write(f"Recommendation: {plan.recommendation}\n")
    return out.getvalue()
