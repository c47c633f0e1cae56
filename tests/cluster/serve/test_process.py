"""A started server with a stand-in (no GPU here): waiting for health, crashes, foreign servers
on its port, stopping its whole process group, and the port helpers.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx2 as httpx
import pytest

from support.cli import run_cli
from support.components import need
from support.serve_standin import UNLIMITED, fake_env, gone, launch, read_record
from vlmocr.cluster.serve import plan as serve_plan
from vlmocr.cluster.serve import running as serve_running
from vlmocr.cluster.serve.plan import free_port, port_in_use
from vlmocr.cluster.serve.process import (
    ForeignServer,
    ServerFailed,
    port_owned_by_group,
)
from vlmocr.cluster.serve.running import running_server
from vlmocr.exceptions import EndpointUnavailable, ExitCode
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

pytestmark = pytest.mark.timeout(180)


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
    with pytest.raises(ServerFailed, match="did not become healthy within 2 s") as err:
        with running_server("dots-ocr", environ=env, health_timeout=2, quiet=True):
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
    port = free_port()
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
    real_free_port = free_port
    fake_free_port = lambda host="127.0.0.1": next(ports, None) or real_free_port(host)  # noqa: E731
    for module in (serve_plan, serve_running):  # the plan's first port and the retry's
        monkeypatch.setattr(module, "free_port", fake_free_port)
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
        with running_server("dots-ocr", environ=env, stop_grace=1.0, quiet=True) as info:
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
    assert " ready in " in err and "0.0.0+fake-vllm" in err and "vlmocr 0.1.0" in err


def test_server_goes_when_vlmocr_is_killed_outright(tmp_path, scratch):
    need(sys.platform.startswith("linux"), "Linux (PR_SET_PDEATHSIG)")
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


def test_port_helpers():
    port = free_port()
    assert not port_in_use("127.0.0.1", port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert port_in_use("127.0.0.1", s.getsockname()[1])
        assert port_owned_by_group(s.getsockname()[1], os.getpgid(0)) in (True, None)
    with pytest.raises(EndpointUnavailable):
        raise ForeignServer("x")
