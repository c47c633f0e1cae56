"""`vlmocr serve --target hf-jobs` and `vlmocr run --serve … --target hf-jobs` launched for real,
against a local stand-in of the Hugging Face Jobs API (vlmocr.testing.fake_hfjobs) reached by
huggingface_hub itself through HF_ENDPOINT — as `models fetch` is tested against a stand-in Hub.

Seed 004, quoted: "Follow startup with `hf jobs logs -f <id>`; ready at `The server is fired up` /
`Application startup complete`", "The exposed port is at `https://<job_id>--10000.hf.jobs`; the
OpenAI base URL is that plus `/v1`", "`hf jobs cancel <id>` stops it earlier"."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli import run_cli
from support.components import REPO, SYSTEM_PACKAGES_FILE, need
from support.records import finals
from support.serve_standin import fake_env
from vlmocr.exceptions import ExitCode
from vlmocr.testing.fake_hfjobs import JobScript, serve_hfjobs_in_thread
from vlmocr.testing.hub_envs import hub_python, hub_versions
from vlmocr.testing.openai_server import ServerConfig, serve_in_thread
from vlmocr.testing.pagecode import expected_text, make_coded_pdf

pytestmark = pytest.mark.timeout(180)

TOKEN = "hf_standinTOKEN0123456789abcdef"
SGLANG_UP = (
    (0.3, "[2026-06-28 10:00:01] server_args=ServerArgs(model_path='baidu/Unlimited-OCR', ...)"),
    (0.5, "[2026-06-28 10:00:09] Load weight end. type=UnlimitedOCR, dtype=torch.bfloat16"),
    (0.6, "INFO:     Uvicorn running on http://0.0.0.0:10000 (Press CTRL+C to quit)"),
    (2.5, "[2026-06-28 10:00:12] The server is fired up and ready to roll!"),
)
NEVER_READY = JobScript(stages=((0.2, "RUNNING", None),),
                        logs=((0.3, "INFO 06-28 10:00:01 Loading weights from the Hub ..."),))


def hf_env(tmp_path: Path, scratch: Path, jobs_url: str, **extra: str) -> dict[str, str]:
    """The stand-in Jobs API as the Hub, the token in the environment only, a private HF_HOME."""
    return fake_env(tmp_path, scratch, HF_ENDPOINT=jobs_url, HF_TOKEN=TOKEN, HF_HOME=str(tmp_path / "hf-home"),
                    HF_HUB_OFFLINE="0", HF_HUB_DISABLE_TELEMETRY="1", **extra)


def no_token_in(*texts: str) -> bool:
    return all(TOKEN not in text for text in texts)


def test_launch_waits_for_the_ready_line_and_prints_the_endpoint(tmp_path, scratch):
    script = JobScript(stages=((0.2, "RUNNING", None),), logs=SGLANG_UP)
    with serve_hfjobs_in_thread(TOKEN, script) as jobs:
        res = run_cli("serve", "unlimited-ocr", "--server", "sglang", "--target", "hf-jobs", "--json",
                      env=hf_env(tmp_path, scratch, jobs.url))
        finished = time.monotonic()
        assert res.returncode == 0, res.stderr
        job = jobs.only_job()
        # ready from the log, not from the stage: the job runs from 0.2 s, the line comes at 2.5 s
        assert finished - job.created >= 2.5
        details = json.loads(res.stdout)
        assert details["url"] == f"https://{job.id}--10000.hf.jobs/v1" and details["job_id"] == job.id
        assert details["model"] == "baidu/Unlimited-OCR" and details["flavor"] == "a100-large"
        assert details["attention"]["backend"] == "flashinfer"
        spec = job.spec  # what huggingface_hub sent to the Jobs API
        assert spec["dockerImage"] == "lmsysorg/sglang:v0.5.10.post1" and spec["flavor"] == "a100-large"
        assert spec["timeoutSeconds"] == 30 * 60 and spec["expose"]["ports"] == [10000]
        assert spec["command"][:2] == ["bash", "-lc"]
        assert "pip install --no-deps https://github.com/baidu" in spec["command"][2]
        # the token: the job's HF_TOKEN secret and the API's bearer, nowhere else
        assert spec["secrets"] == {"HF_TOKEN": TOKEN} and jobs.state.unauthorized == 0
        assert no_token_in(json.dumps(spec["command"]), json.dumps(spec["environment"]), res.stdout, res.stderr)
        assert ("GET", f"/api/jobs/standin-user/{job.id}/logs") in jobs.state.requests
        assert jobs.state.cancels == []  # `serve` leaves a ready job running, until --timeout or --stop
        assert f"--stop {job.id}" in res.stderr

        # --stop cancels it; NAMESPACE/JOB as `hf jobs ps` names it works too
        res = run_cli("serve", "--target", "hf-jobs", "--stop", f"standin-user/{job.id}",
                      env=hf_env(tmp_path, scratch, jobs.url))
        assert res.returncode == 0 and "cancelled" in res.stderr, res.stderr
        assert jobs.state.cancels == [job.id] and job.stage()[0] == "CANCELED"
        res = run_cli("serve", "--target", "hf-jobs", "--stop", "0123456789abcdef01234567",
                      env=hf_env(tmp_path, scratch, jobs.url))
        assert res.returncode == ExitCode.usage and "not found" in res.stderr and "Traceback" not in res.stderr


def test_a_job_that_fails_to_start_is_one_error_line_and_exit_5(tmp_path, scratch):
    # seed 004: "HF's `h200` nodes currently fail GPU init with `CUDA error 802: system not yet initialized`"
    script = JobScript(stages=((0.2, "RUNNING", None), (0.8, "ERROR", "CUDA error 802: system not yet initialized")),
                       logs=((0.3, "INFO 06-28 10:00:01 Initializing a V1 LLM engine"),
                             (0.5, "RuntimeError: CUDA error 802: system not yet initialized")))
    with serve_hfjobs_in_thread(TOKEN, script) as jobs:
        res = run_cli("serve", "unlimited-ocr", "--target", "hf-jobs", "--flavor", "h200",
                      env=hf_env(tmp_path, scratch, jobs.url))
        job = jobs.only_job()
    assert res.returncode == ExitCode.unavailable, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"HF job {job.id} ended ERROR" in errors[0] and "CUDA error 802" in errors[0]
    assert "RuntimeError: CUDA error 802" in res.stderr  # the log's tail, above the error
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert jobs.state.cancels == []  # it ended by itself: nothing to cancel


def test_a_job_never_ready_is_cancelled_at_the_timeout(tmp_path, scratch):
    with serve_hfjobs_in_thread(TOKEN, NEVER_READY) as jobs:
        started = time.monotonic()
        res = run_cli("serve", "unlimited-ocr", "--target", "hf-jobs", "--health-timeout", "3",
                      env=hf_env(tmp_path, scratch, jobs.url))
        job = jobs.only_job()
        assert res.returncode == ExitCode.unavailable, res.stderr
        assert f"HF job {job.id} was not ready within 3 s" in res.stderr and "Loading weights" in res.stderr
        assert jobs.state.cancels == [job.id] and job.stage()[0] == "CANCELED"
        assert time.monotonic() - started < 60


def test_no_token_or_a_refused_token_is_a_usage_error(tmp_path, scratch):
    with serve_hfjobs_in_thread(TOKEN) as jobs:
        env = hf_env(tmp_path, scratch, jobs.url)
        del env["HF_TOKEN"]
        res = run_cli("serve", "unlimited-ocr", "--target", "hf-jobs", env=env)
        assert res.returncode == ExitCode.usage and "HF_TOKEN is not set" in res.stderr
        assert jobs.state.requests == []
        res = run_cli("serve", "unlimited-ocr", "--target", "hf-jobs", env={**env, "HF_TOKEN": "hf_wrong"})
        assert res.returncode == ExitCode.usage and "401" in res.stderr and "Traceback" not in res.stderr
        assert jobs.state.jobs == {}


def fake_model_server(**config):
    return serve_in_thread(ServerConfig(models=["Qwen/Qwen3-VL-8B-Instruct"], api_key=TOKEN, **config))


def test_run_serve_on_hf_jobs_reads_through_the_job_and_cancels_it(tmp_path, scratch, coded):
    """The stand-in cannot serve the model at https://<id>--8000.hf.jobs: VLMOCR_HF_JOBS_ENDPOINT points
    the job's endpoint at a fake vLLM server that wants the HF token as its API key."""
    with serve_hfjobs_in_thread(TOKEN) as jobs, fake_model_server() as model:
        env = hf_env(tmp_path, scratch, jobs.url, VLMOCR_HF_JOBS_ENDPOINT=model.url, VLMOCR_HF_JOBS_TIMEOUT="2h")
        run_dir = tmp_path / "run"
        res = run_cli("run", str(coded), "--out", str(run_dir), "--serve", "qwen3-vl", "--target", "hf-jobs",
                      "--workers", "1", env=env)
        assert res.returncode == 0, res.stderr
        job = jobs.only_job()
        assert jobs.state.cancels == [job.id]  # cancelled when the run ended
        assert job.spec["timeoutSeconds"] == 2 * 3600
        recs = finals(run_dir)
        assert len(recs) == 4
        assert all(r["status"] == "ok" and r["text"] == expected_text(p) for (_, p), r in recs.items())
        assert len(model.requests()) >= 4  # every request carried the token as its bearer (else 401)
    settings = json.loads((run_dir / "run.json").read_text())["settings"]
    assert settings["serve"] == "qwen3-vl" and settings["endpoint"] == model.url
    logs = list((run_dir / "logs").glob(f"hf-job-*-{job.id}.log"))
    assert len(logs) == 1 and "Application startup complete" in logs[0].read_text()
    # the token was written nowhere: not in the run directory, not in what was printed
    written = [p.read_bytes() for p in run_dir.rglob("*") if p.is_file()]
    assert all(TOKEN.encode() not in data for data in written) and no_token_in(res.stdout, res.stderr)


def start_run(pdf: Path, run_dir: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vlmocr", "run", str(pdf), "--out", str(run_dir), "--serve", "qwen3-vl",
         "--target", "hf-jobs", "--concurrency", "2", "--workers", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def test_ctrl_c_while_reading_cancels_the_job(tmp_path, scratch):
    pdf = make_coded_pdf(tmp_path / "many.pdf", list(range(1, 41)))
    with serve_hfjobs_in_thread(TOKEN) as jobs, fake_model_server(latency=0.5) as model:
        env = hf_env(tmp_path, scratch, jobs.url, VLMOCR_HF_JOBS_ENDPOINT=model.url)
        run_dir = tmp_path / "run"
        proc = start_run(pdf, run_dir, env)
        try:
            pages = run_dir / "pages.jsonl"
            end = time.monotonic() + 90
            while not (pages.exists() and pages.read_text().count("\n") >= 2):
                assert proc.poll() is None and time.monotonic() < end, proc.stderr.read() if proc.poll() else "slow"
                time.sleep(0.1)
            assert jobs.state.cancels == []
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == ExitCode.interrupted, err
        job = jobs.only_job()
        assert jobs.state.cancels == [job.id] and job.stage()[0] == "CANCELED"
        assert 2 <= len(finals(run_dir)) < 40


def test_ctrl_c_while_the_job_starts_cancels_it(tmp_path, scratch):
    with serve_hfjobs_in_thread(TOKEN, NEVER_READY) as jobs:
        env = hf_env(tmp_path, scratch, jobs.url, VLMOCR_HF_JOBS_ENDPOINT="http://127.0.0.1:9/v1")
        proc = start_run(make_coded_pdf(tmp_path / "one.pdf", [1]), tmp_path / "run", env)
        try:
            end = time.monotonic() + 60
            while not any(p.endswith("/logs") for _, p in jobs.state.requests):  # it follows the log
                assert proc.poll() is None and time.monotonic() < end, proc.stderr.read() if proc.poll() else "slow"
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == ExitCode.interrupted, err
        job = jobs.only_job()
        assert jobs.state.cancels == [job.id] and job.stage()[0] == "CANCELED"
        assert not (tmp_path / "run" / "pages.jsonl").exists()


def test_run_target_hf_jobs_refuses_mistakes_before_any_job(tmp_path, scratch, coded):
    with serve_hfjobs_in_thread(TOKEN) as jobs:
        env = hf_env(tmp_path, scratch, jobs.url)
        run = ("run", str(coded), "--out", str(tmp_path / "run"))
        res = run_cli(*run, "--target", "hf-jobs", "--endpoint", "http://127.0.0.1:9/v1", env=env)
        assert res.returncode == ExitCode.usage and "give --serve PROFILE" in res.stderr
        res = run_cli(*run, "--serve", "qwen3-vl", "--target", "hf-jobs",
                      env={**env, "VLMOCR_HF_JOBS_ENDPOINT": "https://{job}--{port}.hf.jobs/v1"})
        assert res.returncode == ExitCode.usage and "VLMOCR_HF_JOBS_ENDPOINT" in res.stderr
        res = run_cli(*run, "--serve", "qwen3-vl", "--target", "hf-jobs", env={**env, "VLMOCR_HF_JOBS_TIMEOUT": "forever"})
        assert res.returncode == ExitCode.usage and "VLMOCR_HF_JOBS_TIMEOUT" in res.stderr
        assert jobs.state.jobs == {} and "Traceback" not in res.stderr


def hub_venv(version: str) -> Path:
    """The environment holding huggingface_hub==VERSION, made by the install step from the
    package list's [hub-env] lines (vlmocr.testing.hub_envs), never fetched here."""
    python = hub_python(version)
    need(python is not None, f"huggingface_hub {version} in an environment of its own "
         "(python -m vlmocr.testing.hub_envs install scripts/system-packages.txt)", f"huggingface_hub=={version}")
    assert python is not None
    return python


def test_the_package_list_holds_the_floor_and_the_release_before_it():
    from vlmocr.cluster.serve.hfjob_launch import HUB_FLOOR

    major, minor = (int(x) for x in HUB_FLOOR.split(".")[:2])
    assert hub_versions(SYSTEM_PACKAGES_FILE) == [f"{major}.{minor}.0", f"{major}.{minor - 1}.0"]


@pytest.mark.parametrize("below_floor", [False, True])
def test_the_oldest_huggingface_hub_pyproject_allows_launches_the_job(tmp_path, scratch, below_floor):
    """Issue 25: `run_job(name=…)` needs huggingface_hub >= 1.24 while pyproject allowed >= 1.19 (a
    TypeError at launch). A real launch against the stand-in Jobs API, with the floor pyproject names
    installed in a venv of its own; the release before the floor fails that launch, so the floor is
    the true one."""
    import re as _re

    from vlmocr.cluster.serve.hfjob_launch import HUB_FLOOR

    floor = _re.search(r'"huggingface_hub>=([0-9.]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    assert floor == HUB_FLOOR
    major, minor = (int(x) for x in floor.split(".")[:2])
    version = f"{major}.{minor - 1 if below_floor else minor}.0"
    python = hub_venv(version)
    script = JobScript(stages=((0.2, "RUNNING", None),), logs=SGLANG_UP)
    with serve_hfjobs_in_thread(TOKEN, script) as jobs:
        env = hf_env(tmp_path, scratch, jobs.url, PYTHONPATH=str(REPO / "src"))
        seen = subprocess.run([str(python), "-c", "import huggingface_hub as h; print(h.__version__)"], env=env,
                              capture_output=True, text=True, check=True).stdout.strip()
        assert seen == version
        res = subprocess.run([str(python), "-m", "vlmocr", "serve", "unlimited-ocr", "--server", "sglang", "--target",
                              "hf-jobs", "--json"], env=env, capture_output=True, text=True, timeout=120)
        if below_floor:
            # said before any job, in one line, rather than a TypeError from inside run_job
            assert res.returncode == ExitCode.usage and f"needs huggingface_hub >= {floor}" in res.stderr, res.stderr
            assert "Traceback" not in res.stderr and not jobs.state.requests
            return
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["job_id"] == jobs.only_job().id
        run_cli("serve", "--target", "hf-jobs", "--stop", jobs.only_job().id, env=env)
