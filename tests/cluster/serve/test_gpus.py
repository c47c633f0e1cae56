"""What nvidia-smi says about the job's GPUs (the stand-in tests/cluster/bin/nvidia-smi on PATH):
only the GPUs CUDA_VISIBLE_DEVICES names, the job log's memory line, and nothing but None when
nvidia-smi is missing or its driver does not answer."""

from __future__ import annotations

import json
import os

from support.serve_standin import with_nvidia_smi
from vlmocr.cluster.serve.gpus import Gpu, gpu_memory, memory_line, query_gpus

TWO = json.dumps([
    {"name": "NVIDIA A40", "memory.total": "46068 MiB", "memory.used": "120 MiB", "compute_cap": "8.6"},
    {"name": "NVIDIA H100 80GB HBM3", "memory.total": "81559 MiB", "memory.used": "70001 MiB", "compute_cap": "9.0"},
])


def _env(tmp_path, **kw) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return with_nvidia_smi(base, log=str(tmp_path / "calls.jsonl"), **kw)


def _calls(tmp_path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_only_the_gpus_the_job_was_given(tmp_path):
    env = {**_env(tmp_path, gpus=TWO), "CUDA_VISIBLE_DEVICES": "1"}
    gpus = gpu_memory(env)
    assert gpus == [Gpu("1", "NVIDIA H100 80GB HBM3", "81559 MiB", "70001 MiB")]
    assert _calls(tmp_path) == [["--query-gpu=index,name,memory.total,memory.used", "--format=csv,noheader", "-i", "1"]]
    assert memory_line(gpus) == "nvidia-smi memory: GPU 1 NVIDIA H100 80GB HBM3 70001 MiB used of 81559 MiB"


def test_every_gpu_on_one_line_without_cuda_visible_devices(tmp_path):
    gpus = gpu_memory(_env(tmp_path, gpus=TWO))
    assert [g.index for g in gpus] == ["0", "1"]
    assert memory_line(gpus) == ("nvidia-smi memory: GPU 0 NVIDIA A40 120 MiB used of 46068 MiB; "
                                 "GPU 1 NVIDIA H100 80GB HBM3 70001 MiB used of 81559 MiB")
    assert query_gpus(["compute_cap"], _env(tmp_path, gpus=TWO)) == [{"compute_cap": "8.6"}, {"compute_cap": "9.0"}]


def test_renumbered_devices_fall_back_to_what_nvidia_smi_sees(tmp_path):
    # A container runtime renumbers: CUDA_VISIBLE_DEVICES=5 means nothing to this nvidia-smi.
    env = {**_env(tmp_path), "CUDA_VISIBLE_DEVICES": "5"}
    assert gpu_memory(env) == [Gpu("0", "NVIDIA A100-SXM4-80GB", "81920 MiB", "71234 MiB")]
    first, second = _calls(tmp_path)
    assert first[-2:] == ["-i", "5"] and "-i" not in second


def test_mig_slices_are_not_passed_to_i(tmp_path):
    env = {**_env(tmp_path), "CUDA_VISIBLE_DEVICES": "MIG-4f0c1f2e-0000-0000-0000-000000000000"}
    assert gpu_memory(env) is not None
    assert "-i" not in _calls(tmp_path)[0]


def test_a_driver_that_does_not_answer_gives_none(tmp_path):
    gpus = gpu_memory(_env(tmp_path, fail="1"))
    assert gpus is None
    assert memory_line(gpus) == "nvidia-smi memory: not available (no nvidia-smi, or it did not answer)"


def test_no_nvidia_smi_gives_none(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = str(tmp_path)  # an empty folder: nothing to run
    assert gpu_memory(env) is None
