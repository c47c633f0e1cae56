"""Profiles declare the GPU memory their model needs (`[memory]`), for `vlmocr plan --partitions`."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from vlmocr.exceptions import UsageError
from vlmocr.profiles import DTYPE_BYTES, list_profiles, load_profile, profile_dir


@pytest.mark.parametrize("path", sorted(profile_dir().glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_profile_declares_its_memory(path):
    p = load_profile(path)
    assert p.memory is not None, f"{path.name} has no [memory]"
    m = p.memory
    assert m.dtype in DTYPE_BYTES and m.params_b
    assert m.weights_gb <= m.min_gpu_gb
    # the weights are parameters x bytes per parameter of the served dtype (vision encoders in
    # bf16 beside FP8 weights make a little more)
    assert m.params_b * DTYPE_BYTES[m.dtype] * 0.75 <= m.weights_gb <= m.params_b * DTYPE_BYTES[m.dtype] * 1.35
    # each figure says where it comes from
    assert "[memory]" in path.read_text() and "weights_gb = parameters x bytes" in path.read_text()


def test_shipped_figures_agree_with_the_seeds():
    # Seed 000: Gemma 4 31B "in BF16 it fills an 80 GB A100 and cannot run on an A40" (46 GB);
    # "a 24 GB laptop runs 4–8B models only".
    gemma = load_profile("gemma-4").memory
    assert 46 < gemma.min_gpu_gb <= 80 and gemma.dtype == "bf16"
    assert load_profile("qwen3-vl").memory.min_gpu_gb <= 24
    assert all(p.memory.min_gpu_gb <= 24 for p in list_profiles() if p.memory.params_b <= 8)


def test_profiles_show_and_list_print_the_memory():
    res = run_cli("profiles", "show", "gemma-4")
    assert res.returncode == 0, res.stderr
    memory = json.loads(res.stdout)["memory"]
    assert memory == load_profile("gemma-4").memory.model_dump()
    res = run_cli("profiles", "list")
    assert res.returncode == 0 and f"GPU memory: {memory['min_gpu_gb']:g} GB" in res.stdout


@pytest.mark.parametrize("memory,message", [
    ("weights_gb = 20\nmin_gpu_gb = 10", "less than weights_gb"),
    ('params_b = 8\ndtype = "bf16"\nweights_gb = 8\nmin_gpu_gb = 12', "does not match 8B parameters in bf16"),
    ('dtype = "fp7"\nweights_gb = 8\nmin_gpu_gb = 12', "memory.dtype 'fp7'"),
    ("weights_gb = 8\nmin_gpu_gb = 12\nkv_gb = 3", "kv_gb"),
])
def test_a_wrong_memory_table_is_a_usage_error_naming_the_file(tmp_path, memory, message):
    path = tmp_path / "mine.toml"
    path.write_text(f'prompt = "Read."\n[memory]\n{memory}\n')
    with pytest.raises(UsageError, match="mine.toml") as err:
        load_profile(path)
    assert message in str(err.value)
