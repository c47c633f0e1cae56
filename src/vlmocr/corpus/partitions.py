"""Where each model fits on a cluster: partitions from `sinfo` or a small TOML, fitted against
the GPU memory a profile declares (`[memory]`), with hours, shards and a split of the pages.

Seed 000's rules: the partition matches the model's memory footprint, and the large GPU
(gpu-a100-80g) is used only when smaller GPUs cannot hold the model or the preferred partition is
busy; each partition has a time limit (7 days public, 14 days gpu_lucdh, 4 h gpu-short); the
public A100 partition runs at most two GPUs per user (QOSMaxGRESPerUser), so shards are planned
around it. Seed 001 serves a 27B bf16 model across two 46 GB A40s with tensor parallel 2: a
model one GPU cannot hold runs tensor parallel across the GPUs of one node.

The sinfo format read is exactly ``SINFO_COMMAND``'s: ``partition|gres|timelimit|nodes|cpus|memory``,
one line per group of like nodes. QOS limits (GPUs per user) are not in sinfo: state them in
the TOML."""

from __future__ import annotations

import csv
import io
import math
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..exceptions import UsageError

SINFO_FORMAT = "%P|%G|%l|%D|%c|%m"
SINFO_COMMAND = f'sinfo -h -o "{SINFO_FORMAT}"'
TP_SIZES = (1, 2, 4, 8)  # tensor parallel sizes vLLM accepts for the usual head counts
# Hours of a shard's time limit kept for the server start: the job template waits up to 20 min
# for the health check (seed 000: "Loading a 35B model from network storage took about 8 minutes").
STARTUP_HOURS = 1 / 3

# GPU memory by card, in GB on the scale the seeds use (seed 001: "two NVIDIA A40 (46 GB) cards";
# an A40 or L40S is sold as 48 GB and nvidia-smi shows 46068 MiB). A tuple: the card comes in
# several sizes, told apart only by a suffix (a100_80g, v100-32gb) or the TOML's gpu_memory_gb.
# Keys are lowercase letters and digits only (vendor words dropped: nvidia, tesla, geforce, quadro).
GPU_MEMORY_GB: dict[str, float | tuple[float, ...]] = {
    "a40": 46, "l40": 46, "l40s": 46, "a6000": 48, "rtxa6000": 48, "rtx8000": 48,
    "a100": (40, 80), "h100": 80, "h100nvl": 94, "h200": 141, "gh200": 96,
    "a30": 24, "a10": 22, "a10g": 22, "l4": 22, "a5000": 24, "rtxa5000": 24, "a4000": 16, "rtxa4000": 16,
    "v100": (16, 32), "p100": (12, 16), "t4": 15, "k80": 12,
    "rtx2080ti": 11, "2080ti": 11, "rtx3090": 24, "3090": 24, "rtx4090": 24, "4090": 24,
    "titanrtx": 24, "rtx6000": 24,
}
_VENDOR_WORDS = ("nvidia", "tesla", "geforce", "quadro")
# A size in the name: a100_80g, a100-80gb, v100_32g, or a MIG slice 3g.40gb.
_SIZE_SUFFIX = re.compile(r"[_\-.](\d{2,3})g(?:b)?$")
_MIG = re.compile(r"\d+g\.\d+gb")
_GRES_GPU = re.compile(r"^gpu(?::([^:()]+))?(?::(\d+))?(?:\(.*\))?$")


def gpu_memory(name: str) -> tuple[float | None, str]:
    """(GB, warning) for a GPU name: a size suffix wins; a card of one size is looked up; a card
    sold in several sizes, or an unknown one, gives the smallest size or None and a warning,
    never a silent guess."""
    low = name.strip().lower()
    if m := _SIZE_SUFFIX.search(low):
        return float(m.group(1)), ""
    key = re.sub(r"[^a-z0-9]", "", low)
    for word in _VENDOR_WORDS:
        key = key.replace(word, "")
    known = GPU_MEMORY_GB.get(key)
    if known is None:
        return None, f"GPU {name!r} is not in the table of GPU memory: give gpu_memory_gb in a partitions TOML"
    if isinstance(known, tuple):
        sizes = " or ".join(f"{g:g}" for g in known)
        return float(min(known)), (f"GPU {name!r} comes with {sizes} GB and its name does not say which: "
                                   f"assumed {min(known):g} GB; give gpu_memory_gb in a partitions TOML")
    return float(known), ""


def parse_time_limit(text: str, where: str = "time limit") -> float | None:
    """Hours of a SLURM time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS);
    None for infinite/UNLIMITED."""
    t = text.strip()
    if t.lower() in ("infinite", "unlimited", ""):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", t)
    if not m:
        raise UsageError(f"{where}: {text!r} is not a SLURM time limit (e.g. 7-00:00:00, 4:00:00)")
    days, a, b, c = m.group(1), int(m.group(2)), m.group(3), m.group(4)
    if days is not None:  # D-HH[:MM[:SS]]
        hours = int(days) * 24 + a + int(b or 0) / 60 + int(c or 0) / 3600
    elif c is not None:  # HH:MM:SS
        hours = a + int(b) / 60 + int(c) / 3600
    elif b is not None:  # MM:SS
        hours = a / 60 + int(b) / 3600
    else:  # minutes
        hours = a / 60
    return hours


@dataclass
class Partition:
    name: str
    gpu: str = ""  # the card ("A40") or sinfo's GRES type ("a100_80g"); "" when it has no GPU
    gpu_memory_gb: float | None = None
    gpus_per_node: int = 0
    nodes: int = 1
    time_limit: str = "infinite"
    time_limit_hours: float | None = None
    max_gpus_per_user: int | None = None
    pages_per_hour_per_gpu: float | None = None
    gres: str = ""  # sinfo's GRES type, usable in --gpus-per-task TYPE:N
    cpus_per_node: int | None = None
    memory_mb: int | None = None
    detail: str = ""  # sinfo's GRES text when it names no GPU

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


@dataclass
class Partitions:
    source: str
    partitions: list[Partition] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def parse_sinfo(text: str, source: str = "sinfo") -> Partitions:
    """The output of ``SINFO_COMMAND`` (a header line, as plain `sinfo -o` prints, is skipped).
    Lines of one partition with the same GPU are one entry (nodes summed); a partition with two
    kinds of GPU node is two entries of the same name."""
    out = Partitions(source)
    merged: dict[tuple[str, str], Partition] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = line.strip().split("|")
        if len(cells) != 6:
            raise UsageError(f"{source}:{n}: expected 6 '|'-separated fields as `{SINFO_COMMAND}` prints, "
                             f"got {len(cells)}")
        name, gres, limit, nodes, cpus, memory = (c.strip() for c in cells)
        if name.upper() == "PARTITION":
            continue
        name = name.rstrip("*")  # the default partition
        gpu, per_node = "", 0
        for item in gres.split(","):
            m = _GRES_GPU.match(item.strip())
            if m:
                kind, count = m.group(1) or "", m.group(2)
                if count is None and kind.isdigit():  # gpu:4, no type
                    kind, count = "", kind
                gpu, per_node = kind, int(count or 1)
                break
        try:
            node_count = int(nodes)
        except ValueError:
            raise UsageError(f"{source}:{n}: nodes {nodes!r} is not a number") from None
        hours = parse_time_limit(limit, f"{source}:{n}")
        key = (name, gpu)
        if key in merged:
            p = merged[key]
            p.nodes += node_count
            p.gpus_per_node = min(p.gpus_per_node, per_node)
            continue
        p = Partition(name=name, gpu=gpu, gres=gpu, gpus_per_node=per_node, nodes=node_count, time_limit=limit,
                      time_limit_hours=hours, cpus_per_node=_int(cpus), memory_mb=_int(memory),
                      detail="" if per_node else f"no GPUs (GRES {gres})")
        if per_node:
            if gpu:
                p.gpu_memory_gb, warning = gpu_memory(gpu)
            else:
                warning = f"GPU of unnamed type (GRES {gres}): memory unknown; use a partitions TOML"
            if warning:
                out.warnings.append(f"{name}: {warning}")
        merged[key] = p
        out.partitions.append(p)
    if not out.partitions:
        raise UsageError(f"{source}: no partitions in it (run `{SINFO_COMMAND}` and save its output)")
    return out


def _int(text: str) -> int | None:
    try:
        return int(text.rstrip("+"))
    except ValueError:
        return None


_TOML_KEYS = {"gpu", "gpu_memory_gb", "gpus_per_node", "nodes", "time_limit", "max_gpus_per_user",
              "pages_per_hour_per_gpu", "gres"}


def parse_partitions_toml(text: str, source: str) -> Partitions:
    """``[partition.NAME]`` tables: gpu, gpu_memory_gb (else from the GPU table), gpus_per_node,
    nodes (1), time_limit ("7-00:00:00"), max_gpus_per_user, pages_per_hour_per_gpu, gres."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{source}: not valid TOML: {e}") from None
    tables = data.get("partition")
    if not isinstance(tables, dict) or not tables or set(data) - {"partition"}:
        raise UsageError(f"{source}: expected only [partition.NAME] tables")
    out = Partitions(source)
    for name, spec in tables.items():
        where = f"{source}: [partition.{name}]"
        if not isinstance(spec, dict):
            raise UsageError(f"{where}: expected a table")
        unknown = set(spec) - _TOML_KEYS
        if unknown:
            raise UsageError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        try:
            gpu = str(spec.get("gpu", ""))
            per_node = int(spec.get("gpus_per_node", 1 if gpu else 0))
            nodes = int(spec.get("nodes", 1))
            cap = spec.get("max_gpus_per_user")
            rate = spec.get("pages_per_hour_per_gpu")
            memory = spec.get("gpu_memory_gb")
            p = Partition(name=name, gpu=gpu, gpus_per_node=per_node, nodes=nodes,
                          time_limit=str(spec.get("time_limit", "infinite")),
                          max_gpus_per_user=int(cap) if cap is not None else None,
                          pages_per_hour_per_gpu=float(rate) if rate is not None else None,
                          gpu_memory_gb=float(memory) if memory is not None else None,
                          gres=str(spec.get("gres", "")))
        except (TypeError, ValueError) as e:
            raise UsageError(f"{where}: {e}") from None
        if min(per_node, nodes) < 0 or nodes < 1 or (p.max_gpus_per_user is not None and p.max_gpus_per_user < 1) \
                or (p.pages_per_hour_per_gpu is not None and p.pages_per_hour_per_gpu <= 0) \
                or (p.gpu_memory_gb is not None and p.gpu_memory_gb <= 0):
            raise UsageError(f"{where}: counts, memory and rates must be positive")
        p.time_limit_hours = parse_time_limit(p.time_limit, f"{where} time_limit")
        if not per_node:
            p.detail = "no GPUs (gpus_per_node = 0)"
        elif p.gpu_memory_gb is None:
            if not gpu:
                raise UsageError(f"{where}: give gpu or gpu_memory_gb")
            p.gpu_memory_gb, warning = gpu_memory(gpu)
            if warning:
                out.warnings.append(f"{name}: {warning}")
        out.partitions.append(p)
    return out


def load_partitions(path: Path, text: str | None = None) -> Partitions:
    """A partitions TOML (``*.toml``) or the saved output of ``SINFO_COMMAND`` (anything else).
    ``text`` is the content when it does not come from the file (stdin)."""
    if text is None:
        if not Path(path).is_file():
            raise UsageError(f"--partitions {path}: no such file")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--partitions {path}: cannot read: {e}") from None
    if str(path).endswith(".toml"):
        return parse_partitions_toml(text, str(path))
    return parse_sinfo(text, str(path))


# ---------------------------------------------------------------- fitting


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

    def as_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "min_gpu_gb": self.min_gpu_gb, "note": self.note,
                "partitions": [{"partition": f.partition.name, "gpu": f.partition.gpu,
                                "gpu_memory_gb": f.partition.gpu_memory_gb, "fits": f.fits, "reason": f.reason,
                                "tp": f.tp, "instances": f.instances, "gpus": f.gpus, "capped": f.capped,
                                "rate_per_gpu": f.rate_per_gpu, "hours": round(f.hours, 2), "shards": f.shards,
                                "time_limit": f.partition.time_limit, "split_pages": f.pages, "split_docs": f.docs,
                                "split_hours": round(f.part_hours, 2), "split_shards": f.part_shards,
                                "manifest": self.split_files.get(f.partition.name)}
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
    fits.sort(key=lambda f: (0, f.tp, f.partition.gpu_memory_gb or 0.0, f.partition.name) if f.fits else (1,))
    note = ""
    if not any(f.fits for f in fits):
        note = f"{profile} (needs {min_gpu_gb:g} GB) fits no partition: " + "; ".join(
            f"{f.partition.name}: {f.reason}" for f in fits)
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
    parts: dict[str, list[SplitDoc]] = {f.partition.name: [] for f in fits}
    load = {f.partition.name: 0.0 for f in fits}
    speed = {f.partition.name: f.throughput for f in fits}
    order = [f.partition.name for f in fits]  # preference order breaks ties
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
        mine = parts[f.partition.name]
        pages = sum(d.weight for d in mine)
        f.docs, f.pages = len(mine), round(pages)
        work = pages * (1 + retry_overhead)
        f.part_hours = work / f.throughput if work else 0.0
        f.part_shards = shards_for(work, f.rate_per_gpu * f.tp, f.instances, f.partition.time_limit_hours)
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
        long = [(d.doc_id, hours) for d in parts.get(f.partition.name, [])
                if (hours := d.weight * (1 + retry_overhead) / (f.rate_per_gpu * f.tp)) > budget]
        if long:
            named = ", ".join(f"{doc} ({_hours(h)})" for doc, h in long[:3]) + (" …" if len(long) > 3 else "")
            out.append(f"{placement.profile} on {f.partition.name}: {len(long)} document(s) alone outrun the "
                       f"{f.partition.time_limit} limit on one instance: {named}; they finish over resubmits")
    return out


def write_split(parts: dict[str, list[SplitDoc]], out_dir: Path, profile: str) -> dict[str, str]:
    """One manifest per part, DIR/PROFILE-PARTITION.csv (doc_id,path[,pages,…]), priority order kept."""
    from ..sources import neutralise_cell
    from ..store import write_text_atomic

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
    task (the tensor parallel size), the time limit, and --max-running under a per-user cap."""
    p = f.partition
    gpus = f"{p.gres}:{f.tp}" if p.gres else str(f.tp)
    argv = ["vlmocr", "slurm", "submit", "--manifest", manifest, "--out", run, "--part", p.name,
            "--partition", p.name, "--shards", str(f.part_shards or f.shards), "--gpus-per-task", gpus]
    if p.time_limit_hours is not None:
        argv += ["--time", p.time_limit]
    if f.capped and (f.part_shards or f.shards) > f.instances:
        argv += ["--max-running", str(f.instances)]
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
    from ..sources import from_manifest

    docs: list[SplitDoc] = []
    unknown: list[str] = []
    for d in from_manifest(manifest):
        row = rows.get(d.doc_id)
        if row is None:
            unknown.append(d.doc_id)
            weight = float(len(d.pages) if d.pages else 1)
        else:
            total = int(row["pages"] or 0)
            ocr = total - estimated_text_pages(row)
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

    def as_dict(self) -> dict[str, Any]:
        return {"partitions_source": self.partitions.source, "ocr_pages": self.ocr_pages,
                "warnings": self.partitions.warnings + self.warnings,
                "profiles": [{**pl.as_dict(), "commands": self.commands.get(pl.profile, [])}
                             for pl in self.placements]}


def plan_partitions(partitions: Partitions, profiles: list[tuple[str, float | None]], triage_csv: Path,
                    ocr_pages: int, pages_per_hour: float | None, retry_overhead: float,
                    manifest: Path | None = None, split_out: Path | None = None,
                    run: str = "RUN") -> PartitionPlan:
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
        if docs is None:
            docs, warnings = documents_to_split(triage_csv, manifest)
            plan.warnings += warnings
        if len(fitting) > 1 or split_out is not None:
            parts = apply_split(placement, docs, retry_overhead)
            plan.warnings += too_long(placement, parts, retry_overhead)
            if split_out is not None:
                placement.split_files = write_split(parts, Path(split_out), name)
            plan.commands[name] = [
                submit_command(name, f, placement.split_files.get(f.partition.name, f"{name}-{f.partition.name}.csv"),
                               run)
                for f in fitting if f.docs]
        else:
            only = fitting[0]
            only.docs, only.pages, only.part_hours, only.part_shards = len(docs), ocr_pages, only.hours, only.shards
            plan.commands[name] = [submit_command(name, only, str(manifest) if manifest else "MANIFEST.csv", run)]
    return plan


def _hours(h: float) -> str:
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    return f"{h:.0f} h ({h / 24:.1f} days)"


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
                      f"(+{plan.retry_overhead:.0%} retries) in {_hours(f.hours)}; {limit}\n")
        fitting = pl.fitting
        out.write(f"  Preferred: {fitting[0].partition.name} (the smallest GPU that holds it"
                  + (", tensor parallel" if fitting[0].tp > 1 else "") + ").\n")
        if len(fitting) > 1:
            finish = max(f.part_hours for f in fitting)
            out.write(f"  Split over the {len(fitting)} partitions that fit (pages by throughput, whole documents; "
                      f"all parts done in about {_hours(finish)}):\n")
            for f in fitting:
                out.write(f"    {f.partition.name}: {f.docs:,} documents, {f.pages:,} pages, {_hours(f.part_hours)}, "
                          f"{_n(f.part_shards, 'shard')}" + (f" -> {pl.split_files[f.partition.name]}"
                                                       if f.partition.name in pl.split_files else "") + "\n")
        for cmd in plan.commands.get(pl.profile, []):
            out.write(f"  $ {cmd}\n")
    return out.getvalue()
