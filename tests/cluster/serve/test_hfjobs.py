"""`vlmocr serve --target hf-jobs --print`: the `hf jobs run` command of a profile, with the image,
flavor, timeout and start-up of seed 004 ("Serve Unlimited-OCR as a live endpoint on HF Jobs")."""

from __future__ import annotations

import json
import shlex

import pytest

from support.cli import run_cli
from support.serve_standin import UNLIMITED, fake_env
from vlmocr.exceptions import ExitCode
from vlmocr.profiles import load_profile
from vlmocr.testing.fake_hfjobs import serve_hfjobs_in_thread

pytestmark = pytest.mark.timeout(180)

# Seed 004, quoted. Option A: "Use the default `:unlimited-ocr` tag on L4/A100, or
# `:unlimited-ocr-cu129` on Hopper. Runs on `l4x1`". Option B: "Pin the image to
# `lmsysorg/sglang:v0.5.10.post1` — *not* `:latest`" and "Run on `a100-large` with
# `--attention-backend flashinfer`, not `h200`/`fa3`", after installing the model's wheel:
SEED_VLLM_IMAGE = "vllm/vllm-openai:unlimited-ocr"
SEED_VLLM_HOPPER_IMAGE = "vllm/vllm-openai:unlimited-ocr-cu129"
SEED_SGLANG_IMAGE = "lmsysorg/sglang:v0.5.10.post1"
SEED_WHEEL = ("pip install --no-deps https://github.com/baidu/Unlimited-OCR/raw/main/wheel/"
              "sglang-0.0.0.dev11416+g92e8bb79e-py3-none-any.whl")
SEED_KERNELS = "pip install -q kernels==0.11.7"
SEED_SGLANG_FLAGS = ("--attention-backend flashinfer --page-size 1 --mem-fraction-static 0.85 --context-length 32768 "
                     "--enable-custom-logit-processor --disable-overlap-schedule --skip-server-warmup")


def printed(*args: str, env: dict, extra: tuple[str, ...] = ()) -> list[str]:
    res = run_cli("serve", *args, "--target", "hf-jobs", "--print", *(("--", *extra) if extra else ()), env=env)
    assert res.returncode == 0, res.stderr
    return shlex.split(res.stdout.strip())


def option(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_print_is_the_seeds_vllm_command(tmp_path, scratch):
    env = fake_env(tmp_path, scratch)
    cmd = printed("unlimited-ocr", env=env)
    args = load_profile("unlimited-ocr").serve["vllm"].args
    # seed: hf jobs run --detach --expose 8000 --flavor l4x1 -s HF_TOKEN --timeout 30m vllm/vllm-openai:unlimited-ocr --
    # … --logits_processors vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor: Baidu's image has
    # the processor (the image's part of the recipe), whatever pip's vLLM has (issue 25).
    assert cmd == [
        "hf", "jobs", "run", "--detach", "--expose", "8000", "--flavor", "l4x1", "--timeout", "30m",
        "-e", "VLLM_USE_FLASHINFER_SAMPLER=0", "-e", "VLLM_NO_USAGE_STATS=1", "-s", "HF_TOKEN", SEED_VLLM_IMAGE, "--",
        "vllm", "serve", UNLIMITED, "--host", "0.0.0.0", "--port", "8000", "--served-model-name", UNLIMITED, *args,
        "--logits-processors", "vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor",
    ]
    # the -cu129 tag on Hopper; tensor parallel from the flavor; given flags after the profile's
    cmd = printed("unlimited-ocr", "--flavor", "h200x2", "--timeout", "3h", "--revision", "abc123",
                  extra=("--max-num-seqs", "16"), env=env)
    assert option(cmd, "--flavor") == "h200x2" and option(cmd, "--timeout") == "3h"
    assert cmd[cmd.index("--") - 1] == SEED_VLLM_HOPPER_IMAGE
    assert cmd[-4:] == ["--tensor-parallel-size", "2", "--max-num-seqs", "16"] and option(cmd, "--revision") == "abc123"


def test_print_is_the_seeds_sglang_command(tmp_path, scratch):
    env = fake_env(tmp_path, scratch)
    cmd = printed("unlimited-ocr", "--server", "sglang", env=env)
    assert cmd[:cmd.index("--")] == ["hf", "jobs", "run", "--detach", "--expose", "10000", "--flavor", "a100-large",
                                     "--timeout", "30m", "-s", "HF_TOKEN", SEED_SGLANG_IMAGE]
    # "`--` before `bash` is required, or the CLI parses `-lc` as its own flags."
    assert cmd[cmd.index("--") + 1:cmd.index("--") + 3] == ["bash", "-lc"]
    script = cmd[-1]
    steps = script.split(" && ")
    assert steps[:2] == [SEED_WHEEL, SEED_KERNELS]  # the model's wheel before the server, in the seed's order
    launch = shlex.split(steps[2])
    assert launch[:4] == ["exec", "python3", "-m", "sglang.launch_server"]
    assert SEED_SGLANG_FLAGS in shlex.join(launch)  # flag for flag, on a100-large
    assert option(launch, "--port") == "10000" and option(launch, "--host") == "0.0.0.0"
    # fa3 only on Hopper: the flavor's GPU decides, as nvidia-smi's does for a local server
    res = run_cli("serve", "unlimited-ocr", "--server", "sglang", "--flavor", "h200", "--target", "hf-jobs",
                  "--print", env=env)
    launch = shlex.split(shlex.split(res.stdout.strip())[-1].split(" && ")[-1])
    assert option(launch, "--attention-backend") == "fa3" and "Hopper" in res.stderr
    assert shlex.split(res.stdout.strip())[shlex.split(res.stdout.strip()).index("--") - 1] == SEED_SGLANG_IMAGE


def test_print_contacts_nothing_and_names_an_unpinned_image(tmp_path, scratch):
    """A profile that pins no image gets the stock one, said as a warning; --print asks no API."""
    with serve_hfjobs_in_thread("hf_never_used") as jobs:
        env = fake_env(tmp_path, scratch, HF_ENDPOINT=jobs.url, HF_TOKEN="hf_never_used")
        res = run_cli("serve", "qwen3-vl", "--target", "hf-jobs", "--print", env=env)
        assert res.returncode == 0, res.stderr
        cmd = shlex.split(res.stdout.strip())
        assert option(cmd, "--flavor") == "a10g-large" and option(cmd, "--timeout") == "30m"
        assert "vllm/vllm-openai:latest" in cmd and "pins no image" in res.stderr
        assert json.loads(option(cmd, "--limit-mm-per-prompt")) == {"image": 1, "video": 0}  # JSON flags inline
        assert jobs.state.requests == []


@pytest.mark.parametrize(("args", "refused"), [
    (["--timeout", "3x"], "--timeout '3x'"),
    (["--timeout", "0m"], "--timeout '0m'"),
    (["--flavor", "a100\ntouch injected"], "--flavor"),
    (["--stop", "abc"], "--target hf-jobs"),
])
def test_bad_hf_jobs_options_are_one_line_usage_errors(tmp_path, scratch, args, refused):
    env = fake_env(tmp_path, scratch)
    target = [] if "--stop" in args else ["--target", "hf-jobs", "--print"]
    res = run_cli("serve", "unlimited-ocr", *target, *args, env=env)
    assert res.returncode == ExitCode.usage and refused in res.stderr and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_a_profile_cannot_pin_latest(tmp_path):
    profile = tmp_path / "drifting.toml"
    profile.write_text('name = "drifting"\nmodel = "org/m"\nprompt = "Read."\n'
                       '[serve.sglang.hf_jobs]\nimage = "lmsysorg/sglang:latest"\n', encoding="utf-8")
    res = run_cli("serve", str(profile), "--server", "sglang", "--target", "hf-jobs", "--print")
    assert res.returncode == ExitCode.usage and "not pinned" in res.stderr
