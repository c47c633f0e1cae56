"""A cluster's GPU partitions, from `sinfo` output or a small TOML, with each GPU's memory from
a table of GPU names (`vlmocr plan --partitions`; corpus/placement.py fits models on them).

The sinfo format read is exactly ``SINFO_COMMAND``'s: ``partition|gres|timelimit|nodes|cpus|memory``,
one line per group of like nodes. QOS limits (GPUs per user) are not in sinfo: state them in
the TOML."""

from __future__ import annotations

import re
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from ..exceptions import UsageError

SINFO_FORMAT = "%P|%G|%l|%D|%c|%m"
SINFO_COMMAND = f'sinfo -h -o "{SINFO_FORMAT}"'

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
# Cards whose multi-GPU nodes are PCIe pairs without a working NVLink (seed 001: two A40s hang at
# NCCL start-up until NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce). SXM cards (H100, H200,
# an A100 named SXM) have NVLink; a card sold both ways (A100, V100) is told by the job itself
# (`nvidia-smi topo -m`, cluster/serve/gpus.py).
PCIE_CARDS = frozenset({"a40", "l40", "l40s", "a6000", "rtxa6000", "rtx8000", "a30", "a10", "a10g", "l4", "a5000",
                        "rtxa5000", "a4000", "rtxa4000", "t4", "rtx2080ti", "2080ti", "rtx3090", "3090", "rtx4090",
                        "4090", "titanrtx", "rtx6000"})
INTERCONNECTS = ("pcie", "nvlink")
# Ampere cards (compute capability 8.x): vLLM's FP8 path failed there for seed 001
# (`cutlass_scaled_mm_sm80`) while seed 000 ran FP8 on A40s and A100s through the weight-only kernels.
AMPERE_CARDS = frozenset({"a40", "a100", "a30", "a10", "a10g", "a6000", "rtxa6000", "a5000", "rtxa5000", "a4000",
                          "rtxa4000", "a16", "a2", "rtx3090", "3090", "rtx3080", "3080"})
FP8_ON_AMPERE = ("FP8 on Ampere (compute capability 8.x): seed 000 ran --quantization fp8 on A40s and A100s through "
                 "vLLM's weight-only kernels, seed 001 saw it fail there (cutlass_scaled_mm_sm80); if the server "
                 "does not start, serve bf16 on more GPUs (docs/troubleshooting.md)")


def _card_key(name: str) -> str:
    """A card's name as the tables spell it: lowercase letters and digits, no size suffix, no
    vendor word ("NVIDIA A100-SXM4-80GB" → "a100sxm4", "a100_80g" → "a100")."""
    key = re.sub(r"[^a-z0-9]", "", _SIZE_SUFFIX.sub("", name.strip().lower()))
    for word in _VENDOR_WORDS:
        key = key.replace(word, "")
    return key


def is_ampere(name: str) -> bool:
    return _card_key(name) in AMPERE_CARDS
# A size in the name: a100_80g, a100-80gb, v100_32g, or a MIG slice 3g.40gb.
_SIZE_SUFFIX = re.compile(r"[_\-.](\d{2,3})g(?:b)?$")
_GRES_GPU = re.compile(r"^gpu(?::([^:()]+))?(?::(\d+))?(?:\(.*\))?$")


def gpu_memory(name: str) -> tuple[float | None, str]:
    """(GB, warning) for a GPU name: a size suffix wins; a card of one size is looked up; a card
    sold in several sizes, or an unknown one, gives the smallest size or None and a warning,
    never a silent guess."""
    low = name.strip().lower()
    if m := _SIZE_SUFFIX.search(low):
        return float(m.group(1)), ""
    known = GPU_MEMORY_GB.get(_card_key(low))
    if known is None:
        return None, f"GPU {name!r} is not in the table of GPU memory: give gpu_memory_gb in a partitions TOML"
    if isinstance(known, tuple):
        sizes = " or ".join(f"{g:g}" for g in known)
        return float(min(known)), (f"GPU {name!r} comes with {sizes} GB and its name does not say which: "
                                   f"assumed {min(known):g} GB; give gpu_memory_gb in a partitions TOML")
    return float(known), ""


def gpu_interconnect(name: str) -> str:
    """"pcie" for a card whose nodes have no NVLink between GPUs, "nvlink" for an SXM card,
    "" when the name does not tell."""
    low = name.strip().lower()
    if "sxm" in low or "nvl" in low or low.startswith(("h100", "h200", "gh200", "nvidia-h100", "nvidia-h200")):
        return "nvlink"
    return "pcie" if _card_key(low) in PCIE_CARDS or "pcie" in low else ""


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
    interconnect: str = ""  # between a node's GPUs: "pcie", "nvlink", "" unknown (TOML key, else the card)
    # The part of a split this entry gets (`slurm submit --part`): the partition's name, or, for a
    # partition with several GPU types, NAME-TYPE, so each type has its own share, file and --gres.
    part: str = ""

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def part_name(self) -> str:
        return self.part or self.name


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
    text = text.removeprefix("\ufeff")  # a file saved by an editor that writes a BOM
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if bad := [c for c in line if unicodedata.category(c) in ("Cc", "Cf") and c != "\t"]:
            raise UsageError(f"{source}:{n}: a control character ({ascii(bad[0])}) in the line: not the output of "
                             f"`{SINFO_COMMAND}`")
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
        if node_count < 0:
            raise UsageError(f"{source}:{n}: nodes {nodes!r}: a partition has no negative number of nodes")
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
        p.interconnect = gpu_interconnect(gpu)
        merged[key] = p
        out.partitions.append(p)
    if not out.partitions:
        raise UsageError(f"{source}: no partitions in it (run `{SINFO_COMMAND}` and save its output)")
    name_parts(out.partitions)
    return out


def name_parts(partitions: list[Partition]) -> None:
    """A partition with several GPU types is several parts: NAME-TYPE each (both halves
    got every document and one shared split file)."""
    counts: dict[str, int] = {}
    for p in partitions:
        counts[p.name] = counts.get(p.name, 0) + 1
    for p in partitions:
        if counts[p.name] > 1:
            kind = re.sub(r"[^A-Za-z0-9_.-]+", "_", p.gres or p.gpu or "nogpu")
            p.part = f"{p.name}-{kind}"


def _int(text: str) -> int | None:
    try:
        return int(text.rstrip("+"))
    except ValueError:
        return None


_TOML_KEYS = {"gpu", "gpu_memory_gb", "gpus_per_node", "nodes", "time_limit", "max_gpus_per_user",
              "pages_per_hour_per_gpu", "gres", "interconnect"}


def parse_partitions_toml(text: str, source: str) -> Partitions:
    """``[partition.NAME]`` tables: gpu, gpu_memory_gb (else from the GPU table), gpus_per_node,
    nodes (1), time_limit ("7-00:00:00"), max_gpus_per_user, pages_per_hour_per_gpu, gres,
    interconnect ("pcie" or "nvlink" between a node's GPUs; else told by the card's name)."""
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
                          gres=str(spec.get("gres", "")),
                          interconnect=str(spec.get("interconnect", "")) or gpu_interconnect(gpu))
        except (TypeError, ValueError) as e:
            raise UsageError(f"{where}: {e}") from None
        if min(per_node, nodes) < 0 or nodes < 1 or (p.max_gpus_per_user is not None and p.max_gpus_per_user < 1) \
                or (p.pages_per_hour_per_gpu is not None and p.pages_per_hour_per_gpu <= 0) \
                or (p.gpu_memory_gb is not None and p.gpu_memory_gb <= 0):
            raise UsageError(f"{where}: counts, memory and rates must be positive")
        if p.interconnect not in ("", *INTERCONNECTS):
            raise UsageError(f"{where}: interconnect {p.interconnect!r}: use one of {', '.join(INTERCONNECTS)}")
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
