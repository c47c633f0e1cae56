"""`vlmocr run --serve` and `vlmocr grid --serve`: a server started for the run, pointed at, and
stopped with it (a stand-in server, no GPU here).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from support.cli import run_cli
from support.components import REPO
from support.records import finals
from support.serve_standin import fake_env, gone, read_record

from vlmocr.exceptions import ExitCode
from vlmocr.testing.pagecode import expected_text, make_coded_pdf


pytestmark = pytest.mark.timeout(180)


# --------------------------------------------------------------------------------------------
# vlmocr run --serve
# --------------------------------------------------------------------------------------------


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


def test_grid_serve_loads_the_model_once_for_every_cell(tmp_path, scratch):
    from vlmocr.testing.pagecode import make_coded_png

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
