"""`vlmocr slurm fetch`: a model download as a CPU job on the real private SLURM, against the
stand-in Hub on 127.0.0.1 (the job runs on this machine's node, so it reaches the loopback Hub;
anything else goes to a dead proxy). The login-node side makes no network call and refuses a bad
request (exit 3) before anything is written or submitted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlmocr.exceptions import ExitCode
from vlmocr.settings.models import MANIFEST_NAME
from vlmocr.testing.fake_hub import FILES_MAIN, REPO_ID, SHA_MAIN, SHA_OLD, serve_hub_in_thread

DEAD_PROXY = "http://127.0.0.1:9"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The submitting shell: no Hub token or cache settings of this machine, no internet; sbatch
    passes it to the job (--export=ALL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "VLMOCR_PROFILE"))}
    env.update({"HTTP_PROXY": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "ALL_PROXY": DEAD_PROXY,
                "NO_PROXY": "127.0.0.1,localhost", "HOME": str(tmp_path / "home")})
    env.update(extra)
    return env


def _fetch(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vlmocr", "slurm", "fetch", *args], capture_output=True, text=True,
                          env=_env(tmp_path, **env), timeout=120, check=False)


def _profile(tmp_path: Path, revision: str) -> Path:
    path = tmp_path / f"tiny-{revision or 'unpinned'}.toml"
    path.write_text(f'name = "tiny"\nmodel = "{REPO_ID}"\nrevision = "{revision}"\nprompt = "Read it."\n')
    return path


def test_a_fetch_job_downloads_the_pinned_commit_on_a_cpu_node(slurm, tmp_path):
    dest = tmp_path / "models" / "tiny ocr"
    with serve_hub_in_thread() as hub:
        # A cluster-wide offline setting (as GPU jobs want it) must not stop the one job that downloads.
        done = _fetch(tmp_path, REPO_ID, "--revision", SHA_MAIN, "--to", str(dest), "--endpoint", hub.url,
                      "--partition", slurm.partition, "--time", "00:05:00", "--json", HF_HUB_OFFLINE="1")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        job_id = result["job_id"]
        slurm.submitted.append(job_id)  # cancelled at the end of the session if still queued
        state = slurm.wait(job_id, timeout=180)
        log = Path(result["log"])
        assert state == "COMPLETED", log.read_text() if log.exists() else slurm.diagnostics()
        assert any(m == "GET" and "/resolve/" in p for m, p in hub.requests)

    manifest = json.loads((dest / MANIFEST_NAME).read_text())
    assert (manifest["repo"], manifest["commit"], manifest["file_count"]) == (REPO_ID, SHA_MAIN, len(FILES_MAIN))
    assert (dest / "model.safetensors").read_bytes() == FILES_MAIN["model.safetensors"]
    text = log.read_text()
    assert log.parent == tmp_path / "models" / "slurm" / "logs" and job_id in log.name
    assert f"HF_HOME={tmp_path / 'models' / '.hf-home'}" in text  # beside DIR, not in $HOME
    assert "vlmocr models fetch exited 0" in text
    assert f"== next: VLMOCR_SERVE_MODEL_PATH='{dest}' VLMOCR_SERVE_REVISION={SHA_MAIN}" in text
    jobs = json.loads((tmp_path / "models" / "slurm" / "jobs.json").read_text())["jobs"]
    assert [(j["kind"], j["job_id"], j["repo"], j["revision"], j["dir"]) for j in jobs] == [
        ("fetch", job_id, REPO_ID, SHA_MAIN, str(dest))]
    assert result["next"][0] == f"vlmocr models status '{dest}' --verify"


def test_dry_run_writes_a_cpu_script_and_makes_no_network_call(tmp_path):
    profile = _profile(tmp_path, SHA_MAIN)
    dest = tmp_path / "models" / "tiny"
    with serve_hub_in_thread() as hub:
        done = _fetch(tmp_path, str(profile), "--to", str(dest), "--endpoint", hub.url, "--include", "*.json",
                      "--partition", "cpu-short", "--cpus-per-task", "2", "--time", "1:00:00", "--mem", "4G",
                      "--python", "/opt/py env/bin/python", "--dry-run")
        assert done.returncode == 0, done.stderr
        assert hub.requests == []  # the login node only checks and writes
    script = tmp_path / "models" / "slurm" / "vlmocr-fetch-tiny.sbatch"
    text = script.read_text()
    assert [x for x in text.splitlines() if x.startswith("#SBATCH")] == [
        "#SBATCH --job-name=vlmocr-fetch-tiny",
        "#SBATCH --output=logs/vlmocr-fetch-tiny_%j.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --partition=cpu-short",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --time=1:00:00",
        "#SBATCH --mem=4G",
    ]
    assert not any(w in text for w in ("--gres", "--gpus", "--signal"))
    assert "PYTHON='/opt/py env/bin/python'" in text
    assert (f'"$PYTHON" -m vlmocr models fetch {REPO_ID} --revision {SHA_MAIN} --to {dest} '
            f"--endpoint {hub.url} --include '*.json'") in text.splitlines()
    assert "export HF_HUB_OFFLINE=0 TRANSFORMERS_OFFLINE=0" in text
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    assert not (tmp_path / "models" / "slurm" / "jobs.json").exists()  # nothing submitted
    assert "dry run" in done.stdout and f"VLMOCR_SERVE_REVISION={SHA_MAIN}" in done.stdout


@pytest.mark.parametrize("case", ["branch", "unknown-profile", "profile-without-revision", "other-revision",
                                  "dir-of-another-commit"])
def test_a_bad_request_exits_3_before_anything_is_submitted(tmp_path, case):
    dest = tmp_path / "models" / "tiny"
    args = {
        "branch": [REPO_ID, "--revision", "main"],
        "unknown-profile": ["no-such-profile"],
        "profile-without-revision": [str(_profile(tmp_path, ""))],
        "other-revision": [str(_profile(tmp_path, SHA_MAIN)), "--revision", SHA_OLD],
        "dir-of-another-commit": [REPO_ID, "--revision", SHA_OLD],
    }[case]
    if case == "dir-of-another-commit":
        dest.mkdir(parents=True)
        (dest / MANIFEST_NAME).write_text(json.dumps({"repo": REPO_ID, "revision": SHA_MAIN, "commit": SHA_MAIN,
                                                      "fetched_at": "2026-12-01T00:00:00+00:00", "files": []}))
    # no sbatch on PATH: an attempt to submit would end in exit 5 (SLURM unavailable), not 3
    done = _fetch(tmp_path, *args, "--to", str(dest), "--partition", "cpu-short", PATH="/nonexistent")
    assert done.returncode == ExitCode.usage, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    expected = {"branch": "--allow-branch", "unknown-profile": "unknown profile 'no-such-profile'",
                "profile-without-revision": "give --revision", "other-revision": "differs from the revision",
                "dir-of-another-commit": "not " + SHA_OLD}[case]
    assert expected in lines[0]
    assert not (tmp_path / "models" / "slurm").exists()


def test_a_second_fetch_into_the_same_dir_waits_for_the_first(slurm, tmp_path):
    """Two jobs writing one DIR would race: the second is refused while the first is queued."""
    dest = tmp_path / "models" / "tiny"
    args = [REPO_ID, "--revision", SHA_MAIN, "--to", str(dest), "--endpoint", "http://127.0.0.1:9",
            "--partition", slurm.partition, "--time", "00:02:00", "--json"]
    first = _fetch(tmp_path, *args, "--sbatch-arg", "--hold")
    assert first.returncode == 0, first.stderr
    job_id = json.loads(first.stdout)["job_id"]
    slurm.submitted.append(job_id)
    mine = [job_id]
    try:
        second = _fetch(tmp_path, *args)
        assert second.returncode == ExitCode.usage, second.stderr
        assert f"fetch job {job_id} into {dest} is still PENDING" in second.stderr
        other = _fetch(tmp_path, *args[:3], "--to", str(tmp_path / "models" / "other"), *args[5:],
                       "--sbatch-arg", "--hold")
        assert other.returncode == 0, other.stderr  # another DIR beside it is not blocked
        mine.append(json.loads(other.stdout)["job_id"])
        slurm.submitted.append(mine[-1])
    finally:
        for job in mine:
            slurm.cancel(job)
