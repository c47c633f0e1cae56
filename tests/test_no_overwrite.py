"""Issue 32, point 2: `triage --out`, `manifest --out` and `dedup --manifest-out` silently replaced
an existing file — RUN/pages.jsonl too (a manifest is .jsonl, so the slip is easy). One rule for
every command that writes: an existing target is refused unless --overwrite, and nothing is written
inside a run or library folder except by the run (or publish) itself."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from support.cli import run_cli
from support.documents import make_text_pdf
from vlmocr.exceptions import ExitCode


@pytest.fixture
def corpus(tmp_path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    make_text_pdf(folder / "a.pdf", [["A page of text that a text layer serves, no model needed."]])
    make_text_pdf(folder / "b.pdf", [["Another page of text, quite different from the first one."]])
    return folder


@pytest.fixture
def run_dir(tmp_path, corpus) -> Path:
    run = tmp_path / "run"
    assert run_cli("run", str(corpus), "--out", str(run), "--engine", "textlayer").returncode == 0
    return run


def test_triage_manifest_and_dedup_refuse_an_existing_file_unless_told(tmp_path, corpus):
    triage = tmp_path / "t.csv"
    assert run_cli("triage", str(corpus), "--out", str(triage), "--workers", "1").returncode == 0
    before = triage.read_bytes()
    for args, option in (
        (("triage", str(corpus), "--out", str(triage), "--workers", "1"), "--out"),
        (("manifest", "--triage", str(triage), "--out", str(triage)), "--out"),
        (("dedup", str(corpus), "--manifest-out", str(tmp_path / "t.csv")), "--manifest-out"),
    ):
        res = run_cli(*args)
        assert res.returncode == ExitCode.usage, (args, res.stderr)
        assert f"{option} {triage} exists; give a new name, or --overwrite" in res.stderr
        assert triage.read_bytes() == before  # untouched
    assert run_cli("triage", str(corpus), "--out", str(triage), "--workers", "1", "--overwrite").returncode == 0
    manifest = tmp_path / "m.csv"
    manifest.write_text("keep me\n")
    res = run_cli("manifest", "--triage", str(triage), "--out", str(manifest), "--overwrite")
    assert res.returncode == 0, res.stderr
    assert next(csv.reader(manifest.open()))[:2] == ["doc_id", "path"]
    res = run_cli("dedup", str(corpus), "--manifest-out", str(manifest), "--overwrite")
    assert res.returncode == 0, res.stderr


def test_nothing_writes_inside_a_run_folder_not_even_with_overwrite(tmp_path, corpus, run_dir):
    raw = (run_dir / "pages.jsonl").read_bytes()
    attempts = [
        ("dedup", str(corpus), "--manifest-out", str(run_dir / "pages.jsonl"), "--overwrite"),
        ("triage", str(corpus), "--out", str(run_dir / "triage.csv"), "--workers", "1", "--overwrite"),
        ("triage", str(corpus), "--out", str(tmp_path / "t2.csv"), "--sheets", str(run_dir / "sheets")),
    ]
    for args in attempts:
        res = run_cli(*args)
        assert res.returncode == ExitCode.usage, (args, res.stderr)
        assert f"{run_dir} is a run folder, which only the run writes" in res.stderr, res.stderr
    assert (run_dir / "pages.jsonl").read_bytes() == raw
    assert not (run_dir / "triage.csv").exists() and not (run_dir / "sheets").exists()
    triage = tmp_path / "t.csv"
    assert run_cli("triage", str(corpus), "--out", str(triage), "--workers", "1").returncode == 0
    res = run_cli("manifest", "--triage", str(triage), "--out", str(run_dir / "docs" / "m.csv"))
    assert res.returncode == ExitCode.usage and "is a run folder" in res.stderr
    assert json.loads((run_dir / "run.json").read_text())  # the run's own files still intact
