"""The attention backend a server starts with, when its profile asks vlmocr to choose
(``[serve.sglang] attention_backend = "auto"``).

Unlimited-OCR's SGLang recipe (its R-SWA decoder) names two backends: ``fa3``, the model card's
own, which needs a Hopper GPU (compute capability 9.x), and ``flashinfer``, which runs on the
A100/L4/A40 class and is what the recipe validated ("Run on `a100-large` with
`--attention-backend flashinfer`, not `h200`/`fa3`. `fa3` needs a Hopper GPU"). So: fa3 only
when every GPU this job sees is a Hopper, flashinfer otherwise — also when nvidia-smi cannot be
asked (a login node printing a command for later), since flashinfer starts on every GPU and fa3
fails on all but one generation. A profile pins a backend by naming it; ``--attention-backend``
among the extra server flags wins over both."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from .flags import flag_value
from .gpus import query_gpus

AUTO = "auto"
FLAG = "--attention-backend"
HOPPER_MAJOR = 9  # fa3 (FlashAttention 3) is built for sm90 only


@dataclass(frozen=True)
class AttentionChoice:
    """The backend, where it came from (auto, profile, command line) and why, as said and recorded."""

    backend: str
    source: str
    why: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def sentence(self) -> str:
        return f"attention backend {self.backend} ({self.why})"


def given_on_command_line(extra_args: Sequence[str]) -> str | None:
    """The value of ``--attention-backend`` among the extra server flags, if any."""
    return flag_value(extra_args, (FLAG,))


def backend_for(capabilities: Sequence[str]) -> tuple[str, str]:
    """fa3 when every compute capability is 9.x, else flashinfer; and why."""
    caps = ", ".join(dict.fromkeys(capabilities))
    majors = []
    for cap in capabilities:
        try:
            majors.append(int(cap.split(".", 1)[0]))
        except ValueError:
            majors.append(-1)
    if majors and all(m == HOPPER_MAJOR for m in majors):
        return "fa3", f"GPU compute capability {caps}: Hopper"
    return "flashinfer", f"GPU compute capability {caps}: fa3 needs a Hopper GPU (9.x)"


def decide_backend(setting: str, extra_args: Sequence[str], caps: Callable[[], list[str]],
                   where: str) -> AttentionChoice | None:
    """The backend for a profile's ``attention_backend`` setting: None when the profile leaves it
    to the server (empty), its value when it pins one, for ``auto`` the choice for the compute
    capabilities `caps()` gives (asked only then; `where` says whose: nvidia-smi's, a flavor's);
    a value among ``extra_args`` wins (the plan then adds no flag of its own)."""
    given = given_on_command_line(extra_args)
    if given is not None:
        return AttentionChoice(given, "command line", "given on the command line")
    if not setting:
        return None
    if setting != AUTO:
        return AttentionChoice(setting, "profile", "pinned by the profile")
    found = caps()
    if not found:
        return AttentionChoice("flashinfer", AUTO, f"{where} gave no compute capability: flashinfer runs on "
                                                   "every GPU, fa3 only on Hopper")
    backend, why = backend_for(found)
    return AttentionChoice(backend, AUTO, why)


def choose_attention_backend(setting: str, extra_args: Sequence[str] = (),
                             environ: Mapping[str, str] | None = None) -> AttentionChoice | None:
    """`decide_backend` with this machine's GPUs (nvidia-smi)."""
    def caps() -> list[str]:
        rows = query_gpus(("compute_cap",), environ)
        return [r["compute_cap"] for r in rows or () if r.get("compute_cap")]

    return decide_backend(setting, extra_args, caps, "nvidia-smi")


__all__ = ["AUTO", "FLAG", "AttentionChoice", "backend_for", "choose_attention_backend", "decide_backend",
           "given_on_command_line"]
