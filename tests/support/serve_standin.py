"""The stand-in server for the `vlmocr serve` tests: ``tests/cluster/fake_vllm`` takes the place of
``vllm`` / ``sglang.launch_server`` through ``VLMOCR_VLLM_BIN`` / ``VLMOCR_SGLANG_BIN``; it records
the argv and environment it was started with, then serves the OpenAI protocol with page-code
answers."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import httpx2 as httpx

from vlmocr.cluster.serve.running import ServerInfo, running_server

from .components import REPO

#: The `vlmocr serve` stand-in, started through VLMOCR_VLLM_BIN / VLMOCR_SGLANG_BIN.
FAKE = REPO / "tests" / "cluster" / "fake_vllm"
FAKE_BIN = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))}"
#: The folder holding the `nvidia-smi` stand-in (tests/cluster/bin/nvidia-smi): first on PATH.
NVIDIA_SMI_DIR = REPO / "tests" / "cluster" / "bin"
UNLIMITED = "baidu/Unlimited-OCR"


def fake_env(tmp_path: Path, scratch: Path, **extra: str) -> dict[str, str]:
    """The environment the code under test sees: the stand-in as both servers, a private TMPDIR,
    no GPUs named unless a test says so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_VLLM_") and k != "CUDA_VISIBLE_DEVICES"}
    env.update({
        "VLMOCR_VLLM_BIN": FAKE_BIN, "VLMOCR_SGLANG_BIN": FAKE_BIN, "TMPDIR": str(scratch),
        "FAKE_VLLM_RECORD": str(tmp_path / "record.json"), "VLMOCR_API_KEY": "", "OPENAI_API_KEY": "",
        "MY_MARKER": "inherited",
    })
    env.update(extra)
    return env


def with_nvidia_smi(env: dict[str, str], **fake: str) -> dict[str, str]:
    """``env`` with the `nvidia-smi` stand-in first on PATH; ``fake`` sets its FAKE_NVIDIA_SMI_*
    switches (``gpus=JSON``, ``fail="1"``, ``log=FILE``)."""
    out = {k: v for k, v in env.items() if not k.startswith("FAKE_NVIDIA_SMI_")}
    out["PATH"] = f"{NVIDIA_SMI_DIR}{os.pathsep}{env.get('PATH', '')}"
    out.update({f"FAKE_NVIDIA_SMI_{k.upper()}": v for k, v in fake.items()})
    return out


def read_record(tmp_path: Path, timeout: float = 30) -> dict:
    path = tmp_path / "record.json"
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise AssertionError("the stand-in server never started")
        time.sleep(0.05)
    return json.loads(path.read_text())


def gone(pid: int, timeout: float = 15) -> bool:
    """The process no longer runs (a zombie waiting for a reaper counts as gone)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def launch(tmp_path: Path, scratch: Path, profile: str, server: str = "vllm", env_extra: dict | None = None,
           **kwargs) -> tuple[ServerInfo, dict]:
    """Start a server through the library, return its info and the stand-in's record, stop it."""
    env = fake_env(tmp_path, scratch, **(env_extra or {}))
    with running_server(profile, server, environ=env, quiet=True, **kwargs) as info:
        rec = read_record(tmp_path)
        assert httpx.get(info.url.removesuffix("/v1") + "/health", trust_env=False).status_code == 200
    assert gone(rec["pid"])
    return info, rec


def bin_len() -> int:
    return len(shlex.split(FAKE_BIN))
