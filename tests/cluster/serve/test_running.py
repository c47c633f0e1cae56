"""`vlmocr run --serve` and `vlmocr grid --serve`: a server started for the run, pointed at, and
stopped with it (a stand-in server, no GPU here).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from support.cli import run_cli
from support.components import REPO
from support.records import finals
from support.serve_standin import fake_env, gone, read_record, with_nvidia_smi
from vlmocr.exceptions import ExitCode
from vlmocr.runfolder.rundir import git_commit
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


def test_run_serve_as_the_vlm_tier_of_a_cpu_cascade(tmp_path, scratch, coded):
    """`--vlm-tier --serve PROFILE`: vlmocr starts the server for the cascade's last tier; the CPU
    engine reads every page first, the pages it cannot read go to the served model (here: its
    manifest says Russian, which Tesseract has no data for — Tesseract reads the coded pages
    well in English), and the server is stopped with the run."""
    env = fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1")
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"doc_id,path,language\ncoded,{coded},rus\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    res = run_cli("run", "--manifest", str(manifest), "--out", str(run_dir), "--engine", "tesseract", "--vlm-tier",
                  "--serve", "qwen3-vl", "--workers", "2", env=env)
    assert res.returncode == 0, res.stderr
    recs = finals(run_dir)
    assert len(recs) == 4
    for (_doc, page), rec in recs.items():
        assert [t["engine"] for t in rec["tiers"]] == ["tesseract", "openai"], rec
        assert rec["tiers"][0]["went_on"] == "no data for rus"
        assert (rec["engine"], rec["status"], rec["text"]) == ("openai", "ok", expected_text(page))
        assert rec["model"] == "Qwen/Qwen3-VL-8B-Instruct"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["settings"]["vlm_tier"] and info["settings"]["serve"] == "qwen3-vl"
    assert info["current"]["reader"]["vlm_tier"]["escalated"] == 4
    rec = read_record(tmp_path)
    assert gone(rec["pid"]) and gone(rec["worker_pid"]) and "stopped" in res.stderr
    assert not list(scratch.glob("vlmocr-serve-*"))


def test_run_serve_records_what_it_started_and_says_so_once_ready(tmp_path, scratch, coded):
    """Seed 000's job log: "server ready time, the nvidia-smi memory line, pages-per-second lines",
    in that order; run.json and every record name the server, its version and the revision, and
    run.json the GPU it came up on (the nvidia-smi stand-in, asked once)."""
    calls = tmp_path / "nvidia-smi.jsonl"
    env = with_nvidia_smi(fake_env(tmp_path, scratch, VLMOCR_SERVE_REVISION="r9", CUDA_VISIBLE_DEVICES="0",
                                   FAKE_VLLM_VERSION="0.11.0", FAKE_VLLM_START_DELAY="1"), log=str(calls))
    run_dir = tmp_path / "run"
    res = run_cli("run", str(coded), "--out", str(run_dir), "--serve", "qwen3-vl", "--workers", "2", env=env)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    ready = next(i for i, line in enumerate(lines) if " ready in " in line)
    match = re.fullmatch(r"vllm 0\.11\.0 ready in (\d+) s at http://127\.0\.0\.1:\d+/v1 serving "
                         r"Qwen/Qwen3-VL-8B-Instruct \(pid \d+\); vlmocr \S+", lines[ready])
    assert match and int(match.group(1)) >= 1, lines[ready]  # it loaded for a second
    assert lines[ready + 1] == "nvidia-smi memory: GPU 0 NVIDIA A100-SXM4-80GB 71234 MiB used of 81920 MiB"
    assert any("pages/s" in line for line in lines[ready + 2:])
    assert [json.loads(c) for c in calls.read_text().splitlines()] == [
        ["--query-gpu=index,name,memory.total,memory.used", "--format=csv,noheader", "-i", "0"]]
    info = json.loads((run_dir / "run.json").read_text())
    server = info["server"]
    assert server["started_by_vlmocr"] is True and server["ready_seconds"] >= 1
    assert server["gpus"] == [{"index": "0", "name": "NVIDIA A100-SXM4-80GB", "memory_total": "81920 MiB",
                               "memory_used": "71234 MiB"}]
    assert (server["name"], server["version"], server["version_source"]) == ("vllm", "0.11.0", "/version")
    assert (server["revision"], server["revision_source"]) == ("r9", "VLMOCR_SERVE_REVISION")
    # the commit of this checkout, or None where there is none (.ci/run tests a copy without .git)
    assert info["versions"]["vllm"] == "0.11.0" and info["git_commit"] == git_commit()
    assert {(r["revision"], r["server"]) for r in finals(run_dir).values()} == {("r9", "vllm 0.11.0")}


def test_run_serve_sglang_from_a_pinned_directory(tmp_path, scratch, coded):
    """SGLang tells its version in /get_server_info; the directory it serves tells the commit."""
    from vlmocr.settings.models import ModelManifest, scan_dir, write_manifest

    model = tmp_path / "models" / "qwen3-vl"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    commit = "0123456789abcdef0123456789abcdef01234567"
    write_manifest(model, ModelManifest(repo="Qwen/Qwen3-VL-8B-Instruct", revision=commit, commit=commit,
                                        fetched_at="2026-10-17T00:00:00Z", files=scan_dir(model)))
    env = fake_env(tmp_path, scratch, VLMOCR_SERVE_MODEL_PATH=str(model), VLMOCR_SERVE_REVISION=commit,
                   FAKE_VLLM_VERSION="0.5.10.post1")
    # No nvidia-smi here, even on a machine with a GPU.
    env["PATH"] = os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if not os.path.exists(f"{d}/nvidia-smi"))
    run_dir = tmp_path / "run"
    res = run_cli("run", str(coded), "--out", str(run_dir), "--serve", "qwen3-vl", "--server-kind", "sglang",
                  "--workers", "2", env=env)
    assert res.returncode == 0, res.stderr
    assert "nvidia-smi memory: not available (no nvidia-smi, or it did not answer)" in res.stderr
    server = json.loads((run_dir / "run.json").read_text())["server"]
    assert (server["name"], server["version"], server["version_source"]) == ("sglang", "0.5.10.post1",
                                                                             "/get_server_info")
    assert (server["revision"], server["revision_source"], server["root"]) == (commit, "manifest", str(model))
    assert server["gpus"] is None
    assert {(r["revision"], r["server"]) for r in finals(run_dir).values()} == {(commit, "sglang 0.5.10.post1")}


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


# The window: `vlmocr run` as `python -m vlmocr` runs it, but lingering (here, in the test's code)
# once the run's event loop has ended and before --serve stops the server; it says so in a file.
LINGERING_RUN = """
import os, sys, time
from pathlib import Path
from vlmocr.stopsignal import listen_early
listen_early()
from vlmocr.cli import main, run_cmd
real = run_cmd.run_pages
def run_then_linger(*args, **kwargs):
    summary = real(*args, **kwargs)
    Path(os.environ["LINGER_FLAG"]).touch()
    end = time.monotonic() + 20
    while time.monotonic() < end:
        time.sleep(0.01)
    return summary
run_cmd.run_pages = run_then_linger
main(sys.argv[1:])
"""


def _sigterm_once(proc: subprocess.Popen, err_path, window) -> None:
    """SIGTERM ``proc`` once ``window()`` says it is in the window."""
    try:
        end = time.monotonic() + 30
        while not window():
            assert proc.poll() is None and time.monotonic() < end, err_path.read_text()
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_serve_sigterm_once_the_loop_has_ended_still_stops_the_server(tmp_path, scratch, coded):
    """asyncio leaves SIGTERM's default action behind when the run's event loop ends: a SIGTERM
    from then until the server is stopped killed vlmocr outright, its server (here: the worker
    of its group) left behind. Now it stops the server, removes its caches and exits 130."""
    flag = tmp_path / "lingering"
    env = {**fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1"), "LINGER_FLAG": str(flag)}
    run_dir = tmp_path / "run"
    err_path = tmp_path / "vlmocr.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", LINGERING_RUN, "run", str(coded), "--out", str(run_dir),
                                 "--serve", "qwen3-vl", "--workers", "2"],
                                env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
    rec = read_record(tmp_path)
    _sigterm_once(proc, err_path, flag.exists)
    err = err_path.read_text()
    assert proc.returncode == ExitCode.interrupted, (proc.returncode, err)
    assert gone(rec["pid"], 5) and gone(rec["worker_pid"], 5), "the server outlived vlmocr"
    assert f"(pid {rec['pid']}) stopped" in err
    assert not list(scratch.glob("vlmocr-serve-*"))  # its caches went with it
    assert len(finals(run_dir)) == 4 and json.loads((run_dir / "run.json").read_text())["summary"]


SCORING_GRID = """
import os, sys, time
from pathlib import Path
from vlmocr.stopsignal import listen_early
listen_early()
from vlmocr.cli import main
from vlmocr.trials import grid
real = grid.score
def score_slowly(*args, **kwargs):
    # The window made wide and sure: a timed window (0.2 s into a long bootstrap) was missed on a
    # loaded machine, the test's poll starved until the grid had ended.
    Path(os.environ["SCORING_FLAG"]).touch()
    end = time.monotonic() + 20
    while time.monotonic() < end:
        time.sleep(0.01)
    return real(*args, **kwargs)
grid.score = score_slowly
main(sys.argv[1:])
"""


def test_grid_serve_sigterm_between_cells_still_stops_the_server(tmp_path, scratch):
    """The same between a grid's cells: one cell's loop has ended, the cell is being scored, the
    next one has not started reading."""
    from vlmocr.testing.pagecode import make_coded_png

    truth = tmp_path / "truth"
    truth.mkdir()
    for code in (1, 2):
        make_coded_png(truth / f"p{code}.png", code)
        (truth / f"p{code}.txt").write_text(expected_text(code), encoding="utf-8")
    flag = tmp_path / "scoring"
    env = {**fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1"), "SCORING_FLAG": str(flag)}
    out = tmp_path / "grid"
    err_path = tmp_path / "vlmocr.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", SCORING_GRID, "grid", "--truth", str(truth), "--out", str(out),
                                 "--serve", "qwen3-vl", "--longest-side", "800,1200", "--engine", "openai"],
                                env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
    rec = read_record(tmp_path)
    _sigterm_once(proc, err_path, flag.exists)
    err = err_path.read_text()
    assert proc.returncode == ExitCode.interrupted, (proc.returncode, err)
    assert gone(rec["pid"], 5) and gone(rec["worker_pid"], 5), "the server outlived vlmocr"
    assert f"(pid {rec['pid']}) stopped" in err and "cell 2/2" not in err
    assert not list(scratch.glob("vlmocr-serve-*"))
    assert len(list(out.glob("*/summary.json"))) == 1  # the second cell never started


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
