"""Where each model fits on the partitions (corpus/partitions.py), by the GPU memory its profile
declares (`[memory]`), with hours, shards, a split of the pages and the submit commands.

Seed 000's rules: the partition matches the model's memory footprint, and the large GPU
(gpu-a100-80g) is used only when smaller GPUs cannot hold the model or the preferred partition is
busy; each partition has a time limit (7 days public, 14 days gpu_lucdh, 4 h gpu-short); the
public A100 partition runs at most two GPUs per user (QOSMaxGRESPerUser), so shards are planned
around it. Seed 001 serves a 27B bf16 model across two 46 GB A40s with tensor parallel 2: a
model one GPU cannot hold runs tensor parallel across the GPUs of one node."""

from __future__ import annotations

import csv
import io
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..exceptions import UsageError
from ..runfolder.record import JsonObject
from .partitions import FP8_ON_AMPERE, Partition, Partitions, is_ampere
from .plan import duration

TP_SIZES = (1, 2, 4, 8)  # tensor parallel sizes vLLM accepts for the usual head counts
# Hours of a shard's time limit kept for the server start: the job template waits up to 20 min
# for the health check (seed 000: "Loading a 35B model from network storage took about 8 minutes").
STARTUP_HOURS = 1 / 3
# A MIG slice's GRES type (3g.40gb): slices do not take part in tensor parallelism.
_MIG = re.compile(r"\d+g\.\d+gb")


@dataclass
class Fit:
    """One profile on one partition: whether it fits, on how many GPUs per model instance (the
    tensor parallel size), how many instances run at once, and the hours and shards."""

    partition: Partition
    fits: bool
    reason: str = ""  # why not, or how it is held
    tp: int = 0
    instances: int = 0  # model instances at once
    capped: bool = False  # fewer instances than the partition has GPUs for: the per-user cap
    rate_per_gpu: float = 0.0
    hours: float = 0.0  # wall hours if all the pages ran here
    shards: int = 0  # array tasks so that each fits the time limit
    pages: int = 0  # pages of the split given to this partition
    docs: int = 0
    part_hours: float = 0.0
    part_shards: int = 0

    @property
    def gpus(self) -> int:
        return self.instances * self.tp

    @property
    def throughput(self) -> float:
        return self.rate_per_gpu * self.gpus


def fit(min_gpu_gb: float, p: Partition) -> Fit:
    """Whether a model that needs `min_gpu_gb` fits `p`: on one GPU, else tensor parallel over
    the fewest GPUs of one node (1, 2, 4, 8) that hold it, within the per-user GPU cap."""
    if not p.gpus_per_node:
        return Fit(p, False, p.detail or "no GPUs")
    if p.gpu_memory_gb is None:
        return Fit(p, False, f"GPU memory unknown ({p.gpu or 'unnamed GPU'}): give gpu_memory_gb in a TOML")
    g = p.gpu_memory_gb
    limit = p.gpus_per_node if p.max_gpus_per_user is None else min(p.gpus_per_node, p.max_gpus_per_user)
    if _MIG.fullmatch(p.gpu.lower()):
        limit = 1  # MIG slices do not take part in tensor parallelism (no peer-to-peer between slices)
    for tp in TP_SIZES:
        if tp > limit:
            break
        if tp * g >= min_gpu_gb:
            held = "one GPU" if tp == 1 else f"tensor parallel {tp} ({tp} x {g:g} GB on one node)"
            return Fit(p, True, held, tp=tp)
    if p.max_gpus_per_user is not None and p.max_gpus_per_user < p.gpus_per_node:
        most = f"{limit} x {g:g} GB (the per-user cap of {p.max_gpus_per_user} GPUs)"
    else:
        most = f"{limit} x {g:g} GB on one node" if limit > 1 else f"one {g:g} GB GPU per node"
    return Fit(p, False, f"needs {min_gpu_gb:g} GB; at most {most} = {limit * g:g} GB")


def shards_for(pages: float, rate_per_instance: float, instances: int, limit_hours: float | None) -> int:
    """Array tasks for `pages` (retries included): at least one per instance, and enough that a
    task fits the time limit less the server's start; a multiple of the instances, so that the
    waves are even."""
    if pages <= 0 or instances < 1:
        return 0
    if limit_hours is None:
        return instances
    budget = max(limit_hours - STARTUP_HOURS, limit_hours / 2)
    needed = math.ceil(pages / rate_per_instance / budget)
    return instances * max(1, math.ceil(needed / instances))


@dataclass
class Placement:
    """One profile against the partitions: every partition's fit, in preference order (the
    fitting ones first, one GPU before tensor parallel, the smallest GPU first), and the split."""

    profile: str
    min_gpu_gb: float | None
    fits: list[Fit]
    note: str = ""  # why nothing is planned (no [memory], nothing fits)
    split_files: dict[str, str] = field(default_factory=dict)  # partition → manifest written

    @property
    def fitting(self) -> list[Fit]:
        return [f for f in self.fits if f.fits]

    def as_dict(self) -> JsonObject:
        return {"profile": self.profile, "min_gpu_gb": self.min_gpu_gb, "note": self.note,
                "partitions": [{"partition": f.partition.name, "part": f.partition.part_name, "gpu": f.partition.gpu,
                                "gpu_memory_gb": f.partition.gpu_memory_gb, "fits": f.fits, "reason": f.reason,
                                "tp": f.tp, "instances": f.instances, "gpus": f.gpus, "capped": f.capped,
                                "rate_per_gpu": f.rate_per_gpu, "hours": round(f.hours, 2), "shards": f.shards,
                                "time_limit": f.partition.time_limit, "split_pages": f.pages, "split_docs": f.docs,
                                "split_hours": round(f.part_hours, 2), "split_shards": f.part_shards,
                                "manifest": self.split_files.get(f.partition.part_name)}
                               for f in self.fits]}


def place(profile: str, min_gpu_gb: float | None, partitions: Iterable[Partition], ocr_pages: int,
          pages_per_hour: float | None, retry_overhead: float) -> Placement:
    """Fit one profile on every partition; hours and shards for all the pages on each that fits."""
    parts = list(partitions)
    if min_gpu_gb is None:
        return Placement(profile, None, [], note=f"profile {profile} declares no [memory] (min_gpu_gb): "
                                                  "add it to place the model")
    fits = [fit(min_gpu_gb, p) for p in parts]
    work = ocr_pages * (1 + retry_overhead)
    for f in fits:
        if not f.fits:
            continue
        p = f.partition
        rate = p.pages_per_hour_per_gpu or pages_per_hour
        if not rate:
            raise UsageError(f"partition {p.name}: no rate: give --pages-per-hour or pages_per_hour_per_gpu in the TOML")
        usable = p.gpus if p.max_gpus_per_user is None else min(p.gpus, p.max_gpus_per_user)
        f.instances = usable // f.tp
        f.capped = usable < p.gpus
        f.rate_per_gpu = rate
        f.hours = work / f.throughput if work else 0.0
        f.shards = shards_for(work, rate * f.tp, f.instances, p.time_limit_hours)
    # Seed 000: "gpu-a100-80g used only when smaller GPUs cannot hold the model": one GPU before
    # tensor parallel, then the smallest GPU that holds it.
    # Those that do not fit follow in the order given.
    fits.sort(key=lambda f: (0, f.tp, f.partition.gpu_memory_gb or 0.0, f.partition.part_name) if f.fits else (1,))
    note = ""
    if not any(f.fits for f in fits):
        note = f"{profile} (needs {min_gpu_gb:g} GB) fits no partition: " + "; ".join(
            f"{f.partition.part_name}: {f.reason}" for f in fits)
    return Placement(profile, min_gpu_gb, fits, note=note)


# ---------------------------------------------------------------- the split


@dataclass
class SplitDoc:
    doc_id: str
    path: str
    pages: str  # the manifest's page selection, "" = every page
    weight: float  # pages to OCR (what the GPU time is spent on)
    extra: dict[str, str] = field(default_factory=dict)  # dpi, language, original_path


def split_documents(docs: list[SplitDoc], fits: list[Fit]) -> dict[str, list[SplitDoc]]:
    """Whole documents to each fitting partition, the pages in proportion to its throughput.
    Documents are taken in priority order and each goes to the partition that would finish its
    share soonest with it, so every part starts on the most important documents and keeps their
    order."""
    parts: dict[str, list[SplitDoc]] = {f.partition.part_name: [] for f in fits}
    load = {f.partition.part_name: 0.0 for f in fits}
    speed = {f.partition.part_name: f.throughput for f in fits}
    order = [f.partition.part_name for f in fits]  # preference order breaks ties
    for d in docs:
        best = min(order, key=lambda n: ((load[n] + max(d.weight, 1e-9)) / speed[n], order.index(n)))
        parts[best].append(d)
        load[best] += d.weight
    return parts


def apply_split(placement: Placement, docs: list[SplitDoc], retry_overhead: float) -> dict[str, list[SplitDoc]]:
    """Split the documents over the fitting partitions and fill in each part's pages, hours, shards."""
    fitting = placement.fitting
    parts = split_documents(docs, fitting)
    for f in fitting:
        mine = parts[f.partition.part_name]
        pages = sum(d.weight for d in mine)
        f.docs, f.pages = len(mine), round(pages)
        work = pages * (1 + retry_overhead)
        f.part_hours = work / f.throughput if work else 0.0
        # Shards take whole documents (by doc_id hash): more shards than documents would stay empty.
        f.part_shards = min(len(mine), shards_for(work, f.rate_per_gpu * f.tp, f.instances,
                                                  f.partition.time_limit_hours))
    return parts


def too_long(placement: Placement, parts: dict[str, list[SplitDoc]], retry_overhead: float) -> list[str]:
    """Documents that alone outrun a part's time limit on one model instance: a shard holds whole
    documents, so such a document finishes only over resubmits (page-level resume)."""
    out = []
    for f in placement.fitting:
        limit = f.partition.time_limit_hours
        if limit is None or not f.rate_per_gpu:
            continue
        budget = max(limit - STARTUP_HOURS, limit / 2)
        long = [(d.doc_id, hours) for d in parts.get(f.partition.part_name, [])
                if (hours := d.weight * (1 + retry_overhead) / (f.rate_per_gpu * f.tp)) > budget]
        if long:
            named = ", ".join(f"{doc} ({duration(h)})" for doc, h in long[:3]) + (" …" if len(long) > 3 else "")
            out.append(f"{placement.profile} on {f.partition.part_name}: {len(long)} document(s) alone outrun the "
                       f"{f.partition.time_limit} limit on one instance: {named}; they finish over resubmits")
    return out


def write_split(parts: dict[str, list[SplitDoc]], out_dir: Path, profile: str) -> dict[str, str]:
    """One manifest per part, DIR/PROFILE-PARTITION.csv (doc_id,path[,pages,…]), priority order kept."""
    from ..files import write_text_atomic
    from ..inputs.sources import neutralise_cell

    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for name, docs in parts.items():
        if not docs:
            continue
        columns = ["doc_id", "path"]
        if any(d.pages for d in docs):
            columns.append("pages")
        for key in ("dpi", "language", "original_path"):
            if any(d.extra.get(key) for d in docs):
                columns.append(key)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for d in docs:
            row = {"doc_id": d.doc_id, "path": d.path, "pages": d.pages, **d.extra}
            w.writerow([neutralise_cell(str(row.get(c) or "")) for c in columns])
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", f"{profile}-{name}")
        path = out_dir / f"{safe}.csv"
        write_text_atomic(path, buf.getvalue())
        written[name] = str(path)
    return written


def submit_command(profile: str, f: Fit, manifest: str, run: str) -> str:
    """The `vlmocr slurm submit` for one part: its own --part, the partition, shards, GPUs per
    task (the tensor parallel size), the time limit, --max-running under a per-user cap, and
    --no-p2p for tensor parallel on PCIe GPUs."""
    p = f.partition
    gpus = f"{p.gres}:{f.tp}" if p.gres else str(f.tp)
    argv = ["vlmocr", "slurm", "submit", "--manifest", manifest, "--out", run, "--part", p.part_name,
            "--partition", p.name, "--shards", str(f.part_shards or f.shards), "--gpus-per-task", gpus]
    if p.time_limit_hours is not None:
        argv += ["--time", p.time_limit]
    if f.capped and (f.part_shards or f.shards) > f.instances:
        argv += ["--max-running", str(f.instances)]
    if f.tp > 1 and p.interconnect == "pcie":
        # Seed 001: a two-GPU vLLM on PCIe cards hangs at NCCL start-up, then in CUDA graph capture.
        argv.append("--no-p2p")
    argv += ["--serve", profile]
    return shlex.join(argv)


def documents_to_split(triage_csv: Path, manifest: Path | None = None) -> tuple[list[SplitDoc], list[str]]:
    """The documents to split, in priority order: the manifest's (as `vlmocr manifest` ordered
    them) or else the triage CSV's planned documents (readable, not duplicates) in its order.
    Each weighs its pages to OCR from the triage (text-layer pages take no GPU time)."""
    from .triage import estimated_text_pages, read_rows

    rows: dict[str, dict[str, str]] = {}
    planned: list[SplitDoc] = []
    for row in read_rows(triage_csv):
        if row["status"] != "ok" or row["duplicate_of"]:
            continue
        pages = int(row["pages"] or 0)
        ocr = pages - estimated_text_pages(row)
        rows[row["doc_id"]] = row
        planned.append(SplitDoc(row["doc_id"], row["path"], "", float(ocr)))
    if manifest is None:
        return planned, []
    from ..inputs.sources import from_manifest

    docs: list[SplitDoc] = []
    unknown: list[str] = []
    for d in from_manifest(manifest):
        found = rows.get(d.doc_id)
        if found is None:
            unknown.append(d.doc_id)
            weight = float(len(d.pages) if d.pages else 1)
        else:
            total = int(found["pages"] or 0)
            ocr = total - estimated_text_pages(found)
            weight = float(ocr) if not d.pages or not total else ocr * min(1.0, len(d.pages) / total)
        extra = {"dpi": f"{d.dpi:g}" if d.dpi else "", "language": d.language or "",
                 "original_path": d.source if d.source != str(d.path) else ""}
        docs.append(SplitDoc(d.doc_id, str(d.path), ",".join(map(str, d.pages)) if d.pages else "", weight,
                             {k: v for k, v in extra.items() if v}))
    warnings = []
    if unknown:
        warnings.append(f"{len(unknown)} document(s) of {manifest} are not in {triage_csv} (counted by their page "
                        f"selection, else as 1 page): {', '.join(unknown[:5])}{' …' if len(unknown) > 5 else ''}")
    return docs, warnings


@dataclass
class PartitionPlan:
    """`vlmocr plan --partitions`: per profile, where it fits, and a split with its commands."""

    partitions: Partitions
    ocr_pages: int
    retry_overhead: float
    placements: list[Placement]
    commands: dict[str, list[str]] = field(default_factory=dict)  # profile → submit commands
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> JsonObject:
        return {"partitions_source": self.partitions.source, "ocr_pages": self.ocr_pages,
                "warnings": self.partitions.warnings + self.warnings,
                "profiles": [{**pl.as_dict(), "commands": self.commands.get(pl.profile, [])}
                             for pl in self.placements]}


def plan_partitions(partitions: Partitions, profiles: list[tuple[str, float | None]], triage_csv: Path,
                    ocr_pages: int, pages_per_hour: float | None, retry_overhead: float,
                    manifest: Path | None = None, split_out: Path | None = None,
                    run: str = "RUN", fp8: frozenset[str] = frozenset()) -> PartitionPlan:
    """Place each (profile, min_gpu_gb); where more than one partition fits, split the documents
    over them by throughput, write the parts under `split_out` and propose a submit per part."""
    plan = PartitionPlan(partitions, ocr_pages, retry_overhead, [])
    docs: list[SplitDoc] | None = None
    for name, need in profiles:
        placement = place(name, need, partitions.partitions, ocr_pages, pages_per_hour, retry_overhead)
        plan.placements.append(placement)
        fitting = placement.fitting
        if not fitting:
            continue
        ampere = [f.partition.part_name for f in fitting if is_ampere(f.partition.gpu)]
        if name in fp8 and ampere:
            plan.warnings.append(f"{name} on {', '.join(ampere)}: {FP8_ON_AMPERE}")
        if docs is None:
            docs, warnings = documents_to_split(triage_csv, manifest)
            plan.warnings += warnings
        if len(fitting) > 1 or split_out is not None:
            parts = apply_split(placement, docs, retry_overhead)
            plan.warnings += too_long(placement, parts, retry_overhead)
            if split_out is not None:
                placement.split_files = write_split(parts, Path(split_out), name)
            plan.commands[name] = [
                submit_command(name, f, placement.split_files.get(f.partition.part_name, f"{name}-{f.partition.part_name}.csv"),
                               run)
                for f in fitting if f.docs]
        else:
            only = fitting[0]
            only.docs, only.pages, only.part_hours = len(docs), ocr_pages, only.hours
            only.part_shards = min(len(docs), only.shards)
            plan.commands[name] = [submit_command(name, only, str(manifest) if manifest else "MANIFEST.csv", run)]
    return plan


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def render_partition_plan(plan: PartitionPlan) -> str:
    out = io.StringIO()
    out.write(f"Partitions ({plan.partitions.source}): " + ", ".join(
        f"{p.name} ({p.nodes} x {p.gpus_per_node} {p.gpu or 'GPU'}"
        + (f", {p.gpu_memory_gb:g} GB" if p.gpu_memory_gb else "") + f", limit {p.time_limit}"
        + (f", {p.max_gpus_per_user} GPUs per user" if p.max_gpus_per_user else "") + ")"
        if p.gpus_per_node else f"{p.name} (no GPUs)" for p in plan.partitions.partitions) + "\n")
    for w in plan.partitions.warnings + plan.warnings:
        out.write(f"warning: {w}\n")
    for pl in plan.placements:
        need = f"needs {pl.min_gpu_gb:g} GB" if pl.min_gpu_gb is not None else "memory not declared"
        out.write(f"\nProfile {pl.profile} ({need}):\n")
        if pl.note:
            out.write(f"  {pl.note}\n")
            continue
        for f in pl.fits:
            p = f.partition
            if not f.fits:
                out.write(f"  {p.name}: does not fit: {f.reason}\n")
                continue
            cap = f" (per-user cap {p.max_gpus_per_user} GPUs)" if f.capped else ""
            limit = (f"limit {p.time_limit}: {_n(f.shards, 'shard')}" if p.time_limit_hours is not None
                     else f"no time limit: {_n(f.shards, 'shard')}")
            out.write(f"  {p.name}: fits on {f.reason}; {f.instances} at once on {f.gpus} GPUs{cap}; "
                      f"{f.rate_per_gpu:,.0f} pages/h per GPU; all {plan.ocr_pages:,} pages "
                      f"(+{plan.retry_overhead:.0%} retries) in {duration(f.hours)}; {limit}\n")
        fitting = pl.fitting
        out.write(f"  Preferred: {fitting[0].partition.name} (the smallest GPU that holds it"
                  + (", tensor parallel" if fitting[0].tp > 1 else "") + ").\n")
        if len(fitting) > 1:
            finish = max(f.part_hours for f in fitting)
            out.write(f"  Split over the {len(fitting)} partitions that fit (pages by throughput, whole documents; "
                      f"all parts done in about {duration(finish)}):\n")
            for f in fitting:
                out.write(f"    {f.partition.part_name}: {f.docs:,} documents, {f.pages:,} pages, {duration(f.part_hours)}, "
                          f"{_n(f.part_shards, 'shard')}" + (f" -> {pl.split_files[f.partition.part_name]}"
                                                       if f.partition.part_name in pl.split_files else "") + "\n")
        for cmd in plan.commands.get(pl.profile, []):
            out.write(f"  $ {cmd}\n")
    return out.getvalue()
