"""Issue 32, point 3: passwords on disk and in `ps`. `slurm submit … --endpoint http://user:pass@host/v1`
wrote the password into RUN/slurm/bulk.sbatch (mode 755, on shared storage); the README says URL
credentials are "never written". Jobs now get the URL without them and a credentials file of mode
600 named by its path (VLMOCR_CREDENTIALS_FILE), which is also a way to keep credentials out of
argv everywhere; a Basic-auth header a server echoes is redacted like a bearer key."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from support.cli import run_cli
from support.records import read_records
from vlmocr.exceptions import ExitCode
from vlmocr.testing.hostile_endpoint import hostile_endpoint
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf

SECRET = "s3cret-Pa55word"
URL = f"http://reader:{SECRET}@127.0.0.1:9/v1"


def no_secret_under(folder: Path, but: Path | None = None) -> None:
    for path in folder.rglob("*"):
        if path.is_file() and path != but:
            assert SECRET not in path.read_text(errors="replace"), path


@pytest.fixture
def doc(tmp_path) -> Path:
    return make_coded_pdf(tmp_path / "d.pdf", [1, 2])


def test_slurm_submit_writes_no_password_into_the_job(tmp_path, doc):
    run = tmp_path / "run"
    res = run_cli("slurm", "submit", str(doc), "--out", str(run), "--shards", "1", "--dry-run", "--",
                  "--profile", "generic", "--endpoint", URL, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    creds = run / "slurm" / "credentials"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600 and stat.S_IMODE(creds.parent.stat().st_mode) == 0o700
    assert creds.read_text() == f"user = reader\npassword = {SECRET}\n"
    script = (run / "slurm" / "bulk.sbatch").read_text()
    assert f"export VLMOCR_CREDENTIALS_FILE={creds}" in script and "http://127.0.0.1:9/v1" in script
    no_secret_under(run, but=creds)
    assert SECRET not in res.stdout + res.stderr


def test_slurm_gate_too_and_fetch_refuses_a_password_it_would_write(tmp_path, doc):
    run = tmp_path / "run"
    res = run_cli("slurm", "gate", "--gate", str(doc), "--require", "unknown_words<=0.5", "--out", str(run),
                  "--shards", "1", str(doc), "--dry-run", "--", "--profile", "generic", "--endpoint", URL, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for name in ("gate.sbatch", "bulk.sbatch"):
        assert "VLMOCR_CREDENTIALS_FILE=" in (run / "slurm" / name).read_text()
    no_secret_under(run, but=run / "slurm" / "credentials")
    res = run_cli("slurm", "fetch", "org/model", "--revision", "a" * 40, "--to", str(tmp_path / "models" / "m"),
                  "--endpoint", f"https://u:{SECRET}@hub.example.org", "--dry-run", cwd=tmp_path)
    assert res.returncode == ExitCode.usage and "HF_TOKEN" in res.stderr and SECRET not in res.stderr
    assert not (tmp_path / "models").exists() or not list((tmp_path / "models").rglob("*.sbatch"))


def test_a_credentials_file_keeps_the_key_out_of_argv_and_the_environment(tmp_path, doc):
    key = "sk-file-key-0123456789"
    creds = tmp_path / "creds"
    creds.write_text(f"# the endpoint's key\napi_key = {key}\n")
    creds.chmod(0o600)
    env = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", "VLMOCR_CREDENTIALS_FILE": str(creds)}
    with serve_in_process(ServerConfig(api_key=key)) as srv:
        res = run_cli("run", str(doc), "--out", str(tmp_path / "r"), "--endpoint", srv.url, "--engine", "openai",
                      "--workers", "1", env=env)
        assert res.returncode == 0, res.stderr
        creds.chmod(0o644)
        loose = run_cli("run", str(doc), "--out", str(tmp_path / "r2"), "--endpoint", srv.url, "--engine", "openai",
                        env=env)
    assert sorted(r["text"] for r in read_records(tmp_path / "r")) == sorted([expected_text(1), expected_text(2)])
    assert loose.returncode == ExitCode.usage and "chmod 600" in loose.stderr
    no_secret_under(tmp_path / "r")


def test_an_echoed_basic_auth_header_is_redacted(tmp_path, doc):
    with hostile_endpoint("echo_key") as (url, server):
        res = run_cli("run", str(doc), "--out", str(tmp_path / "r"), "--engine", "openai", "--workers", "1",
                      "--request-timeout", "5", "--endpoint", url.replace("http://", f"http://reader:{SECRET}@"),
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
        sent = server.seen_auth[0]
    assert sent.startswith("Basic ") and res.returncode in (0, 2), res.stderr
    token = sent.split(" ", 1)[1]
    answers = [r for r in read_records(tmp_path / "r") if r["engine"] == "openai"]
    assert answers and all("[redacted]" in r["text"] for r in answers)
    for path in (tmp_path / "r").rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert token not in text and SECRET not in text, path
