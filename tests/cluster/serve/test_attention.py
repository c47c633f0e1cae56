"""The attention backend of an SGLang server, chosen by the GPU (issue 17, point 2): the stand-in
`nvidia-smi` (tests/cluster/bin) says which GPU this is, the stand-in server records the command
line it was started with, and that command line must be the Unlimited-OCR serving recipe's."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

from support.cli import run_cli
from support.serve_standin import (
    UNLIMITED,
    bin_len,
    fake_env,
    gone,
    launch,
    read_record,
    with_nvidia_smi,
)

pytestmark = pytest.mark.timeout(180)

# The recipe (HF Jobs serving recipe for Unlimited-OCR, Option B): "Run on `a100-large` with
# `--attention-backend flashinfer`, not `h200`/`fa3`. `fa3` needs a Hopper GPU"; its command, as written:
RECIPE = ("--attention-backend flashinfer --page-size 1 --mem-fraction-static 0.85 --context-length 32768 "
          "--enable-custom-logit-processor --disable-overlap-schedule --skip-server-warmup")
A100 = {"name": "NVIDIA A100-SXM4-80GB", "memory.total": "81920 MiB", "memory.used": "0 MiB", "compute_cap": "8.0"}
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory.total": "81559 MiB", "memory.used": "0 MiB", "compute_cap": "9.0"}


def gpus(*table: dict[str, str]) -> str:
    return json.dumps(list(table))


def recipe_with(backend: str) -> list[str]:
    flags = RECIPE.split()
    flags[flags.index("--attention-backend") + 1] = backend
    return flags


def capability_queries(log: Path) -> list[list[str]]:
    """The stand-in nvidia-smi's calls that asked for the compute capability."""
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [call for call in calls if any("compute_cap" in arg for arg in call)]


def smi(**fake: str) -> dict[str, str]:
    """The environment additions putting the `nvidia-smi` stand-in first on PATH."""
    return with_nvidia_smi({"PATH": os.environ["PATH"]}, **fake)


def test_on_an_a100_sglang_starts_exactly_as_the_recipe_says(tmp_path, scratch):
    log = tmp_path / "smi.log"
    env = smi(gpus=gpus(A100), log=str(log))
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", "sglang", env_extra=env)
    assert rec["argv"] == ["--model-path", UNLIMITED, "--host", "127.0.0.1", "--port", str(info.port),
                           "--served-model-name", UNLIMITED, *RECIPE.split()]
    assert info.attention == {"backend": "flashinfer", "source": "auto",
                              "why": "GPU compute capability 8.0: fa3 needs a Hopper GPU (9.x)"}
    # The question asked is the compute capability, as `nvidia-smi --query-gpu=compute_cap` answers it
    # (the server's provenance asks name and memory once it is ready: cluster/serve/gpus.py).
    assert capability_queries(log) == [["--query-gpu=compute_cap", "--format=csv,noheader"]]


def test_on_a_hopper_sglang_starts_with_fa3(tmp_path, scratch):
    env = smi(gpus=gpus(H100, H100))
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", "sglang", env_extra={**env, "CUDA_VISIBLE_DEVICES": "0,1"})
    tail = rec["argv"][rec["argv"].index("--served-model-name") + 2:]
    assert tail == [*recipe_with("fa3"), "--tp-size", "2"]
    assert info.attention is not None and info.attention["backend"] == "fa3"
    assert info.attention["why"] == "GPU compute capability 9.0: Hopper"


def test_only_the_gpus_this_job_was_given_count(tmp_path, scratch):
    """A node with an A100 and an H100: the job given the H100 gets fa3, one seeing both gets
    flashinfer (fa3 would fail on the A100)."""
    table = gpus(A100, H100)
    _, rec = launch(tmp_path, scratch, "unlimited-ocr", "sglang",
                    env_extra={**smi(gpus=table), "CUDA_VISIBLE_DEVICES": "1"})
    assert rec["argv"][rec["argv"].index("--attention-backend") + 1] == "fa3"
    (tmp_path / "record.json").unlink()
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", "sglang",
                       env_extra={**smi(gpus=table), "CUDA_VISIBLE_DEVICES": "0,1"})
    assert rec["argv"][rec["argv"].index("--attention-backend") + 1] == "flashinfer"
    assert info.attention is not None and "8.0, 9.0" in info.attention["why"]


@pytest.mark.parametrize("fake", [{"fail": "1"}, None])
def test_without_an_answer_from_nvidia_smi_flashinfer(tmp_path, scratch, fake):
    env = smi(**fake) if fake is not None else {}  # no nvidia-smi at all on this machine
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", "sglang", env_extra=env)
    assert rec["argv"][rec["argv"].index("--served-model-name") + 2:] == RECIPE.split()
    assert info.attention is not None and info.attention["source"] == "auto"
    assert info.attention["why"].startswith("nvidia-smi gave no compute capability")


def test_a_profile_pins_the_backend_and_the_command_line_wins(tmp_path, scratch):
    log = tmp_path / "smi.log"
    pinned = tmp_path / "pinned.toml"
    pinned.write_text('name = "pinned"\nmodel = "org/m"\nprompt = "Read."\n'
                      '[serve.sglang]\nattention_backend = "fa3"\nargs = ["--page-size", "1"]\n', encoding="utf-8")
    env = smi(gpus=gpus(A100), log=str(log))
    info, rec = launch(tmp_path, scratch, str(pinned), "sglang", env_extra=env)
    assert rec["argv"][rec["argv"].index("--served-model-name") + 2:] == ["--attention-backend", "fa3", "--page-size", "1"]
    assert info.attention == {"backend": "fa3", "source": "profile", "why": "pinned by the profile"}
    assert capability_queries(log) == []  # a pinned backend asks no GPU
    (tmp_path / "record.json").unlink()
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", "sglang", env_extra=env,
                       extra_args=["--attention-backend", "triton"])
    assert rec["argv"].count("--attention-backend") == 1
    assert rec["argv"][-2:] == ["--attention-backend", "triton"]
    assert info.attention == {"backend": "triton", "source": "command line", "why": "given on the command line"}


def test_other_profiles_and_vllm_get_no_attention_flag(tmp_path, scratch):
    env = smi(gpus=gpus(H100))
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", "vllm", env_extra=env)
    assert "--attention-backend" not in rec["argv"] and info.attention is None
    (tmp_path / "record.json").unlink()
    info, rec = launch(tmp_path, scratch, "dots-ocr", "sglang", env_extra=env)
    assert "--attention-backend" not in rec["argv"] and info.attention is None


@pytest.mark.parametrize(("gpu", "backend", "why"), [
    (A100, "flashinfer", "GPU compute capability 8.0: fa3 needs a Hopper GPU (9.x)"),
    (H100, "fa3", "GPU compute capability 9.0: Hopper"),
])
def test_serve_print_shows_the_choice(tmp_path, scratch, gpu, backend, why):
    env = with_nvidia_smi(fake_env(tmp_path, scratch), gpus=gpus(gpu))
    res = run_cli("serve", "unlimited-ocr", "--server", "sglang", "--print", "--port", "18124", env=env)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    command = shlex.split(lines[-1])[bin_len():]
    assert command == ["--model-path", UNLIMITED, "--host", "127.0.0.1", "--port", "18124",
                       "--served-model-name", UNLIMITED, *recipe_with(backend)]
    said = f"sglang: attention backend {backend} ({why})"
    assert said in res.stderr and f"# attention backend {backend} ({why})" in lines


def test_serve_says_and_reports_the_choice(tmp_path, scratch):
    env = with_nvidia_smi(fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1"), gpus=gpus(A100))
    proc = subprocess.Popen([sys.executable, "-m", "vlmocr", "serve", "unlimited-ocr", "--server", "sglang", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        details = json.loads(proc.stdout.readline())
        assert httpx.get(details["url"] + "/models", trust_env=False).status_code == 200
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert details["attention"] == {"backend": "flashinfer", "source": "auto",
                                    "why": "GPU compute capability 8.0: fa3 needs a Hopper GPU (9.x)"}
    assert "sglang: attention backend flashinfer (GPU compute capability 8.0" in err
    assert gone(read_record(tmp_path)["pid"])


def test_a_malformed_backend_in_a_profile_is_refused(tmp_path, scratch):
    bad = Path(tmp_path / "bad.toml")
    bad.write_text('name = "bad"\nmodel = "org/m"\nprompt = "Read."\n[serve.sglang]\nattention_backend = "fa3 --x"\n',
                   encoding="utf-8")
    res = run_cli("serve", str(bad), "--server", "sglang", "--print", env=fake_env(tmp_path, scratch))
    assert res.returncode == 3 and "attention_backend" in res.stderr and res.stdout == ""


def test_run_serve_keeps_the_choice_in_run_json(tmp_path, scratch, coded):
    env = with_nvidia_smi(fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1"), gpus=gpus(H100))
    run_dir = tmp_path / "run"
    res = run_cli("run", str(coded), "--out", str(run_dir), "--serve", "unlimited-ocr", "--server-kind", "sglang",
                  "--workers", "2", env=env)
    assert res.returncode == 0, res.stderr
    assert "sglang: attention backend fa3 (GPU compute capability 9.0: Hopper)" in res.stderr
    server = json.loads((run_dir / "run.json").read_text())["server"]
    assert server["attention"] == {"backend": "fa3", "source": "auto", "why": "GPU compute capability 9.0: Hopper"}
    argv = read_record(tmp_path)["argv"]
    assert argv[argv.index("--served-model-name") + 2:] == recipe_with("fa3")
