"""The server's plan with a stand-in server (no GPU here): exact command lines and environments per
profile, private caches, tensor parallelism, the JSON args file, `vlmocr serve --print` and the
refusal of control characters.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from support.cli import run_cli
from support.serve_standin import FAKE_BIN, UNLIMITED, bin_len, fake_env, launch
from vlmocr.cluster.serve.plan import ServePlan, args_file_text, plan_server, tensor_parallel_size
from vlmocr.exceptions import ExitCode, UsageError
from vlmocr.profiles import load_profile

pytestmark = pytest.mark.timeout(180)


# --------------------------------------------------------------------------------------------
# exact command lines and environments
# --------------------------------------------------------------------------------------------


def test_unlimited_ocr_vllm_exact_argv_and_env(tmp_path, scratch):
    # vLLM 0.33 (told by `vllm --version` before the start): the n-gram processor of seed 004's
    # recipe ("--logits_processors vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor
    # --no-enable-prefix-caching --mm-processor-cache-gb 0") on the V1 model runner.
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", revision="abc123", env_extra={"FAKE_VLLM_VERSION": "0.33.0"})
    spec = load_profile("unlimited-ocr").serve["vllm"]
    profile_args = spec.args
    # What the issue asks of this profile, straight from its TOML:
    for flag in ("--trust-remote-code", "--no-enable-prefix-caching"):
        assert flag in profile_args
    part = next(p for p in spec.by_version if p.versions == ">=0.31,<0.34")
    assert part.args == ["--logits-processors", "vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor"]
    assert profile_args[profile_args.index("--mm-processor-cache-gb") + 1] == "0"
    assert rec["argv"] == [
        "serve", UNLIMITED, "--revision", "abc123", "--host", "127.0.0.1", "--port", str(info.port),
        "--served-model-name", UNLIMITED, *profile_args, *part.args,
    ]
    assert rec["env"]["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert info.argv[:bin_len()] == shlex.split(FAKE_BIN) and info.argv[bin_len():] == rec["argv"]
    assert info.url == f"http://127.0.0.1:{info.port}/v1" and info.model_name == UNLIMITED
    assert info.pid == rec["pid"] == rec["pgid"] == rec["sid"]  # its own session and process group
    assert info.tensor_parallel == 1 and info.versions == {"vlmocr": "0.1.0", "vllm": "0.33.0"}

    env = rec["env"]
    for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0",
                       "MY_MARKER": "inherited"}.items():
        assert env[key] == value, key
    assert "NCCL_P2P_DISABLE" not in env
    assert env["HF_HOME"] == os.environ.get("HF_HOME", str(Path.home() / ".cache" / "huggingface"))
    assert info.env == {k: env[k] for k in info.env}  # what vlmocr says it set is what the server got


def test_unlimited_ocr_sglang_exact_argv_and_env(tmp_path, scratch):
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", "sglang")
    sglang_args = load_profile("unlimited-ocr").serve["sglang"].args
    assert "--enable-custom-logit-processor" in sglang_args
    assert rec["argv"] == [
        "--model-path", UNLIMITED, "--host", "127.0.0.1", "--port", str(info.port),
        # no nvidia-smi here: flashinfer, which every GPU runs (tests/cluster/serve/test_attention.py)
        "--served-model-name", UNLIMITED, "--attention-backend", "flashinfer", *sglang_args,
    ]
    env = rec["env"]
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    assert not any(k.startswith("VLLM_") for k in info.env)  # vLLM settings are for vLLM only
    assert env["TRITON_CACHE_DIR"].startswith(str(scratch))


def test_dots_ocr_vllm_exact_argv(tmp_path, scratch):
    model_dir = tmp_path / "models" / "dots.ocr"
    model_dir.mkdir(parents=True)
    info, rec = launch(tmp_path, scratch, "dots-ocr", model_path=str(model_dir))
    assert rec["argv"] == [
        "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(info.port),
        # a local snapshot is still served under the profile's repo id (stable settings keys)
        "--served-model-name", "rednote-hilab/dots.ocr",
        "--trust-remote-code", "--chat-template-content-format", "string",
    ]
    assert info.model_name == "rednote-hilab/dots.ocr"


def test_caches_are_private_under_tmpdir_and_removed(tmp_path, scratch):
    info, rec = launch(tmp_path, scratch, "dots-ocr")
    env = rec["env"]
    cache_vars = ["VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME",
                  "FLASHINFER_WORKSPACE_BASE", "TORCH_EXTENSIONS_DIR", "CUDA_CACHE_PATH", "HF_MODULES_CACHE"]
    roots = {Path(env[v]).parent for v in cache_vars}
    assert len(roots) == 1, roots  # one private directory per server process
    root = roots.pop()
    assert root.is_relative_to(scratch) and root.name == "cache"
    assert not root.exists()  # removed when the server stopped
    assert info.log.is_relative_to(scratch) and "Uvicorn running" in info.log.read_text()


def test_tensor_parallel_from_cuda_visible_devices(tmp_path, scratch):
    info, rec = launch(tmp_path, scratch, "dots-ocr", env_extra={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert rec["argv"][-2:] == ["--tensor-parallel-size", "2"] and info.tensor_parallel == 2
    (tmp_path / "record.json").unlink()
    info, rec = launch(tmp_path, scratch, "dots-ocr", "sglang", env_extra={"CUDA_VISIBLE_DEVICES": "2,5,7"})
    # SGLang's full flag name: `--tp` only works as an argparse abbreviation of --tp-size (issue 25).
    assert rec["argv"][-2:] == ["--tp-size", "3"]

    assert tensor_parallel_size({"CUDA_VISIBLE_DEVICES": "0,1"}) == (2, [])
    size, warnings = tensor_parallel_size({})
    assert size == 1 and "not set" in warnings[0]
    size, warnings = tensor_parallel_size({"CUDA_VISIBLE_DEVICES": ""})
    assert size == 1 and "no GPU" in warnings[0]
    size, warnings = tensor_parallel_size({"CUDA_VISIBLE_DEVICES": "MIG-a1b2,MIG-c3d4"})
    assert size == 1 and "MIG" in warnings[0]


def test_no_p2p_and_extra_args_pass_through(tmp_path, scratch):
    info, rec = launch(tmp_path, scratch, "dots-ocr", env_extra={"CUDA_VISIBLE_DEVICES": "0,1"}, no_p2p=True,
                       extra_args=["--quantization", "fp8", "--max-num-seqs", "8"])
    assert rec["env"]["NCCL_P2P_DISABLE"] == "1"
    assert rec["argv"][-7:] == ["--tensor-parallel-size", "2", "--disable-custom-all-reduce",
                                "--quantization", "fp8", "--max-num-seqs", "8"]
    with pytest.raises(UsageError, match="--port is set by vlmocr serve"):
        plan_server("dots-ocr", extra_args=["--port", "9000"], workdir=tmp_path / "w")


def test_json_args_go_to_a_config_file(tmp_path, scratch):
    info, rec = launch(tmp_path, scratch, "qwen3-vl")
    json_args = load_profile("qwen3-vl").serve["vllm"].json_args
    assert json_args  # e.g. --limit-mm-per-prompt {"image": 1, "video": 0}
    argv = rec["argv"]
    config = Path(argv[argv.index("--config") + 1])
    assert config.suffix == ".yaml" and config.is_relative_to(scratch)
    assert not any(a.startswith("{") for a in argv)  # no JSON on the command line
    text = rec["config_text"]
    assert text == config.read_text()
    parsed = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.partition(": ")
        assert value.startswith("'") and value.endswith("'")
        parsed["--" + key] = json.loads(value[1:-1].replace("''", "'"))
    assert parsed == json_args
    import yaml  # what vLLM itself does with the file (PyYAML: the [test] extras)
    assert {k: json.loads(v) for k, v in yaml.safe_load(text).items()} == {k.lstrip("-"): v for k, v in json_args.items()}


# --------------------------------------------------------------------------------------------
# --print and --target hf-jobs
# --------------------------------------------------------------------------------------------


def test_print_shows_environment_and_command_without_running(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, CUDA_VISIBLE_DEVICES="0,1")
    res = run_cli("serve", "qwen3-vl", "--print", "--port", "18123", "--revision", "r1", "--no-p2p",
                  "--", "--max-num-seqs", "4", env=env)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    exports = dict(shlex.split(line)[1].split("=", 1) for line in lines if line.startswith("export "))
    command = shlex.split(lines[-1])
    assert command[:bin_len()] == shlex.split(FAKE_BIN)
    config = command[command.index("--config") + 1]
    assert command[bin_len():] == [
        "serve", "Qwen/Qwen3-VL-8B-Instruct", "--revision", "r1", "--host", "127.0.0.1", "--port", "18123",
        "--served-model-name", "Qwen/Qwen3-VL-8B-Instruct", *load_profile("qwen3-vl").serve["vllm"].args,
        "--config", config, "--tensor-parallel-size", "2", "--disable-custom-all-reduce", "--max-num-seqs", "4",
    ]
    # --print writes nothing (an empty vlmocr-serve-* was left in TMPDIR); the script it prints makes
    # its work directory and args file, so the printed command works as printed.
    assert not list(scratch.iterdir()) and not Path(config).exists()
    subprocess.run(["bash", "-c", "\n".join(lines[:-1])], check=True, timeout=60)  # all but the command
    assert Path(config).read_text() == args_file_text(load_profile("qwen3-vl").serve["vllm"].json_args)
    assert oct(Path(config).parent.stat().st_mode & 0o777) == "0o700"
    assert exports["HF_HUB_OFFLINE"] == "1" and exports["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert exports["NCCL_P2P_DISABLE"] == "1" and exports["VLLM_CACHE_ROOT"].startswith(str(scratch))
    assert not (tmp_path / "record.json").exists()  # nothing ran


def run_printed(script: str, where: Path) -> None:
    """Run a printed script with bash, as someone piping `--print` to a shell would."""
    where.mkdir(exist_ok=True)
    subprocess.run(["bash", "-c", script], cwd=where, capture_output=True, text=True, timeout=60)


def test_print_quotes_every_value_even_in_comments(tmp_path, scratch):
    """The script `--print` shows runs exactly its command, whatever the values in it: a TMPDIR
    (hence the args file's path) or a plan's model holding a newline and a command stays in its
    comment, and the command still runs as printed."""
    hostile = scratch / "a\ntouch injected;#"
    hostile.mkdir()
    notes_it_ran = "sh -c 'printf %s \"$HF_HUB_OFFLINE\" > ran' sh"
    env = fake_env(tmp_path, scratch, TMPDIR=str(hostile), VLMOCR_VLLM_BIN=notes_it_ran)
    res = run_cli("serve", "qwen3-vl", "--print", env=env)
    assert res.returncode == 0, res.stderr
    work = tmp_path / "work"
    run_printed(res.stdout, work)
    assert not (work / "injected").exists()
    assert (work / "ran").read_text() == "1"  # the command ran, with the printed environment
    first, second = res.stdout.splitlines()[:2]
    assert first.startswith("# vlmocr serve qwen3-vl: vllm") and second.startswith("# args file ") and "\\n" in second

    plan = plan_server("qwen3-vl", environ=fake_env(tmp_path, scratch, VLMOCR_VLLM_BIN="true"))
    forged = ServePlan(**{**plan.__dict__, "model": "x\ntouch injected #", "profile": "p\rtouch injected"})
    script = forged.shell_script()
    assert all(line.startswith(("#", "export ")) for line in script.splitlines()[:-1])
    run_printed(script, work)
    assert not (work / "injected").exists()


@pytest.mark.parametrize(("args", "profile_toml", "refused"), [
    (["--model-path", "x\ntouch injected #"], None, "--model-path 'x\\ntouch injected #': control characters"),
    (["--served-model-name", "n\ntouch injected #"], None, "--served-model-name"),
    (["--revision", "r\ttouch injected"], None, "--revision"),
    (["--host", "127.0.0.1\ntouch injected"], None, "--host"),
    (["--log", "l\ntouch injected"], None, "--log"),
    (["--target", "hf-jobs", "--model-path", "org/x\ntouch injected"], None, "--model-path"),
    ([], 'model = "x\\ntouch injected #"', "model 'x\\ntouch injected #' contains a control character"),
    ([], 'model = "org/m"\n[serve.vllm]\nenv = {"A=1; touch injected; B" = "x"}', "is not an environment variable name"),
    ([], 'model = "org/m"\n[serve.vllm]\nargs = ["--x", "1\\ntouch injected"]', "serve.vllm.args"),
])
def test_control_characters_in_names_and_paths_are_refused(tmp_path, scratch, args, profile_toml, refused):
    """A newline (or another control character) in a name or path given on the command line or
    in a profile is refused with one line and exit 3, before anything is printed; and whatever
    was printed does nothing but its command when run."""
    profile = "qwen3-vl"
    if profile_toml is not None:
        profile = str(tmp_path / "hostile.toml")
        Path(profile).write_text(f'name = "hostile"\nprompt = "Read the page."\n{profile_toml}\n', encoding="utf-8")
    env = fake_env(tmp_path, scratch, VLMOCR_VLLM_BIN="true")
    res = run_cli("serve", profile, "--print", *args, env=env)
    run_printed(res.stdout, tmp_path / "work")
    assert not (tmp_path / "work" / "injected").exists()
    assert res.returncode == ExitCode.usage, res.stdout
    assert res.stdout == "" and len(res.stderr.strip().splitlines()) == 1 and refused in res.stderr, res.stderr
