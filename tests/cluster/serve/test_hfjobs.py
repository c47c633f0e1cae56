"""`vlmocr serve --target hf-jobs`: the `hf jobs run` command for a profile."""

from __future__ import annotations

import json
import shlex

import pytest
from support.cli import run_cli
from support.serve_standin import UNLIMITED, fake_env

from vlmocr.profiles import load_profile


pytestmark = pytest.mark.timeout(180)


def test_hf_jobs_command(tmp_path, scratch):
    env = fake_env(tmp_path, scratch)
    res = run_cli("serve", "unlimited-ocr", "--target", "hf-jobs", "--flavor", "a10g-largex2", "--timeout", "3h",
                  "--revision", "abc123", "--", "--max-num-seqs", "16", env=env)
    assert res.returncode == 0, res.stderr
    args = load_profile("unlimited-ocr").serve["vllm"].args
    assert shlex.split(res.stdout.strip()) == [
        "hf", "jobs", "run", "--detach", "--expose", "8000", "--flavor", "a10g-largex2", "--timeout", "3h",
        "-e", "VLLM_USE_FLASHINFER_SAMPLER=0", "-e", "VLLM_NO_USAGE_STATS=1", "-s", "HF_TOKEN",
        "vllm/vllm-openai:latest", "--",
        "vllm", "serve", UNLIMITED, "--revision", "abc123", "--host", "0.0.0.0", "--port", "8000",
        "--served-model-name", UNLIMITED, *args, "--tensor-parallel-size", "2", "--max-num-seqs", "16",
    ]
    # defaults; JSON flags inline (no local args file inside the job)
    res = run_cli("serve", "qwen3-vl", "--target", "hf-jobs", env=env)
    cmd = shlex.split(res.stdout.strip())
    assert cmd[cmd.index("--flavor") + 1] == "a10g-large" and cmd[cmd.index("--timeout") + 1] == "2h"
    assert "vllm/vllm-openai:latest" in cmd
    assert json.loads(cmd[cmd.index("--limit-mm-per-prompt") + 1]) == {"image": 1, "video": 0}
