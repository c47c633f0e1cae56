"""What served a run (reading/served.py), asked of a real HTTP server on 127.0.0.1 that answers
as vLLM (GET /version) or as SGLang (GET /get_server_info): run.json's `server` and every VLM
record's `revision` and `server`, the revision's source, asked once per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import run_cli
from support.records import read_records
from vlmocr.settings.models import ModelManifest, scan_dir, write_manifest
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


@pytest.fixture
def coded(tmp_path) -> Path:
    return make_coded_pdf(tmp_path / "coded.pdf", [1, 2, 3])


def pinned_dir(tmp_path: Path) -> Path:
    """A model directory as `vlmocr models fetch` leaves it: files and the manifest of a commit."""
    d = tmp_path / "models" / "unlimited-ocr"
    d.mkdir(parents=True)
    (d / "config.json").write_text('{"model_type": "deepseek_vl_v2"}')
    write_manifest(d, ModelManifest(repo="baidu/Unlimited-OCR", revision=COMMIT, commit=COMMIT,
                                    fetched_at="2026-10-17T00:00:00Z", files=scan_dir(d)))
    return d


def run(doc: Path, out: Path, url: str, *extra: str, env: dict | None = None):
    res = run_cli("run", str(doc), "--out", str(out), "--endpoint", url, "--workers", "1", *extra,
                  env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", "VLMOCR_SERVE_REVISION": "", **(env or {})})
    assert res.returncode == 0, res.stderr
    return res, json.loads((out / "run.json").read_text()), read_records(out)


def test_vllm_version_and_the_pinned_directorys_commit_on_run_json_and_every_record(tmp_path, coded):
    root = pinned_dir(tmp_path)
    config = ServerConfig(models="Unlimited-OCR", server_version="0.11.0", model_root=str(root))
    with serve_in_process(config) as srv:
        _res, info, recs = run(coded, tmp_path / "r", srv.url)
        asked = srv.stats()["info_requests"]
    assert asked == {"/version": 1}  # once per run, not per page
    server = info["server"]
    assert server | {"url": None} == {
        "name": "vllm", "version": "0.11.0", "version_source": "/version", "url": None, "model": "Unlimited-OCR",
        "root": str(root), "revision": COMMIT, "revision_source": "manifest"}
    assert info["versions"]["vllm"] == "0.11.0" and info["versions"]["vlmocr"]
    assert info["key_material"]["revision"] == COMMIT  # the weights read with are in the key
    assert sorted(r["page"] for r in recs) == [1, 2, 3]  # written as they finish, in any order
    for rec in recs:
        assert (rec["revision"], rec["server"]) == (COMMIT, "vllm 0.11.0")
        assert rec["text"] == expected_text(rec["page"])


def test_sglang_tells_its_version_in_get_server_info_and_a_hub_snapshot_its_commit(tmp_path, coded):
    root = f"/scratch/hf/hub/models--baidu--Unlimited-OCR/snapshots/{COMMIT}"
    config = ServerConfig(models="Unlimited-OCR", server_kind="sglang", server_version="0.5.10.post1",
                          model_root=root)
    with serve_in_process(config) as srv:
        _res, info, recs = run(coded, tmp_path / "r", srv.url)
        asked = srv.stats()["info_requests"]
    assert asked == {"/get_server_info": 1}
    server = info["server"]
    assert (server["name"], server["version"], server["version_source"]) == ("sglang", "0.5.10.post1",
                                                                             "/get_server_info")
    assert (server["revision"], server["revision_source"]) == (COMMIT, "/v1/models")
    assert info["versions"]["sglang"] == "0.5.10.post1"
    assert {(r["revision"], r["server"]) for r in recs} == {(COMMIT, "sglang 0.5.10.post1")}


def test_a_declared_revision_when_the_server_shows_none(tmp_path, coded):
    """A repo id as root tells no commit: VLMOCR_SERVE_REVISION is recorded as what it is,
    declared; without it nothing is known, and the records say null rather than guess."""
    with serve_in_process(ServerConfig(models="m", server_version="0.11.0")) as srv:
        _res, info, recs = run(coded, tmp_path / "a", srv.url, env={"VLMOCR_SERVE_REVISION": OTHER})
        _res, bare, bare_recs = run(coded, tmp_path / "b", srv.url)
    assert (info["server"]["revision"], info["server"]["revision_source"]) == (OTHER, "VLMOCR_SERVE_REVISION")
    assert {r["revision"] for r in recs} == {OTHER}
    assert (bare["server"]["revision"], bare["server"]["revision_source"]) == (None, None)
    assert {r["revision"] for r in bare_recs} == {None} and {r["server"] for r in bare_recs} == {"vllm 0.11.0"}
    assert info["key"] != bare["key"]  # other weights, other key: resume reads the pages again
    assert bare["key_material"]["revision"] == ""  # nothing known: the profile's, as runs before recorded


def test_a_declared_revision_the_server_contradicts_is_reported_not_taken(tmp_path, coded):
    root = pinned_dir(tmp_path)
    with serve_in_process(ServerConfig(models="m", model_root=str(root))) as srv:
        res, info, recs = run(coded, tmp_path / "r", srv.url, env={"VLMOCR_SERVE_REVISION": OTHER})
    assert (f"warning: VLMOCR_SERVE_REVISION says revision {OTHER}, but the server serves {root} at {COMMIT} "
            "(manifest): recording what it serves") in res.stderr
    assert info["server"]["revision_declared"] == {"revision": OTHER, "source": "VLMOCR_SERVE_REVISION"}
    assert {r["revision"] for r in recs} == {COMMIT}


def test_the_profiles_pin_is_the_last_resort_and_named_so(tmp_path, coded):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    generic = (Path(__file__).resolve().parents[2] / "src" / "vlmocr" / "profiles" / "generic.toml").read_text()
    (profiles / "pinned.toml").write_text(generic.replace('name = "generic"', 'name = "pinned"')
                                          .replace('revision = ""', f'revision = "{COMMIT}"'))
    with serve_in_process(ServerConfig(models="m", server_version="0.11.0")) as srv:
        _res, info, recs = run(coded, tmp_path / "r", srv.url, "--profile", "pinned",
                               env={"VLMOCR_PROFILE_PATH": str(profiles)})
    assert (info["server"]["revision"], info["server"]["revision_source"]) == (COMMIT, "profile")
    assert {r["revision"] for r in recs} == {COMMIT}


def test_a_cpu_run_has_no_server(tmp_path, coded):
    res = run_cli("run", str(coded), "--out", str(tmp_path / "r"), "--engine", "textlayer", "--workers", "1")
    # The coded pages are images without a text layer: read by it, each is `empty` (review, exit 2).
    assert res.returncode == 2, res.stderr
    assert {r["status"] for r in read_records(tmp_path / "r")} == {"empty"}
    assert "server" not in json.loads((tmp_path / "r" / "run.json").read_text())
    assert all("server" not in r for r in read_records(tmp_path / "r"))
