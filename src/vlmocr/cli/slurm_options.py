"""The SLURM options of the submitting `vlmocr slurm` commands (--partition … --json), each
defined once here with its help, instead of again in every command.

`@slurm_options(KIND)` adds them to a command's signature, where typer lists them (the #SBATCH
ones where the command's ``slurm`` parameter stands, --python --dry-run --json last), and hands
the command one `SlurmRequest` in that parameter.
KIND picks the wording: one job (grid, describe), a CPU job (fetch: no GPU, no warning signal),
an array of tasks (submit), a gated array (gate)."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import typer

from ..cluster.slurm.script import DEFAULT_SIGNAL_LEAD, SlurmOptions

JOB, CPU_JOB, ARRAY, GATE = "job", "cpu job", "array", "gate"
_ANY = "any"  # the wording of every kind not named


@dataclass(frozen=True)
class SlurmRequest:
    """What a command was told about its job: the #SBATCH settings, and how to submit them."""

    options: SlurmOptions
    python: Optional[str]  # the Python that runs vlmocr on the node; None: this one
    dry_run: bool
    json: bool


@dataclass(frozen=True)
class _Spec:
    name: str  # the parameter: a SlurmOptions field (sbatch_arg: its extra), or a SlurmRequest one
    annotation: Any
    default: Any
    help: dict[str, Optional[str]]  # kind (or _ANY) -> help; None or no entry: not offered
    decls: tuple[str, ...] = ()  # the spelling, where typer's from the name is not it
    absent: Any = None  # the value where the kind does not offer the option


_SPECS = (
    _Spec("partition", Optional[str], None, {_ANY: "SLURM partition.",
                                             CPU_JOB: "SLURM partition (a CPU one, e.g. cpu-short)."}),
    _Spec("gpus_per_task", Optional[str], None, {_ANY: "GPUs for the job, e.g. 1 or a100:1.", CPU_JOB: None,
                                                 ARRAY: "GPUs per task, e.g. 1 or a100:1.", GATE: "GPUs per task."}),
    _Spec("cpus_per_task", Optional[int], None, {_ANY: "CPUs for the job.", ARRAY: "CPUs per task.",
                                                 GATE: "CPUs per task."}),
    _Spec("time", Optional[str], None, {_ANY: "Time limit, e.g. 2:00:00.",
                                        ARRAY: "Time limit per task, e.g. 4:00:00.", GATE: "Time limit per task."},
          decls=("--time",)),
    _Spec("mem", Optional[str], None, {_ANY: "Memory, e.g. 32G.", CPU_JOB: "Memory, e.g. 8G.",
                                       ARRAY: "Memory per node, e.g. 32G.", GATE: "Memory per node."}),
    _Spec("account", Optional[str], None, {_ANY: "SLURM account."}),
    _Spec("qos", Optional[str], None, {_ANY: "SLURM QOS."}),
    _Spec("constraint", Optional[str], None, {_ANY: "SLURM node constraint."}),
    _Spec("mail_user", Optional[str], None, {_ANY: "Mail this address when the job ends or fails.",
                                             ARRAY: "Mail this address when tasks end or fail.",
                                             GATE: "Mail this address when jobs end or fail."}),
    _Spec("mail_type", str, "END,FAIL", {_ANY: "SLURM --mail-type."}),
    # a download has nothing to save before its time limit: no warning signal
    _Spec("signal_lead", int, DEFAULT_SIGNAL_LEAD, {_ANY: "Seconds before the limit the batch shell gets SIGTERM.",
                                                    CPU_JOB: None}, absent=0),
    _Spec("max_running", Optional[int], None, {ARRAY: "At most this many array tasks at once (--array=1-N%M).",
                                               GATE: "At most this many bulk tasks at once."}),
    _Spec("no_p2p", bool, False, {_ANY: "The GPUs have no working peer-to-peer (PCIe pairs without NVLink): "
                                        "the server starts with NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce.",
                                  CPU_JOB: None}, decls=("--no-p2p",), absent=False),
    _Spec("sbatch_arg", Optional[List[str]], None, {_ANY: "Another #SBATCH option (repeatable).",
                                                    ARRAY: "Another #SBATCH option, e.g. --exclusive (repeatable)."}),
    _Spec("python", Optional[str], None, {_ANY: "Python that runs vlmocr on the node (default: this one).",
                                          ARRAY: "Python that runs vlmocr on the nodes (default: this one).",
                                          GATE: "Python that runs vlmocr on the nodes (default: this one)."}),
    _Spec("dry_run", bool, False, {_ANY: "Write the script; do not submit.",
                                   ARRAY: "Stage and write the script; do not submit.",
                                   GATE: "Stage and write the scripts; do not submit."}, decls=("--dry-run",)),
    _Spec("json", bool, False, {_ANY: "Machine-readable result on stdout."}, decls=("--json",)),
)


_LAST = ("python", "dry_run", "json")  # how to submit: listed after all of a command's own options


def _help(spec: _Spec, kind: str) -> Optional[str]:
    return spec.help[kind] if kind in spec.help else spec.help.get(_ANY)


def slurm_request(kind: str, values: dict[str, Any]) -> SlurmRequest:
    """The SlurmRequest from the parsed option values, by name; an option the kind does not
    offer takes its absent value."""
    got = {s.name: values[s.name] if _help(s, kind) is not None else s.absent for s in _SPECS}
    python, dry_run, json_out = got.pop("python"), bool(got.pop("dry_run")), bool(got.pop("json"))
    got["extra"] = list(got.pop("sbatch_arg") or [])
    return SlurmRequest(SlurmOptions(**got), python=python, dry_run=dry_run, json=json_out)


def slurm_options(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the SLURM options of KIND; it gets them as ``slurm``.

    typer reads a command's options from its signature: the wrapper's signature is the
    command's, with the keyword-only ``slurm: SlurmRequest`` replaced by the #SBATCH options and
    --python --dry-run --json appended."""
    specs = [s for s in _SPECS if _help(s, kind) is not None]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(command, eval_str=True)
        slot = sig.parameters.get("slurm")
        if slot is None or slot.kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"{command.__name__} has no keyword-only `slurm` parameter for its SLURM options")
        own = list(sig.parameters.values())
        at = own.index(slot)
        added = {s.name: inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, annotation=s.annotation,
                                           default=typer.Option(s.default, *s.decls, help=_help(s, kind)))
                 for s in specs}
        scheduler = [p for name, p in added.items() if name not in _LAST]
        params = [*own[:at], *scheduler, *own[at + 1:], *(added[name] for name in _LAST)]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {s.name: kwargs.pop(s.name) for s in specs}
            return command(*args, slurm=slurm_request(kind, values), **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
        return wrapper

    return decorate
