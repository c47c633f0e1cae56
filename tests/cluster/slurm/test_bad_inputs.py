"""A shard with an unreadable file on the real single-node SLURM (scripts/slurm-up.sh): it
finishes (vlmocr exits 9, the task COMPLETED), `slurm submit` again leaves it out, and a
resubmit of the finished shard with `--serve` starts no server.

Seed 000: "The job exits 1 while pages are missing, failed or refused (resubmit)" — a corrupt PDF
is read no better on resubmit, so it must not keep its shard FAILED and the model loading for
nothing. The server is the stand-in tests/cluster/fake_vllm behind a wrapper that leaves a file
the moment it is executed, before anything else."""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys

import pytest

from support.serve_standin import FAKE
from support.slurm import cli, write_exe
from vlmocr.testing.pagecode import make_coded_pdf

pytestmark = pytest.mark.timeout(300)


def _task(run, k: int = 1) -> dict:
    return json.loads((run / "slurm" / "tasks" / f"bulk-{k}.json").read_text())


def test_a_shard_with_a_corrupt_file_finishes_and_is_not_resubmitted_nor_served_again(slurm, tmp_path):
    corpus = tmp_path / "in"
    corpus.mkdir()
    make_coded_pdf(corpus / "good.pdf", [1, 2])
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4 truncated in transfer")
    started = tmp_path / "vllm-executed"
    vllm = write_exe(tmp_path / "vllm", f"#!/bin/sh\n: > {shlex.quote(str(started))}\n"
                                        f"exec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} \"$@\"\n")
    env = {"VLMOCR_VLLM_BIN": str(vllm), "PATH": os.environ["PATH"]}
    run = tmp_path / "run"
    args = ("slurm", "submit", str(corpus), "--out", str(run), "--shards", "1", "--time", "10", "--json",
            "--serve", "qwen3-vl", "--workers", "1")
    res = cli(*args, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)["job_id"]
    try:
        assert slurm.wait(job, timeout=180) == "COMPLETED", slurm.task_states(job)  # 9 is done, not FAILED
    finally:
        subprocess.run(["scancel", job], capture_output=True, check=False)
    assert started.exists()  # the first run did serve its model
    assert _task(run)["exit_code"] == 9
    shard = run / "shards" / "1"
    rows = list(csv.DictReader((shard / "bad_inputs.csv").open(encoding="utf-8")))
    assert [(r["doc_id"], r["page"]) for r in rows] == [("broken", "0")] and rows[0]["reason"]
    log = (run / "slurm" / "logs" / f"{job}_1.out").read_text()
    assert "bad_input=1" in log and "vlmocr exited 9: finished; some inputs are unreadable" in log

    # `slurm submit` again: the shard owes nothing, nothing is submitted, and it says why.
    started.unlink()
    again = cli(*args, cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["job_id"] is None and second["skipped_shards"] == [1]
    assert "owe nothing" in second["note"] and "bad_inputs.csv" in second["note"]

    # Forced through (--all-shards): the task resumes a finished shard under --serve and decides
    # before starting a server that nothing is owed: the stand-in is never executed.
    forced = cli(*args, "--all-shards", cwd=tmp_path, env=env)
    assert forced.returncode == 0, forced.stderr
    job2 = json.loads(forced.stdout)["job_id"]
    try:
        assert slurm.wait(job2, timeout=120) == "COMPLETED", slurm.task_states(job2)
    finally:
        subprocess.run(["scancel", job2], capture_output=True, check=False)
    log2 = (run / "slurm" / "logs" / f"{job2}_1.out").read_text()
    assert not started.exists(), log2
    assert "nothing owed" in log2 and "no server started" in log2
    assert _task(run)["exit_code"] == 9
