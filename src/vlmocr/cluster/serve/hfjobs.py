"""``vlmocr serve --target hf-jobs``: the same server as a Hugging Face job (``hf jobs run``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from ...exceptions import UsageError
from ...profiles import Profile
from .plan import VLLM_ENV, check_extra_args, choose_model, refuse_control_characters, tp_from_extra

HF_JOBS_IMAGES = {"vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:latest"}
HF_JOBS_FLAVOR = "a10g-large"
HF_JOBS_TIMEOUT = "2h"
HF_JOBS_PORT = 8000


def hf_jobs_command(
    profile: Profile | str,
    server: str = "vllm",
    model_path: str | None = None,
    revision: str | None = None,
    extra_args: Sequence[str] = (),
    *,
    port: int | None = None,
    flavor: str = HF_JOBS_FLAVOR,
    timeout: str = HF_JOBS_TIMEOUT,
    image: str | None = None,
    no_p2p: bool = False,
    served_name: str | None = None,
) -> list[str]:
    """``hf jobs run --detach --expose PORT --flavor … --timeout … IMAGE -- <server command>``.

    The job runs in a fresh container with internet access, so it is online (it downloads the
    model, authenticated by the forwarded ``HF_TOKEN`` secret), listens on 0.0.0.0, and its JSON
    flags are inline (a local args file does not exist there). Tensor parallelism comes from the
    flavor's ``xN`` suffix (``a10g-largex2`` → 2)."""
    prof, model, rev, name = choose_model(profile, server, model_path, revision, served_name, hint="REPO_ID")
    if Path(model).expanduser().exists():
        raise UsageError(f"{model} is a local path; a Hugging Face job needs a repo id (--model-path ORG/NAME)")
    refuse_control_characters({"--model-path" if model_path else f"profile {prof.name}: model": model,
                                "--revision": rev, "--served-model-name": name, "--image": image,
                                "--flavor": flavor, "--timeout": timeout})
    the_port = port or HF_JOBS_PORT
    extra = [str(a) for a in extra_args]
    check_extra_args(server, extra, uses_config=False)
    spec = prof.serve.get(server)  # type: ignore[call-overload]
    match = re.search(r"x(\d+)$", flavor)
    tp = int(match.group(1)) if match else 1
    if server == "vllm":
        cmd = ["vllm", "serve", model]
    else:
        cmd = ["python3", "-m", "sglang.launch_server", "--model-path", model]
    if rev:
        cmd += ["--revision", rev]
    cmd += ["--host", "0.0.0.0", "--port", str(the_port), "--served-model-name", name]
    if spec:
        cmd += list(spec.args)
        for flag, value in spec.json_args.items():
            cmd += [flag, json.dumps(value, separators=(",", ":"), sort_keys=True)]
    if tp > 1 and tp_from_extra(server, extra) is None:
        cmd += ["--tensor-parallel-size" if server == "vllm" else "--tp", str(tp)]
    if no_p2p:
        cmd.append("--disable-custom-all-reduce")
    cmd += extra

    env: dict[str, str] = dict(VLLM_ENV) if server == "vllm" else {}
    env.update({str(k): str(v) for k, v in (spec.env if spec else {}).items()})
    if no_p2p:
        env["NCCL_P2P_DISABLE"] = "1"
    hf = ["hf", "jobs", "run", "--detach", "--expose", str(the_port), "--flavor", flavor, "--timeout", timeout]
    for k, v in env.items():
        hf += ["-e", f"{k}={v}"]
    hf += ["-s", "HF_TOKEN", image or HF_JOBS_IMAGES[server], "--", *cmd]
    return hf
