"""The sbatch scripts `vlmocr slurm` writes: nothing but their commands runs when bash reads them,
whatever the values in their comments and echo lines (no SLURM needed: bash runs the script as
slurmd's batch step would).

Also the scripts `vlmocr slurm submit --dry-run` writes, the values refused in #SBATCH lines, and
the batch shell's handling of SIGTERM (forwarded to vlmocr, or a stop file before it listens).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.components import REPO
from support.slurm import HOSTILE, cli, no_injection, write_exe
from vlmocr.cluster.slurm.script import SlurmOptions, render_script
from vlmocr.cluster.slurm.submit import staged_documents
from vlmocr.exceptions import UsageError
from vlmocr.inputs.sources import derive_doc_id
from vlmocr.runfolder.rundir import RunDir
from vlmocr.testing.pagecode import make_coded_pdf

pytestmark = pytest.mark.timeout(300)


def render(tmp_path: Path, **kwargs) -> str:
    return render_script(**{"kind": "grid", "run_dir": tmp_path / "run", "python": "/bin/true", "shards": None,
                            "run_args": [], "options": SlurmOptions(), "submit_dir": tmp_path,
                            "commit": "abc", "job_name": "t", "command": ["grid"], **kwargs})


def run_script(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    script = tmp_path / "job.sbatch"
    script.write_text(text, encoding="utf-8")
    return subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TMPDIR": str(tmp_path), "SLURM_JOB_ID": "5",
                                                   "SLURM_ARRAY_TASK_ID": "1"})


def test_a_newline_in_the_comment_s_timestamp_stays_in_the_comment(tmp_path):
    text = render(tmp_path, generated_at="2026-01-01\ntouch injected #")
    res = run_script(tmp_path, text)
    assert not (tmp_path / "injected").exists(), text
    assert res.returncode == 0 and "vlmocr exited 0" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("hostile", [
    {"command": ["$(touch injected)"]},
    {"command": ['grid" ; touch injected ; echo "']},
    {"kind": "bulk\ntouch injected", "shards": 1, "command": None},
])
def test_words_written_into_the_script_unquoted_must_be_plain(tmp_path, hostile):
    """The job kind and the vlmocr command name reach file names and an echo line unquoted: any
    other value is refused before a script exists, so none can run when the job starts."""
    try:
        text = render(tmp_path, **hostile)
    except UsageError as err:
        assert "expected a plain lowercase word" in str(err)
        return
    run_script(tmp_path, text)
    assert not (tmp_path / "injected").exists(), text
    pytest.fail("a word that is not plain was written into the script")


def test_dry_run_writes_safe_scripts_and_submits_nothing(tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i, name in enumerate(HOSTILE):
        make_coded_pdf(inputs / name, [500 + i])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "sbatch-called"
    write_exe(bin_dir / "sbatch", f"#!/bin/sh\ntouch {called}\necho 1\n")
    run = tmp_path / "run $(touch PWNED_run) 'q'"
    res = cli("slurm", "submit", str(inputs), "--out", str(run), "--shards", "3", "--partition", "gpu",
              "--gpus-per-task", "1", "--cpus-per-task", "4", "--time", "4:00:00", "--mem", "32G",
              "--mail-user", "me@example.org", "--max-running", "2", "--dry-run",
              "--", "--profile", "generic", "--endpoint", "http://127.0.0.1:9/v1", "--model", "$(touch PWNED_model)",
              cwd=tmp_path, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    # A value the job's run would refuse is refused here, before anything is staged (issue 32).
    bad = cli("slurm", "submit", str(inputs), "--out", str(tmp_path / "other"), "--shards", "1", "--dry-run",
              "--", "--lang", "$(touch PWNED_lang)", cwd=tmp_path)
    assert bad.returncode == 3 and "not a Tesseract language list" in bad.stderr and not (tmp_path / "other").exists()
    assert "dry run" in res.stdout and not called.exists()
    assert not (run / "slurm" / "jobs.json").exists()
    script = (run / "slurm" / "bulk.sbatch").read_text()
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert directives == [
        "#SBATCH --job-name=vlmocr-bulk-run_touch_PWNED_run_q",
        "#SBATCH --array=1-3%2",
        "#SBATCH --output=logs/%A_%a.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --partition=gpu",
        "#SBATCH --gpus-per-task=1",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --time=4:00:00",
        "#SBATCH --mem=32G",
        "#SBATCH --mail-user=me@example.org",
        "#SBATCH --mail-type=END,FAIL",
        "#SBATCH --signal=B:TERM@120",
    ]
    assert '--shard "$K/$N"' in script and 'N=3' in script
    assert '"$PYTHON" -m vlmocr run --manifest "$MANIFEST" --out "$OUT"' in script
    assert "--model '$(touch PWNED_model)'" in script and "--stop-grace 60" in script
    assert "HF_HUB_OFFLINE=1" in script and 'VLLM_CACHE_ROOT="$JOB_TMP/vllm"' in script
    assert "trap on_term TERM" in script and '& \npid=$!' not in script and "wait \"$pid\"" in script
    # No document name reaches the script: only the staged manifest does.
    for name in HOSTILE:
        assert Path(name).stem not in script
    subprocess.run(["bash", "-n", str(run / "slurm" / "bulk.sbatch")], check=True)
    # Staged: ASCII symlinks to the originals, doc ids exactly as `vlmocr run` derives them.
    originals = RunDir(run).originals()
    assert sorted(r["original"] for r in originals) == sorted(str(inputs / n) for n in HOSTILE)
    for r in originals:
        assert r["staged"].isascii() and r["staged"][:4].isdigit()
        assert os.readlink(run / "staged" / r["staged"]) == r["original"]
        assert r["doc_id"] == derive_doc_id(Path(r["original"]).name)
    staged = [d.doc_id for d in staged_documents(run, "bulk")]
    assert sorted(staged) == sorted(derive_doc_id(n) for n in HOSTILE)
    no_injection(tmp_path, REPO)


def test_unsafe_sbatch_values_are_refused(tmp_path):
    for bad in ("a b", "gpu\n#SBATCH --uid=0", "$(id)", "x'y"):
        with pytest.raises(UsageError):
            SlurmOptions(partition=bad).directives()
    with pytest.raises(UsageError):
        SlurmOptions(extra=["--comment=a b"]).directives()
    assert SlurmOptions(extra=["--exclusive", "--nodelist=n[1-3]"]).directives()[-2:] == [
        "--exclusive", "--nodelist=n[1-3]"]


def test_generated_script_runs_vlmocr_and_forwards_sigterm(tmp_path):
    """The batch script run by plain bash as an array task would: argv exactly as planned, hostile
    option values inert, SIGTERM forwarded to vlmocr (here a stand-in) and its exit 130 kept."""
    stub = write_exe(tmp_path / "python-stub", f"""#!{sys.executable}
import json, os, signal, sys, time
if sys.argv[1:3] == ["-m", "vlmocr.cluster.slurm"]:
    print("== versions stub"); sys.exit(0)
json.dump({{"argv": sys.argv[1:], "env": {{k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TMPDIR", "VLLM_CACHE_ROOT")}}}},
          open(os.environ["STUB_OUT"], "w"))
def term(*_):
    open(os.environ["STUB_OUT"] + ".term", "w").write("TERM")
    sys.exit(130)
signal.signal(signal.SIGTERM, term)
time.sleep(60)
""")
    run = tmp_path / "run"
    (run / "staged").mkdir(parents=True)
    (run / "slurm").mkdir()
    text = render_script(kind="bulk", run_dir=run, python=str(stub), shards=4,
                         run_args=["--lang", "$(touch PWNED_lang)", "--endpoint", "http://h/v1?a=`id`"],
                         options=SlurmOptions(), submit_dir=tmp_path, commit="abc", job_name="t")
    script = write_exe(run / "slurm" / "bulk.sbatch", text)
    out = tmp_path / "stub.json"
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "SLURM_ARRAY_TASK_ID": "2", "SLURM_JOB_ID": "77",
                                            "SLURM_ARRAY_JOB_ID": "70", "STUB_OUT": str(out), "TMPDIR": str(tmp_path)})
    deadline = time.monotonic() + 20
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    task = json.loads((run / "slurm" / "tasks" / "bulk-2.json").read_text())
    assert task["state"] == "RUNNING" and task["shard"] == 2 and task["job_id"] == "77"
    proc.send_signal(signal.SIGTERM)  # as slurmctld's B:TERM does: only the batch shell
    log, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130, log
    assert (tmp_path / "stub.json.term").read_text() == "TERM"
    got = json.loads(out.read_text())
    assert got["argv"] == ["-m", "vlmocr", "run", "--manifest", str(run / "staged" / "bulk.csv"), "--out",
                           str(run / "shards" / "2"), "--shard", "2/4", "--lang", "$(touch PWNED_lang)",
                           "--endpoint", "http://h/v1?a=`id`"]
    assert got["env"]["HF_HUB_OFFLINE"] == "1"
    assert got["env"]["TMPDIR"].startswith(str(tmp_path / "vlmocr-77."))
    assert got["env"]["VLLM_CACHE_ROOT"] == got["env"]["TMPDIR"] + "/vllm"
    assert not Path(got["env"]["TMPDIR"]).exists()  # per-job cache removed at exit
    assert "SIGTERM: forwarding to vlmocr" in log and "vlmocr exited 130: interrupted" in log
    task = json.loads((run / "slurm" / "tasks" / "bulk-2.json").read_text())
    assert (task["state"], task["exit_code"]) == ("FINISHED", 130)
    no_injection(tmp_path)


@pytest.mark.parametrize("when", ["while the shell prepares", "while Python starts"])
def test_a_signal_before_vlmocr_listens_is_passed_on_to_record_an_interrupted_run(tmp_path, when):
    """SIGTERM while the batch shell is still preparing (here: during the versions step), or
    after it launched vlmocr but before Python has a handler (a signal then would kill it), must
    not end the task without a record: the shell writes VLMOCR_STOP_FILE instead of signalling,
    vlmocr reads it, records an interrupted run and exits 130; it is never signalled."""
    started = tmp_path / "started"
    stub = write_exe(tmp_path / "python-stub", f"""#!{sys.executable}
import json, os, signal, sys, time
preparing = {when == "while the shell prepares"!r}
if sys.argv[1:3] == ["-m", "vlmocr.cluster.slurm"]:
    if preparing:
        open({str(started)!r}, "w").close()
        time.sleep(1.5)
    sys.exit(0)
if not preparing:
    open({str(started)!r}, "w").close()
    time.sleep(1.5)  # Python's start-up: no SIGTERM handler yet, a signal now would kill this
signal.signal(signal.SIGTERM, lambda *_: open(os.environ["STUB_OUT"] + ".term", "w").write("TERM"))
stop = os.path.exists(os.environ["VLMOCR_STOP_FILE"])
json.dump({{"stop": stop}}, open(os.environ["STUB_OUT"], "w"))
time.sleep(0.5)
sys.exit(130 if stop else 0)
""")
    run = tmp_path / "run"
    (run / "staged").mkdir(parents=True)
    (run / "slurm").mkdir()
    text = render_script(kind="bulk", run_dir=run, python=str(stub), shards=2, run_args=[],
                         options=SlurmOptions(), submit_dir=tmp_path, commit="abc", job_name="t")
    script = write_exe(run / "slurm" / "bulk.sbatch", text)
    out = tmp_path / "stub.json"
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "SLURM_ARRAY_TASK_ID": "1", "SLURM_JOB_ID": "78",
                                            "STUB_OUT": str(out), "TMPDIR": str(tmp_path)})
    deadline = time.monotonic() + 20
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130, log
    said = "signalled before vlmocr started" if when == "while the shell prepares" else "it will read the stop request"
    assert said in log and "vlmocr exited 130: interrupted" in log
    assert json.loads(out.read_text()) == {"stop": True}
    assert not (tmp_path / "stub.json.term").exists()
    task = json.loads((run / "slurm" / "tasks" / "bulk-1.json").read_text())
    assert (task["state"], task["exit_code"]) == ("FINISHED", 130)
