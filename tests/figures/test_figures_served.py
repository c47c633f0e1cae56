"""`vlmocr describe RUN|--library LIB --serve PROFILE`: the describing model's own server, started
as `run --serve` starts it (here the stand-in tests/cluster/fake_vllm through VLMOCR_VLLM_BIN,
serving page-code answers: a crop carrying figure code C is described as expected_text(C)),
described against, stopped afterwards, and not started at all when no figure is owed.

The run is a real page run of a grounded profile (deepseek-ocr) against the test server, on the
figure PDF of test_figures (real figures drawn in, each with its figure code)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli import run_cli
from support.components import REPO
from support.figures import SERVED, expected_descriptions, figure_finals, grounded_run
from support.serve_standin import fake_env, gone, read_record
from vlmocr.exceptions import ExitCode
from vlmocr.runfolder.rundir import FIGURES_FILE

pytestmark = pytest.mark.timeout(240)

@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    return grounded_run(tmp_path_factory.mktemp("served"))


@pytest.fixture
def run(base_run, tmp_path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(base_run, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest


@pytest.fixture
def scratch(tmp_path) -> Path:
    d = tmp_path / "scratch"
    d.mkdir()
    return d


def test_describe_serve_starts_describes_and_stops_and_starts_nothing_when_nothing_is_owed(run, tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1", VLMOCR_SERVE_ARGS="--max-num-seqs 4")
    res = run_cli("describe", str(run), "--serve", "qwen3-vl", "--workers", "2", env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1].startswith("Described: 3 figures, records=3 ok=3"), res.stdout
    recs = figure_finals(run)
    assert {k: r["description"] for k, r in recs.items()} == expected_descriptions()
    assert {(r["model"], r["status"]) for r in recs.values()} == {(SERVED, "ok")}
    server = read_record(tmp_path)
    assert server["argv"][:2] == ["serve", SERVED] and server["argv"][-2:] == ["--max-num-seqs", "4"]
    assert gone(server["pid"]) and gone(server["worker_pid"])  # no process left
    (log,) = (run / "logs").glob("server-*.log")
    assert "Uvicorn running" in log.read_text()
    assert "stopped" in res.stderr and not list(scratch.glob("vlmocr-serve-*"))
    md = (run / "docs" / "report.md").read_text()
    assert "](../figures/report/p1-f1.png)" in md

    # Again: every figure has its description under the served model: no server is started.
    (tmp_path / "record.json").unlink()
    before = (run / FIGURES_FILE).read_text()
    res = run_cli("describe", str(run), "--serve", "qwen3-vl", "--workers", "2", env=env)
    assert res.returncode == 0, res.stderr
    assert "nothing owed" in res.stderr and "no server started" in res.stderr
    assert res.stdout.strip().splitlines()[-1].startswith("Described: 3 figures, records=3 ok=3"), res.stdout
    assert not (tmp_path / "record.json").exists()  # the stand-in never ran
    assert (run / FIGURES_FILE).read_text() == before
    # A dry run starts none either, and counts nothing owed.
    res = run_cli("describe", str(run), "--serve", "qwen3-vl", "--dry-run", env=env)
    assert res.returncode == 0 and "3 already described, 0 to describe" in res.stdout, res.stdout
    assert not (tmp_path / "record.json").exists()


def test_describe_serve_dry_run_and_usage_errors_start_no_server(run, tmp_path, scratch):
    env = fake_env(tmp_path, scratch)
    res = run_cli("describe", str(run), "--serve", "qwen3-vl", "--dry-run", env=env)
    assert res.returncode == 0 and "0 already described, 3 to describe" in res.stdout, res.stdout
    res = run_cli("describe", str(run), "--serve", "qwen3-vl", "--endpoint", "http://127.0.0.1:9/v1", env=env)
    assert res.returncode == ExitCode.usage and "give --serve PROFILE or --endpoint URL, not both" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    res = run_cli("describe", str(run), "--serve", "no-such-profile", env=env)
    assert res.returncode == ExitCode.usage and "no-such-profile" in res.stderr
    res = run_cli("describe", str(tmp_path), "--serve", "qwen3-vl", env=env)  # not a run
    assert res.returncode == ExitCode.usage and "not a run directory" in res.stderr
    assert not (tmp_path / "record.json").exists()
    assert not (run / FIGURES_FILE).exists()


def test_describe_library_serve_describes_what_the_library_lacks_then_starts_nothing(run, tmp_path, scratch):
    lib = tmp_path / "lib"
    assert run_cli("publish", str(run), "--library", str(lib)).returncode == 0
    env = fake_env(tmp_path, scratch)
    args = ("describe", "--library", str(lib), "--serve", "qwen3-vl", "--workers", "2")
    res = run_cli(*args, env=env)
    assert res.returncode == 0, res.stderr
    line = res.stdout.strip().splitlines()[-1]
    assert "ok=3 missing=0 (now 3); 1 documents published again" in line, line
    (folder,) = (lib / "docs").iterdir()
    text = " ".join((folder / "document.txt").read_text().split())
    assert all(" ".join(d.split()) in text for d in expected_descriptions().values()), text  # alt text: one line
    server = read_record(tmp_path)
    assert gone(server["pid"])
    assert len(list((lib / "logs").glob("server-*.log"))) == 1
    (tmp_path / "record.json").unlink()
    res = run_cli(*args, env=env)
    assert res.returncode == 0, res.stderr
    assert "nothing owed" in res.stderr and "(now 0); 0 documents published again" in res.stdout, res.stdout
    assert not (tmp_path / "record.json").exists()


def test_sigterm_while_describing_stops_the_server(run, tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_WORKER="1", FAKE_VLLM_LATENCY="8")
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "vlmocr", "describe", str(run), "--serve", "qwen3-vl",
                                 "--workers", "2"], env=env, stdout=subprocess.DEVNULL, stderr=err_file, cwd=REPO)
    try:
        server = read_record(tmp_path, timeout=60)
        end = time.monotonic() + 60
        # Describing: the server is ready and the requests (8 s each) are in flight.
        while "describing 3 figures" not in errors.read_text():
            assert proc.poll() is None and time.monotonic() < end, errors.read_text()
            time.sleep(0.1)
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = errors.read_text()
    assert proc.returncode == ExitCode.interrupted, err
    assert gone(server["pid"]) and gone(server["worker_pid"]), "the server outlived describe"
    assert "stopped" in err
