"""Issue 25, points 3 and 4: what the GPUs themselves need, as seed 001's troubleshooting table says.

"Two-GPU `vllm serve` hangs at NCCL start-up — GPU peer-to-peer transfer does not work between the
cards: set `NCCL_P2P_DISABLE=1`. It then hangs while capturing CUDA graphs — Add
`--disable-custom-all-reduce`." and "`cutlass_scaled_mm_sm80` error with `--quantization fp8` —
vLLM's FP8 path fails on Ampere cards; use more GPUs in bf16." (Seed 000 ran FP8 on A40s and A100s.)
The job reads its GPUs (`nvidia-smi topo -m`, `--query-gpu=compute_cap`) from the stand-in
nvidia-smi; plan proposes `--no-p2p` for tensor parallel on PCIe cards, and the job script it
leads to exports VLMOCR_SERVE_NO_P2P=1."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.serve_standin import fake_env, launch, with_nvidia_smi
from vlmocr.cluster.serve.gpus import parse_topology
from vlmocr.cluster.serve.plan import plan_server
from vlmocr.corpus.partitions import gpu_interconnect, is_ampere, parse_partitions_toml

pytestmark = pytest.mark.timeout(180)

A40 = {"name": "NVIDIA A40", "memory.total": "46068 MiB", "memory.used": "512 MiB", "compute_cap": "8.6"}
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory.total": "81559 MiB", "memory.used": "512 MiB", "compute_cap": "9.0"}


def gpus_env(tmp_path, scratch, gpu, link):
    env = fake_env(tmp_path, scratch, CUDA_VISIBLE_DEVICES="0,1")
    return with_nvidia_smi(env, gpus=json.dumps([gpu, gpu]), link=link)


def test_a_pcie_pair_starts_with_peer_to_peer_off(tmp_path, scratch):
    env = gpus_env(tmp_path, scratch, A40, "PHB")
    info, rec = launch(tmp_path, scratch, "gemma-4", env_extra={k: v for k, v in env.items()})
    assert rec["env"]["NCCL_P2P_DISABLE"] == "1" and "--disable-custom-all-reduce" in rec["argv"]
    assert rec["argv"][rec["argv"].index("--tensor-parallel-size") + 1] == "2"
    plan = plan_server("gemma-4", "vllm", environ=env, write=False)
    assert any("no NVLink between this job's GPUs (nvidia-smi topo -m: GPU0-GPU1 PHB)" in w for w in plan.warnings)


def test_an_nvlink_pair_keeps_peer_to_peer(tmp_path, scratch):
    env = gpus_env(tmp_path, scratch, H100, "NV18")
    plan = plan_server("gemma-4", "vllm", environ=env, write=False)
    assert "NCCL_P2P_DISABLE" not in plan.env and "--disable-custom-all-reduce" not in plan.argv
    assert not [w for w in plan.warnings if "NVLink" in w]


def test_topology_unknown_is_said_not_guessed(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, CUDA_VISIBLE_DEVICES="0,1", PATH="/usr/bin:/bin")  # no nvidia-smi
    plan = plan_server("gemma-4", "vllm", environ=env, write=False)
    assert "NCCL_P2P_DISABLE" not in plan.env
    assert any("cannot be told" in w and "--no-p2p" in w for w in plan.warnings)


@pytest.mark.parametrize("gpu, warned", [(A40, True), (H100, False)])
def test_fp8_on_ampere_is_warned_about(tmp_path, scratch, gpu, warned):
    env = with_nvidia_smi(fake_env(tmp_path, scratch, CUDA_VISIBLE_DEVICES="0"), gpus=json.dumps([gpu]))
    plan = plan_server("gemma-4", "vllm", extra_args=["--quantization", "fp8"], environ=env, write=False)
    said = [w for w in plan.warnings if "fp8" in w]
    assert bool(said) is warned
    if warned:
        assert "compute capability 8.6" in said[0] and "cutlass_scaled_mm_sm80" in said[0]


def test_parse_topology_of_a_real_matrix():
    text = ("\x1b[4m\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
            "GPU0\t X \tNV12\tSYS\tSYS\t0-31\t0\t\tN/A\nGPU1\tNV12\t X \tSYS\tSYS\t0-31\t0\t\tN/A\n"
            "GPU2\tSYS\tSYS\t X \tPHB\t32-63\t1\t\tN/A\nNIC0\tSYS\tSYS\tPHB\t X \n\nLegend:\n  X    = Self\n")
    links = parse_topology(text)
    assert links[("0", "1")] == "NV12" and links[("0", "2")] == "SYS" and ("0", "NIC0") not in links


def test_cards_and_partitions_say_their_interconnect():
    assert gpu_interconnect("a40") == gpu_interconnect("NVIDIA L40S") == "pcie"
    assert gpu_interconnect("NVIDIA A100-SXM4-80GB") == gpu_interconnect("h100") == "nvlink"
    assert gpu_interconnect("a100_80g") == ""  # sold both ways: the job's nvidia-smi tells
    assert is_ampere("a100_80g") and is_ampere("NVIDIA A40") and not is_ampere("h100")
    parts = parse_partitions_toml('[partition.a]\ngpu = "a100_80g"\ngpus_per_node = 4\ninterconnect = "pcie"\n'
                                  '[partition.b]\ngpu = "A40"\ngpus_per_node = 2\n', "p.toml")
    assert [p.interconnect for p in parts.partitions] == ["pcie", "pcie"]


def test_slurm_submit_no_p2p_exports_it_into_the_job(tmp_path):
    from vlmocr.testing.pagecode import make_coded_pdf

    doc = make_coded_pdf(tmp_path / "d.pdf", [1])
    res = run_cli("slurm", "submit", str(doc), "--out", str(tmp_path / "run"), "--shards", "1", "--gpus-per-task", "2",
                  "--no-p2p", "--dry-run", "--", "--serve", "gemma-4", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    script = (tmp_path / "run" / "slurm" / "bulk.sbatch").read_text()
    assert "\nexport VLMOCR_SERVE_NO_P2P=1\n" in script
    res = run_cli("slurm", "submit", str(doc), "--out", str(tmp_path / "run2"), "--shards", "1", "--dry-run",
                  "--", "--serve", "gemma-4", cwd=tmp_path)
    assert "VLMOCR_SERVE_NO_P2P" not in (tmp_path / "run2" / "slurm" / "bulk.sbatch").read_text()
