"""``vlmocr serve --target hf-jobs``: the same server as a Hugging Face job — what it runs.

``hf_job_plan`` decides the job (image, flavor, timeout, exposed port, the container's command
and environment); ``HfJobPlan.hf_command`` is the equivalent ``hf jobs run`` command that
``--print`` shows, and ``hfjob_launch`` starts the plan through huggingface_hub's Jobs API.

The image and flavor are pinned per profile (``[serve.<server>.hf_jobs]``, seed 004: SGLang on
``lmsysorg/sglang:v0.5.10.post1`` "not `:latest`" on ``a100-large``; vLLM on
``vllm/vllm-openai:unlimited-ocr`` on ``l4x1``, its ``-cu129`` tag on Hopper), and the model's
own wheel is installed first where the image lacks it. The job runs in a fresh container with
internet access, so it is online (it downloads the model, authenticated by the ``HF_TOKEN``
secret), listens on 0.0.0.0, and its JSON flags are inline (a local args file does not exist
there). Tensor parallelism comes from the flavor's ``xN`` suffix (``a10g-largex2`` → 2); the
attention backend a profile leaves to vlmocr ("auto") from the flavor's GPU."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...exceptions import UsageError
from ...profiles import Profile
from .attention import AUTO, AttentionChoice, decide_backend
from .plan import (
    TP_FLAG,
    VLLM_ENV,
    check_extra_args,
    choose_model,
    refuse_control_characters,
    tp_from_extra,
)
from .version import recipe_for_image

# The ports seed 004's commands expose (vLLM 8000, SGLang 10000).
HF_JOBS_PORTS = {"vllm": 8000, "sglang": 10000}
HF_JOBS_TIMEOUT = "30m"  # seed 004: "--timeout stops the endpoint (and billing) at the deadline"
HF_JOBS_FLAVOR = "a10g-large"  # a profile that names no flavor
# A profile that pins no image: SGLang's is the seed's last release matching the model wheels it
# names; vLLM's stock image has no better pin here, so using it is said once as a warning.
HF_JOBS_IMAGES = {"vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:v0.5.10.post1"}
# The GPU of each flavor family (by name prefix, longest first), for the Hopper image and the
# attention backend: HF Jobs names its hardware, it never runs our nvidia-smi before the job.
FLAVOR_COMPUTE_CAP = (("rtx-pro-6000", "12.0"), ("a10g", "8.6"), ("a100", "8.0"), ("h100", "9.0"),
                      ("h200", "9.0"), ("l40s", "8.9"), ("l4", "8.9"), ("t4", "7.5"))
_TIMEOUT_RE = re.compile(r"\d+(\.\d+)?[smhd]?")


def flavor_compute_cap(flavor: str) -> str | None:
    return next((cap for prefix, cap in FLAVOR_COMPUTE_CAP if flavor.startswith(prefix)), None)


def is_hopper(flavor: str) -> bool:
    cap = flavor_compute_cap(flavor)
    return cap is not None and cap.startswith("9.")


def check_timeout(timeout: str, what: str = "--timeout") -> str:
    """The job's maximum duration as the Jobs API takes it: a number with s, m, h or d."""
    if not _TIMEOUT_RE.fullmatch(timeout.strip()) or float(re.sub(r"[smhd]$", "", timeout.strip())) <= 0:
        raise UsageError(f"{what} {timeout!r}: give a duration such as 30m, 2h or 5400s")
    return timeout.strip()


def flavor_attention(setting: str, flavor: str, extra: Sequence[str]) -> AttentionChoice | None:
    """The --attention-backend of a job: as ``attention.choose_attention_backend`` decides for a
    local server, with the flavor's GPU in place of nvidia-smi's."""
    cap = flavor_compute_cap(flavor)
    choice = decide_backend(setting, extra, lambda: [cap] if cap else [], f"flavor {flavor} (GPU unknown)")
    if choice is not None and choice.source == AUTO and cap:
        return AttentionChoice(choice.backend, AUTO, f"flavor {flavor}, {choice.why}")
    return choice


@dataclass(frozen=True)
class HfJobPlan:
    """One job: what ``HfApi.run_job`` is given (the token is not part of it: it is added as the
    job's ``HF_TOKEN`` secret at launch, from the environment)."""

    profile: str
    server: str
    model: str
    served_name: str
    image: str
    flavor: str
    timeout: str
    port: int
    command: list[str]  # what the container runs
    env: dict[str, str]
    attention: AttentionChoice | None = None
    warnings: list[str] = field(default_factory=list)

    def hf_command(self) -> list[str]:
        """``hf jobs run --detach --expose PORT --flavor … --timeout … IMAGE -- <command>``."""
        hf = ["hf", "jobs", "run", "--detach", "--expose", str(self.port), "--flavor", self.flavor,
              "--timeout", self.timeout]
        for k, v in self.env.items():
            hf += ["-e", f"{k}={v}"]
        return [*hf, "-s", "HF_TOKEN", self.image, "--", *self.command]


def hf_job_plan(
    profile: Profile | str,
    server: str = "vllm",
    model_path: str | None = None,
    revision: str | None = None,
    extra_args: Sequence[str] = (),
    *,
    port: int | None = None,
    flavor: str | None = None,
    timeout: str | None = None,
    image: str | None = None,
    no_p2p: bool = False,
    served_name: str | None = None,
) -> HfJobPlan:
    prof, model, rev, name = choose_model(profile, server, model_path, revision, served_name, hint="REPO_ID")
    if Path(model).expanduser().exists():
        raise UsageError(f"{model} is a local path; a Hugging Face job needs a repo id (--model-path ORG/NAME)")
    spec = prof.serve.get(server)  # type: ignore[call-overload]
    pins = spec.hf_jobs if spec else None
    the_flavor = flavor or (pins.flavor if pins else "") or HF_JOBS_FLAVOR
    refuse_control_characters({"--model-path" if model_path else f"profile {prof.name}: model": model,
                               "--revision": rev, "--served-model-name": name, "--image": image,
                               "--flavor": the_flavor, "--timeout": timeout})
    the_timeout = check_timeout(timeout or HF_JOBS_TIMEOUT)
    warnings: list[str] = []
    if image:
        the_image = image
    elif pins and pins.image:
        the_image = pins.image_hopper if pins.image_hopper and is_hopper(the_flavor) else pins.image
    else:
        the_image = HF_JOBS_IMAGES[server]
        if the_image.endswith(":latest"):
            warnings.append(f"profile {prof.name} pins no image for {server} on HF Jobs: using {the_image}, "
                            "which changes under you; pin one with --image or [serve." + server + ".hf_jobs] image")
    the_port = port or HF_JOBS_PORTS[server]
    extra = [str(a) for a in extra_args]
    check_extra_args(server, extra, uses_config=False)
    match = re.search(r"x(\d+)$", the_flavor)
    tp = int(match.group(1)) if match else 1
    if server == "vllm":
        cmd = ["vllm", "serve", model]
    else:
        cmd = ["python3", "-m", "sglang.launch_server", "--model-path", model]
    if rev:
        cmd += ["--revision", rev]
    cmd += ["--host", "0.0.0.0", "--port", str(the_port), "--served-model-name", name]
    attention = flavor_attention(getattr(spec, "attention_backend", "") if spec else "", the_flavor, extra)
    if attention is not None and attention.source != "command line":
        cmd += ["--attention-backend", attention.backend]
    if spec:
        recipe = recipe_for_image(server, spec, the_image)
        spec = spec.with_part(recipe.part if recipe is not None else None)
        cmd += spec.argv()
    if tp > 1 and tp_from_extra(server, extra) is None:
        cmd += [TP_FLAG[server], str(tp)]
    if no_p2p:
        cmd.append("--disable-custom-all-reduce")
    cmd += extra
    if pins and pins.pip_install:
        # "--" before bash is required (seed 004) — hf_command puts it there; `exec` hands the
        # shell's process to the server, so the job's stop signal reaches the server itself.
        steps = [shlex.join(["pip", "install", *args]) for args in pins.pip_install]
        cmd = ["bash", "-lc", " && ".join([*steps, "exec " + shlex.join(cmd)])]

    env: dict[str, str] = dict(VLLM_ENV) if server == "vllm" else {}
    env.update({str(k): str(v) for k, v in (spec.env if spec else {}).items()})
    if no_p2p:
        env["NCCL_P2P_DISABLE"] = "1"
    return HfJobPlan(profile=prof.name, server=server, model=model, served_name=name, image=the_image,
                     flavor=the_flavor, timeout=the_timeout, port=the_port, command=cmd, env=env,
                     attention=attention, warnings=warnings)

