"""`vlmocr serve` and `vlmocr run --serve` with a stand-in server (no GPU here).

``tests/cluster/fake_vllm`` takes the place of ``vllm`` / ``sglang.launch_server`` through
``VLMOCR_VLLM_BIN`` / ``VLMOCR_SGLANG_BIN``: it records the argv and environment it was started
with, then serves the OpenAI protocol with page-code answers. These tests need no SLURM (the
directory's conftest labels them ``slurm`` anyway; they do not use the ``slurm`` fixture).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from conftest import REPO, finals, run_cli
from support.openai_server import ServerConfig, serve_in_process
from support.pagecode import expected_text, make_coded_pdf

from vlmocr.cluster import serve as serving
from vlmocr.exceptions import EndpointUnavailable, ExitCode, UsageError
from vlmocr.profiles import load_profile

pytestmark = pytest.mark.timeout(180)

FAKE = Path(__file__).resolve().parent / "fake_vllm"
FAKE_BIN = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))}"
UNLIMITED = "baidu/Unlimited-OCR"


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    d = tmp_path / "scratch"
    d.mkdir()
    return d


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
           **kwargs) -> tuple[serving.ServerInfo, dict]:
    """Start a server through the library, return its info and the stand-in's record, stop it."""
    env = fake_env(tmp_path, scratch, **(env_extra or {}))
    with serving.running_server(profile, server, environ=env, quiet=True, **kwargs) as info:
        rec = read_record(tmp_path)
        assert httpx.get(info.url.removesuffix("/v1") + "/health", trust_env=False).status_code == 200
    assert gone(rec["pid"])
    return info, rec


def bin_len() -> int:
    return len(shlex.split(FAKE_BIN))


# --------------------------------------------------------------------------------------------
# exact command lines and environments
# --------------------------------------------------------------------------------------------


def test_unlimited_ocr_vllm_exact_argv_and_env(tmp_path, scratch):
    info, rec = launch(tmp_path, scratch, "unlimited-ocr", revision="abc123")
    profile_args = load_profile("unlimited-ocr").serve["vllm"].args
    # What the issue asks of this profile, straight from its TOML:
    for flag in ("--trust-remote-code", "--no-enable-prefix-caching"):
        assert flag in profile_args
    assert "vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor" in profile_args
    assert profile_args[profile_args.index("--mm-processor-cache-gb") + 1] == "0"
    assert rec["argv"] == [
        "serve", UNLIMITED, "--revision", "abc123", "--host", "127.0.0.1", "--port", str(info.port),
        "--served-model-name", UNLIMITED, *profile_args,
    ]
    assert info.argv[:bin_len()] == shlex.split(FAKE_BIN) and info.argv[bin_len():] == rec["argv"]
    assert info.url == f"http://127.0.0.1:{info.port}/v1" and info.model_name == UNLIMITED
    assert info.pid == rec["pid"] == rec["pgid"] == rec["sid"]  # its own session and process group
    assert info.tensor_parallel == 1 and info.versions == {"vlmocr": "0.1.0", "vllm": "0.0.0+fake-vllm"}

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
        "--served-model-name", UNLIMITED, *sglang_args,
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
    assert rec["argv"][-2:] == ["--tp", "3"]

    assert serving.tensor_parallel_size({"CUDA_VISIBLE_DEVICES": "0,1"}) == (2, [])
    size, warnings = serving.tensor_parallel_size({})
    assert size == 1 and "not set" in warnings[0]
    size, warnings = serving.tensor_parallel_size({"CUDA_VISIBLE_DEVICES": ""})
    assert size == 1 and "no GPU" in warnings[0]
    size, warnings = serving.tensor_parallel_size({"CUDA_VISIBLE_DEVICES": "MIG-a1b2,MIG-c3d4"})
    assert size == 1 and "MIG" in warnings[0]


def test_no_p2p_and_extra_args_pass_through(tmp_path, scratch):
    info, rec = launch(tmp_path, scratch, "dots-ocr", env_extra={"CUDA_VISIBLE_DEVICES": "0,1"}, no_p2p=True,
                       extra_args=["--quantization", "fp8", "--max-num-seqs", "8"])
    assert rec["env"]["NCCL_P2P_DISABLE"] == "1"
    assert rec["argv"][-7:] == ["--tensor-parallel-size", "2", "--disable-custom-all-reduce",
                                "--quantization", "fp8", "--max-num-seqs", "8"]
    with pytest.raises(UsageError, match="--port is set by vlmocr serve"):
        serving.plan_server("dots-ocr", extra_args=["--port", "9000"], workdir=tmp_path / "w")


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
    yaml = pytest.importorskip("yaml")  # what vLLM itself does with the file
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
    assert Path(config).is_file()  # the printed command works as printed
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

    plan = serving.plan_server("qwen3-vl", environ=fake_env(tmp_path, scratch, VLMOCR_VLLM_BIN="true"))
    forged = serving.ServePlan(**{**plan.__dict__, "model": "x\ntouch injected #", "profile": "p\rtouch injected"})
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


# --------------------------------------------------------------------------------------------
# health, crashes, foreign servers, stopping
# --------------------------------------------------------------------------------------------


def test_waits_for_health(tmp_path, scratch):
    t0 = time.monotonic()
    info, rec = launch(tmp_path, scratch, "dots-ocr",
                       env_extra={"FAKE_VLLM_START_DELAY": "1.5", "FAKE_VLLM_HEALTH_DELAY": "1.5"})
    assert time.monotonic() - t0 >= 3.0
    text = info.log.read_text()
    assert "loading model weights" in text and "Uvicorn running" in text


def test_health_timeout_stops_the_server(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_START_DELAY="60", FAKE_VLLM_WORKER="1")
    with pytest.raises(serving.ServerFailed, match="did not become healthy within 2 s") as err:
        with serving.running_server("dots-ocr", environ=env, health_timeout=2, quiet=True):
            pytest.fail("must not be reached")
    rec = read_record(tmp_path)
    assert gone(rec["pid"]) and gone(rec["worker_pid"])
    assert err.value.exit_code == ExitCode.unavailable and "loading model weights" in err.value.log_tail[-1]


def test_crash_at_start_exits_5_with_log_tail(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_CRASH="1")
    res = run_cli("serve", "unlimited-ocr", env=env, timeout=60)
    assert res.returncode == ExitCode.unavailable == 5, res.stderr
    assert "vllm exited with code 1 before it was ready" in res.stderr
    assert "RuntimeError: fake crash at start: CUDA out of memory [rank0]" in res.stderr  # raw, brackets kept
    assert "loading step 119" in res.stderr and "loading step 71\n" in res.stderr
    assert "loading step 70\n" not in res.stderr  # only the last 50 lines
    assert gone(read_record(tmp_path)["pid"])


def test_given_port_already_in_use_is_refused(tmp_path, scratch):
    with serve_in_process(ServerConfig(models=UNLIMITED)) as foreign:
        env = fake_env(tmp_path, scratch)
        res = run_cli("serve", "unlimited-ocr", "--port", str(foreign.port), env=env, timeout=60)
    assert res.returncode == 5 and f"port {foreign.port} on 127.0.0.1 is already in use" in res.stderr
    assert not (tmp_path / "record.json").exists()  # nothing was started


def test_foreign_server_taking_the_port_while_loading_is_detected(tmp_path, scratch):
    port = serving.free_port()
    env = fake_env(tmp_path, scratch, FAKE_VLLM_START_DELAY="60")
    proc = subprocess.Popen([sys.executable, "-m", "vlmocr", "serve", "unlimited-ocr", "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ours = read_record(tmp_path)  # ours is "loading the model", port not yet bound
        # Another server, even one answering with the very same model name, grabs the port.
        with serve_in_process(ServerConfig(models=UNLIMITED, port=port)):
            _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 5, err
    assert f"port {port} answers, but not from the vllm server vlmocr started (pid {ours['pid']})" in err
    assert gone(ours["pid"])


def test_auto_port_taken_before_bind_is_retried(tmp_path, scratch, monkeypatch):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))  # bound, not listening: the server's bind fails, connects are refused
    taken = blocker.getsockname()[1]
    ports = iter([taken])
    real_free_port = serving.free_port
    monkeypatch.setattr(serving, "free_port", lambda host="127.0.0.1": next(ports, None) or real_free_port(host))
    try:
        info, rec = launch(tmp_path, scratch, "dots-ocr")
    finally:
        blocker.close()
    assert info.port != taken and rec["argv"][rec["argv"].index("--port") + 1] == str(info.port)
    assert "address already in use" in info.log.read_text().lower()


def test_stop_escalates_to_sigkill_and_reaches_workers(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_IGNORE_TERM="1", FAKE_VLLM_WORKER="1")
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="boom"):
        with serving.running_server("dots-ocr", environ=env, stop_grace=1.0, quiet=True) as info:
            rec = read_record(tmp_path)
            assert info.alive()
            raise RuntimeError("boom")  # the run failed: the server must go anyway
    assert gone(rec["pid"], timeout=5) and gone(rec["worker_pid"], timeout=5)
    assert time.monotonic() - t0 < 20


def test_sigterm_while_loading_stops_the_server(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_START_DELAY="60", FAKE_VLLM_WORKER="1")
    proc = subprocess.Popen([sys.executable, "-m", "vlmocr", "serve", "dots-ocr"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rec = read_record(tmp_path)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.interrupted, err
    assert gone(rec["pid"]) and gone(rec["worker_pid"])


def test_serve_foreground_until_sigterm_then_exit_0(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1")
    proc = subprocess.Popen([sys.executable, "-m", "vlmocr", "serve", "dots-ocr", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        details = json.loads(proc.stdout.readline())
        models = httpx.get(details["url"] + "/models", trust_env=False).json()
        assert [m["id"] for m in models["data"]] == ["rednote-hilab/dots.ocr"] == [details["model"]]
        assert details["versions"]["vllm"] == "0.0.0+fake-vllm"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    rec = read_record(tmp_path)
    assert gone(rec["pid"]) and gone(rec["worker_pid"])
    assert "ready at" in err and "0.0.0+fake-vllm" in err and "vlmocr 0.1.0" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_server_goes_when_vlmocr_is_killed_outright(tmp_path, scratch):
    env = fake_env(tmp_path, scratch)
    proc = subprocess.Popen([sys.executable, "-m", "vlmocr", "serve", "dots-ocr"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().startswith("Serving rednote-hilab/dots.ocr at http://127.0.0.1:")
        rec = read_record(tmp_path)
        proc.kill()  # SIGKILL: no cleanup code of vlmocr runs
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert gone(rec["pid"])  # the kernel sent it SIGTERM when its parent died


def test_server_dying_while_serving_exits_5(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_EXIT_AFTER="1")
    res = run_cli("serve", "dots-ocr", env=env, timeout=60)
    assert res.returncode == 5 and "exited with code 3 while serving" in res.stderr
    assert "fake engine died" in res.stderr


# --------------------------------------------------------------------------------------------
# vlmocr run --serve
# --------------------------------------------------------------------------------------------


@pytest.fixture
def coded(tmp_path) -> Path:
    return make_coded_pdf(tmp_path / "coded.pdf", [1, 2, 3, 4])


def test_run_serve_end_to_end(tmp_path, scratch, coded):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1", VLMOCR_SERVE_REVISION="r9",
                   VLMOCR_SERVE_ARGS="--max-num-seqs 4")
    run_dir = tmp_path / "run"
    res = run_cli("run", str(coded), "--out", str(run_dir), "--serve", "qwen3-vl", "--workers", "2", env=env)
    assert res.returncode == 0, res.stderr
    recs = finals(run_dir)
    assert len(recs) == 4
    for (_doc, page), rec in recs.items():
        assert rec["status"] == "ok" and rec["engine"] == "openai", rec
        assert rec["model"] == "Qwen/Qwen3-VL-8B-Instruct" and rec["text"] == expected_text(page)
    settings = json.loads((run_dir / "run.json").read_text())["settings"]
    assert settings["serve"] == "qwen3-vl" and settings["profile"] == "qwen3-vl"
    assert settings["endpoint"].startswith("http://127.0.0.1:")
    rec = read_record(tmp_path)
    argv = rec["argv"]
    assert argv[:4] == ["serve", "Qwen/Qwen3-VL-8B-Instruct", "--revision", "r9"]
    assert argv[-2:] == ["--max-num-seqs", "4"] and "--config" in argv and rec["env"]["HF_HUB_OFFLINE"] == "1"
    assert gone(rec["pid"]) and gone(rec["worker_pid"])
    logs = list((run_dir / "logs").glob("server-*.log"))
    assert len(logs) == 1 and "Uvicorn running" in logs[0].read_text()
    assert not list(scratch.glob("vlmocr-serve-*"))  # caches and args file removed with the server
    assert "stopped" in res.stderr


def test_run_serve_crash_exits_5_and_reads_nothing(tmp_path, scratch, coded):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_CRASH="1")
    res = run_cli("run", str(coded), "--out", str(tmp_path / "run"), "--serve", "qwen3-vl", env=env)
    assert res.returncode == 5 and "fake crash at start" in res.stderr
    assert not (tmp_path / "run" / "pages.jsonl").exists()


def test_run_serve_sigterm_stops_the_server(tmp_path, scratch):
    pdf = make_coded_pdf(tmp_path / "many.pdf", list(range(1, 41)))
    env = fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1", FAKE_VLLM_LATENCY="0.5", VLMOCR_STOP_GRACE="10")
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vlmocr", "run", str(pdf), "--out", str(run_dir), "--serve", "qwen3-vl",
         "--concurrency", "2", "--workers", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        rec = read_record(tmp_path)
        pages = run_dir / "pages.jsonl"
        end = time.monotonic() + 60
        while not (pages.exists() and pages.read_text().count("\n") >= 2):
            assert proc.poll() is None and time.monotonic() < end, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == ExitCode.interrupted, err
    assert gone(rec["pid"]) and gone(rec["worker_pid"])
    done = len(finals(run_dir))
    assert 2 <= done < 40  # stopped early, nothing half-written


def test_run_serve_rejects_endpoint_too(tmp_path, scratch, coded):
    env = fake_env(tmp_path, scratch)
    res = run_cli("run", str(coded), "--out", str(tmp_path / "run"), "--serve", "qwen3-vl",
                  "--endpoint", "http://127.0.0.1:9/v1", env=env)
    assert res.returncode == ExitCode.usage and "not both" in res.stderr
    assert not (tmp_path / "record.json").exists()


def test_port_helpers():
    port = serving.free_port()
    assert not serving.port_in_use("127.0.0.1", port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert serving.port_in_use("127.0.0.1", s.getsockname()[1])
        assert serving.port_owned_by_group(s.getsockname()[1], os.getpgid(0)) in (True, None)
    with pytest.raises(EndpointUnavailable):
        raise serving.ForeignServer("x")


def test_grid_serve_loads_the_model_once_for_every_cell(tmp_path, scratch):
    from support.pagecode import make_coded_png

    truth = tmp_path / "truth"
    truth.mkdir()
    for code in (1, 2, 3):
        make_coded_png(truth / f"p{code}.png", code)
        (truth / f"p{code}.txt").write_text(expected_text(code), encoding="utf-8")
    env = fake_env(tmp_path, scratch)
    out = tmp_path / "grid"
    res = run_cli("grid", "--truth", str(truth), "--out", str(out), "--serve", "qwen3-vl",
                  "--longest-side", "800,1200", "--engine", "openai", "--json", env=env)
    assert res.returncode == 0, res.stderr
    cells = json.loads(res.stdout)["cells"]
    assert len(cells) == 2 and all(c["corpus"]["cer"] == 0 and c["exit_code"] == 0 for c in cells), cells
    logs = list((out / "logs").glob("server-*.log"))
    assert len(logs) == 1  # one server for both cells
    rec = read_record(tmp_path)
    assert gone(rec["pid"])
