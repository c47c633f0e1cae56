"""Issue 25, point 5: `slurm release --wait` on a login node asks the scheduler at most once a minute
(seed 000: "run squeue -u $USER and sacct -j <id> in one SSH call, at most once a minute. Never loop
watch against a login node"); meanwhile it reads the gate task's own file, which the job script
writes when its vlmocr has exited. A stand-in `squeue` on PATH counts the questions."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from support.slurm import write_exe
from vlmocr.cluster.slurm.gate import SQUEUE_EVERY, release
from vlmocr.exceptions import VlmocrError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def gated_run(tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "slurm" / "tasks").mkdir(parents=True)
    (run / "slurm" / "gate.json").write_text(json.dumps({"max_cer": 0.05, "gate_job": "4242",
                                                         "truth": str(tmp_path / "no-truth")}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "squeue.log"
    write_exe(bin_dir / "squeue", f"#!/bin/sh\necho \"$@\" >> {log}\necho '4242|4242|N/A|N/A|RUNNING|None|0:10|node1'\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return run, log


def asked(log) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_the_scheduler_is_asked_once_a_minute_not_every_two_seconds(gated_run):
    run, log = gated_run
    assert SQUEUE_EVERY >= 60
    started = time.monotonic()
    with pytest.raises(VlmocrError, match="still RUNNING"):
        release(run, wait=5)
    assert 5 <= time.monotonic() - started < 15
    assert asked(log) == 1  # not the 3 a 2-second poll made


def test_the_gate_tasks_own_file_ends_the_wait_without_asking_again(gated_run):
    run, log = gated_run

    def finish() -> None:
        time.sleep(1.5)
        (run / "slurm" / "tasks" / "gate.json").write_text(json.dumps({"task": "gate", "job_id": "4242",
                                                                       "state": "FINISHED", "exit_code": 0}))

    threading.Thread(target=finish, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(Exception) as err:  # on to scoring, which finds no truth here
        release(run, wait=30)
    assert "truth" in str(err.value) or "no-truth" in str(err.value)
    assert time.monotonic() - started < 10 and asked(log) == 1


def test_a_finished_file_of_an_earlier_gate_job_is_not_taken_for_this_one(gated_run):
    run, log = gated_run
    (run / "slurm" / "tasks" / "gate.json").write_text(json.dumps({"job_id": "17", "state": "FINISHED"}))
    with pytest.raises(VlmocrError, match="still RUNNING"):
        release(run, wait=3)
