"""`vlmocr slurm describe RUN|--library LIB --serve PROFILE`: one job describing a run's figures
against the describing model's own server, started on the node (the stand-in
tests/cluster/fake_vllm through VLMOCR_VLLM_BIN: the job inherits the environment) and stopped
with the job; the describe options checked on the login node first. The run is a real page run
of a grounded profile (support/figures.grounded_run)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import run_cli
from support.figures import SERVED, expected_descriptions, figure_finals, grounded_run
from support.serve_standin import FAKE, gone
from vlmocr.exceptions import ExitCode

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    return grounded_run(tmp_path_factory.mktemp("describe-job"))


@pytest.fixture
def run(base_run, tmp_path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(base_run, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest


def test_dry_run_writes_one_describe_job_with_the_options_checked(run, tmp_path):
    res = run_cli("slurm", "describe", str(run), "--serve", "qwen3-vl", "--partition", "gpu", "--gpus-per-task", "1",
                  "--time", "1:00:00", "--signal-lead", "90", "--sbatch-arg", "--exclusive", "--dry-run", "--json",
                  "--max-figures", "5", "--", "--dpi", "150", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    script = Path(result["script"])
    assert script == run.resolve() / "slurm" / "describe.sbatch" and result["job_id"] is None
    text = script.read_text()
    assert [line for line in text.splitlines() if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=vlmocr-describe-run",
        "#SBATCH --output=logs/describe_%j.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --partition=gpu",
        "#SBATCH --gpus-per-task=1",
        "#SBATCH --time=1:00:00",
        "#SBATCH --signal=B:TERM@90",
        "#SBATCH --exclusive",
    ]
    command = [line for line in text.splitlines() if "-m vlmocr describe" in line]
    assert command == [f'"$PYTHON" -m vlmocr describe {shlex.quote(str(run.resolve()))} --dpi 150.0 '
                       "--max-figures 5 --serve qwen3-vl &"]
    assert "--out" not in command[0] and 'trap on_term TERM' in text
    assert not (run / "slurm" / "jobs.json").exists()  # nothing submitted

    # A library: the job's files under LIB/slurm, or under --out DIR.
    lib = tmp_path / "my lib"
    assert run_cli("publish", str(run), "--library", str(lib)).returncode == 0
    res = run_cli("slurm", "describe", "--library", str(lib), "--serve", "qwen3-vl", "--dry-run", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    text = Path(json.loads(res.stdout)["script"]).read_text()
    assert (lib / "slurm" / "describe.sbatch").is_file()
    assert f"-m vlmocr describe --library {shlex.quote(str(lib))} --serve qwen3-vl &" in text
    res = run_cli("slurm", "describe", "--library", str(lib), "--serve", "qwen3-vl", "--out", str(tmp_path / "jobs"),
                  "--dry-run", "--json", cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "jobs" / "slurm" / "describe.sbatch").is_file(), res.stderr

    # Refused on the login node, one line, nothing written.
    shutil.rmtree(run / "slurm")
    for args, says in [
        (("--endpoint", "http://127.0.0.1:9/v1"), "not both"),
        (("--bogus",), "No such option: --bogus"),
        (("--", "--dpi", "5"), "--dpi must be within"),
        (("--profile", "no-such-profile"), "no-such-profile"),
    ]:
        res = run_cli("slurm", "describe", str(run), "--serve", "qwen3-vl", "--dry-run", *args, cwd=tmp_path)
        assert res.returncode == ExitCode.usage and says in res.stderr, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    res = run_cli("slurm", "describe", str(tmp_path), "--serve", "qwen3-vl", "--dry-run", cwd=tmp_path)
    assert res.returncode == ExitCode.usage and "not a run directory" in res.stderr
    res = run_cli("slurm", "describe", "--library", str(run), "--serve", "qwen3-vl", "--dry-run", cwd=tmp_path)
    assert res.returncode == ExitCode.usage and "not a library" in res.stderr
    assert not (run / "slurm").exists()


@pytest.mark.slurm
def test_describe_job_serves_its_model_describes_and_completes(slurm, run, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {"VLMOCR_VLLM_BIN": f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))}", "TMPDIR": str(scratch),
           "VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", "FAKE_VLLM_RECORD": str(tmp_path / "record.json"),
           "FAKE_VLLM_WORKER": "1"}
    res = run_cli("slurm", "describe", str(run), "--serve", "qwen3-vl", "--time", "10", "--json", "--",
                  "--workers", "2", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)["job_id"]
    try:
        state = slurm.wait(job, timeout=240)
    finally:
        subprocess.run(["scancel", job], capture_output=True, check=False)
    log = (run / "slurm" / "logs" / f"describe_{job}.out").read_text(errors="replace")
    assert state == "COMPLETED", log
    recs = figure_finals(run)
    assert {k: r["description"] for k, r in recs.items()} == expected_descriptions()
    assert {(r["model"], r["status"]) for r in recs.values()} == {(SERVED, "ok")}
    assert "ready in" in log and "Described: 3 figures, records=3 ok=3" in log and "vlmocr exited 0" in log
    server = json.loads((tmp_path / "record.json").read_text())
    assert gone(server["pid"]) and gone(server["worker_pid"]), "the server outlived its job"
    (entry,) = json.loads((run / "slurm" / "jobs.json").read_text())["jobs"]
    assert (entry["kind"], entry["job_id"], entry["array"]) == ("describe", job, None)
    assert json.loads((run / "slurm" / "tasks" / "describe.json").read_text())["exit_code"] == 0
