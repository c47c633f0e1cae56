"""`vlmocr models fetch | status` and `check_model_dir`, against a loopback Hugging Face Hub.

The stand-in Hub (vlmocr.testing.fake_hub) is a real HTTP server on 127.0.0.1 (aiohttp in a
thread) that answers the endpoints huggingface_hub's ``snapshot_download`` uses for a model repo.

Nothing here may reach the internet: the endpoint is always the loopback URL, and a guard on
``socket.getaddrinfo`` fails any test that resolves another host.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from vlmocr.exceptions import EndpointUnavailable, ExitCode, UsageError
from vlmocr.settings import models
from vlmocr.testing.fake_hub import (
    FILES_MAIN,
    FILES_OLD,
    REPO_ID,
    SHA_MAIN,
    SHA_OLD,
    SHA_UNKNOWN,
    FakeHub,
    serve_hub_in_thread,
    sha256,
    standard_hub,
)


@pytest.fixture
def hub():
    with serve_hub_in_thread(standard_hub()) as state:
        yield state


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture(autouse=True)
def offline_hub_env(tmp_path, monkeypatch):
    """No token, a private HF_HOME, online mode on, telemetry off — and no host but loopback."""
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "HF_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    from huggingface_hub import constants

    # huggingface_hub reads these at import time: set them where it looks
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"), raising=False)
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"), raising=False)

    foreign: list[str] = []
    real = socket.getaddrinfo

    def guarded(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name not in LOOPBACK:
            foreign.append(str(name))
            raise socket.gaierror(f"test guard: no internet ({name})")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    yield
    assert not foreign, f"tried to reach {foreign}"


def fetch(hub: FakeHub, dest: Path, revision: str = SHA_MAIN, **kwargs) -> models.ModelManifest:
    return models.fetch_model(REPO_ID, revision, dest, endpoint=hub.url, **kwargs)


def cli(*args: str) -> int:
    from vlmocr.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code)


def downloads(hub: FakeHub) -> list[str]:
    return [p for m, p in hub.requests if m == "GET" and "/resolve/" in p]


# --------------------------------------------------------------------------------------------
# fetch
# --------------------------------------------------------------------------------------------


def test_fetch_pinned_commit_writes_a_correct_manifest(hub, tmp_path):
    dest = tmp_path / "model"
    man = fetch(hub, dest)
    assert (man.repo, man.revision, man.commit) == (REPO_ID, SHA_MAIN, SHA_MAIN)
    assert datetime.fromisoformat(man.fetched_at).tzinfo is not None
    # every served file, byte for byte, and its sha256 computed over the served bytes
    for path, data in FILES_MAIN.items():
        assert (dest / path).read_bytes() == data
    assert [(f.path, f.bytes, f.sha256) for f in man.files] == sorted(
        (p, len(d), sha256(d)) for p, d in FILES_MAIN.items())
    assert man.hub_verified == len(FILES_MAIN)  # LFS sha256 for the weights, git blob ids for the rest
    # the manifest on disk is the same, and excludes itself and huggingface_hub's bookkeeping
    on_disk = json.loads((dest / models.MANIFEST_NAME).read_text())
    assert on_disk["commit"] == SHA_MAIN and on_disk["revision"] == SHA_MAIN and on_disk["repo"] == REPO_ID
    assert on_disk["file_count"] == len(FILES_MAIN) and on_disk["total_bytes"] == sum(map(len, FILES_MAIN.values()))
    assert on_disk["endpoint"] == hub.url
    assert (dest / ".cache" / "huggingface").is_dir()
    assert not any(f["path"].startswith(".cache/") or f["path"] == models.MANIFEST_NAME for f in on_disk["files"])
    assert models.read_manifest(dest) == man
    # every file came from the pinned commit
    assert sorted(downloads(hub)) == sorted(f"/{REPO_ID}/resolve/{SHA_MAIN}/{p}" for p in FILES_MAIN)


def test_fetch_older_commit_gets_that_commits_files(hub, tmp_path):
    man = fetch(hub, tmp_path / "old", revision=SHA_OLD.upper())  # a sha in capitals is still a sha
    assert man.commit == SHA_OLD
    assert [f.path for f in man.files] == sorted(FILES_OLD)
    assert (tmp_path / "old" / "model.safetensors").read_bytes() == FILES_OLD["model.safetensors"]


@pytest.mark.parametrize("rev", ["main", "v1.0", "3f2a9c1", SHA_MAIN + "0"])
def test_a_branch_tag_or_short_sha_is_not_a_pin(hub, tmp_path, rev):
    with pytest.raises(UsageError, match="40-hex"):
        fetch(hub, tmp_path / "m", revision=rev)
    assert hub.requests == []  # refused before asking the Hub
    assert not (tmp_path / "m").exists()
    assert cli("models", "fetch", REPO_ID, "--revision", rev, "--to", str(tmp_path / "m"),
               "--endpoint", hub.url) == ExitCode.usage


def test_allow_branch_resolves_once_and_records_the_commit(hub, tmp_path):
    man = fetch(hub, tmp_path / "m", revision="main", allow_branch=True)
    assert man.revision == "main" and man.commit == SHA_MAIN
    # the branch is resolved once; every download names the commit, so a moving branch cannot mix commits
    asked = [p for _, p in hub.requests if "/api/" in p]
    assert asked[0] == f"/api/models/{REPO_ID}/revision/main" and all(SHA_MAIN in p for p in asked[1:])
    assert downloads(hub) and all(f"/resolve/{SHA_MAIN}/" in p for p in downloads(hub))
    models.check_model_dir(tmp_path / "m", SHA_MAIN)
    with pytest.raises(UsageError, match="branch or tag"):
        models.check_model_dir(tmp_path / "m", "main")


def test_include_patterns_fetch_only_matching_files(hub, tmp_path):
    man = fetch(hub, tmp_path / "m", include=["*.json"])
    assert [f.path for f in man.files] == sorted(p for p in FILES_MAIN if p.endswith(".json"))
    assert man.include == ["*.json"]
    assert not (tmp_path / "m" / "model.safetensors").exists()


def test_unknown_revision_and_repo_are_usage_errors(hub, tmp_path):
    with pytest.raises(UsageError, match="no revision"):
        fetch(hub, tmp_path / "a", revision=SHA_UNKNOWN)
    with pytest.raises(UsageError, match="not found"):
        models.fetch_model("acme/nope", SHA_MAIN, tmp_path / "b", endpoint=hub.url)
    with pytest.raises(UsageError, match="not a repo id"):
        models.fetch_model("../etc", SHA_MAIN, tmp_path / "c", endpoint=hub.url)
    assert not (tmp_path / "a" / models.MANIFEST_NAME).exists()


def test_unreachable_hub_is_endpoint_unavailable(tmp_path):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EndpointUnavailable, match="cannot reach"):
        models.fetch_model(REPO_ID, SHA_MAIN, tmp_path / "m", endpoint=f"http://127.0.0.1:{port}")


def test_offline_mode_is_refused_with_a_clear_message(hub, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UsageError, match="HF_HUB_OFFLINE"):
        fetch(hub, tmp_path / "m")
    assert hub.requests == []


def test_destination_must_be_new_empty_or_the_same_snapshot(hub, tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        fetch(hub, foreign)
    assert (foreign / "notes.txt").read_text() == "mine" and hub.requests == []

    dest = tmp_path / "m"
    fetch(hub, dest, revision=SHA_OLD)
    with pytest.raises(UsageError, match="one directory, one commit"):
        fetch(hub, dest, revision=SHA_MAIN)
    assert models.read_manifest(dest).commit == SHA_OLD
    (tmp_path / "empty").mkdir()
    assert fetch(hub, tmp_path / "empty").commit == SHA_MAIN


def test_refetch_is_a_no_op_and_repairs_a_locally_changed_file(hub, tmp_path):
    dest = tmp_path / "m"
    fetch(hub, dest)
    first = len(downloads(hub))
    fetch(hub, dest)  # same commit: nothing downloaded again
    assert len(downloads(hub)) == first
    # a file edited in place: huggingface_hub's metadata still says "downloaded", the Hub listing does not
    weights = dest / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF
    weights.write_bytes(bytes(data))
    man = fetch(hub, dest)
    assert weights.read_bytes() == FILES_MAIN["model.safetensors"]
    assert {f.path: f.sha256 for f in man.files}["model.safetensors"] == sha256(FILES_MAIN["model.safetensors"])
    assert downloads(hub)[first:] == [f"/{REPO_ID}/resolve/{SHA_MAIN}/model.safetensors"]


def test_bytes_that_do_not_match_the_hub_listing_fail_and_write_no_manifest(hub, tmp_path):
    good = FILES_MAIN["tokenizer.json"]
    hub.corrupt["tokenizer.json"] = good.replace(b'"a"', b'"x"')  # same size, other bytes
    with pytest.raises(models.ModelDirChanged, match="tokenizer.json") as exc:
        fetch(hub, tmp_path / "m")
    assert exc.value.exit_code == ExitCode.incomplete
    assert not (tmp_path / "m" / models.MANIFEST_NAME).exists()


# --------------------------------------------------------------------------------------------
# status --verify
# --------------------------------------------------------------------------------------------


def test_status_and_verify_detect_changed_missing_and_extra_files(hub, tmp_path, capsys):
    dest = tmp_path / "m"
    fetch(hub, dest)
    capsys.readouterr()
    assert cli("models", "status", str(dest)) == ExitCode.ok
    out = capsys.readouterr().out
    assert REPO_ID in out and SHA_MAIN in out and f"{len(FILES_MAIN)} files" in out
    assert cli("models", "status", str(dest), "--verify", "--json") == ExitCode.ok
    status = json.loads(capsys.readouterr().out)
    assert status["verify"] == {"ok": True, "checked": len(FILES_MAIN), "missing": [], "changed": [], "extra": []}
    assert status["total_bytes"] == sum(map(len, FILES_MAIN.values()))

    weights = dest / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # same size: only the hash can tell
    weights.write_bytes(bytes(data))
    (dest / "processor" / "preprocessor_config.json").unlink()
    (dest / "stray.bin").write_bytes(b"x")
    (dest / ".cache" / "huggingface" / "other").write_text("bookkeeping is not a model file")

    assert cli("models", "status", str(dest), "--verify", "--json") == ExitCode.incomplete
    verify = json.loads(capsys.readouterr().out)["verify"]
    assert verify == {"ok": False, "checked": len(FILES_MAIN) - 1, "missing": ["processor/preprocessor_config.json"],
                      "changed": ["model.safetensors"], "extra": ["stray.bin"]}
    assert cli("models", "status", str(dest), "--verify") == ExitCode.incomplete
    out = capsys.readouterr().out
    assert "changed: model.safetensors" in out and "missing: processor/preprocessor_config.json" in out
    assert "NOT verified" in out
    assert cli("models", "status", str(dest)) == ExitCode.ok  # without --verify: facts only


def test_status_of_a_directory_without_manifest_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    assert cli("models", "status", str(tmp_path / "d"), "--verify") == ExitCode.usage
    assert models.MANIFEST_NAME in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# check_model_dir (what `vlmocr serve` calls for a local directory)
# --------------------------------------------------------------------------------------------


def test_check_model_dir_accepts_the_right_revision_and_refuses_others(hub, tmp_path):
    dest = tmp_path / "m"
    fetch(hub, dest)
    models.check_model_dir(dest, SHA_MAIN)
    models.check_model_dir(str(dest), SHA_MAIN.upper())
    models.check_model_dir(dest, None)  # no revision asked: the manifest must still exist
    with pytest.raises(UsageError) as exc:
        models.check_model_dir(dest, SHA_OLD)
    assert SHA_OLD in str(exc.value) and SHA_MAIN in str(exc.value)

    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(UsageError, match=models.MANIFEST_NAME):
        models.check_model_dir(bare, SHA_MAIN)
    with pytest.raises(UsageError, match="not a directory"):
        models.check_model_dir(tmp_path / "nowhere", SHA_MAIN)

    # `vlmocr serve` refuses a local model directory of another commit before starting anything.
    from vlmocr.cluster.serve.plan import plan_server

    with pytest.raises(UsageError, match=SHA_OLD):
        plan_server("qwen3-vl", model_path=dest, revision=SHA_OLD, workdir=tmp_path / "w")
    plan = plan_server("qwen3-vl", model_path=dest, revision=SHA_MAIN, workdir=tmp_path / "w2")
    assert str(dest) in plan.argv

    (dest / "tokenizer.json").unlink()
    with pytest.raises(UsageError, match="missing.*tokenizer.json"):
        models.check_model_dir(dest, SHA_MAIN)


# --------------------------------------------------------------------------------------------
# the real command, as a user runs it (HF_ENDPOINT names the Hub)
# --------------------------------------------------------------------------------------------


def test_cli_fetch_and_status_end_to_end(hub, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update({"HF_HOME": str(tmp_path / "hf-home"), "HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0",
                "TRANSFORMERS_OFFLINE": "0", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                # anything that is not loopback goes to a dead proxy
                "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
                "ALL_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"})
    dest = tmp_path / "model dir"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "vlmocr", *args], check=False, capture_output=True, text=True, env=env,
                              timeout=120)

    done = run("models", "fetch", REPO_ID, "--revision", SHA_MAIN, "--to", str(dest), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["commit"] == SHA_MAIN and summary["file_count"] == len(FILES_MAIN)
    assert summary["endpoint"] == hub.url

    refused = run("models", "fetch", REPO_ID, "--revision", "main", "--to", str(tmp_path / "other"))
    assert refused.returncode == ExitCode.usage and "--allow-branch" in refused.stderr

    ok = run("models", "status", str(dest), "--verify")
    assert ok.returncode == 0, ok.stderr
    assert "verified: all" in ok.stdout
    (dest / "config.json").write_text("{}")
    bad = run("models", "status", str(dest), "--verify")
    assert bad.returncode == ExitCode.incomplete and "changed: config.json" in bad.stdout
