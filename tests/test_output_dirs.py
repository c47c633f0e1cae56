"""export, merge and report replace only what they made themselves: a new or empty folder, or one
holding their marker (store.OUTPUT_MARKER). A run, a library or anybody's folder given as --out
is refused with one line and exit 3, and left exactly as it was. Real commands, real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import run_cli, textlayer_run
from support.documents import make_doc
from support.library import snapshot
from vlmocr.files import OUTPUT_MARKER


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("outdirs")
    src = root / "src"
    make_doc(src, "a.pdf", 1, 2)
    make_doc(src, "b.pdf", 2, 1)
    run = root / "run"
    textlayer_run(run, src)
    lib = root / "lib"
    assert run_cli("publish", str(run), "--library", str(lib)).returncode == 0
    mine = root / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    (mine / "data").mkdir()
    (mine / "data" / "meta.js").write_text("not a report's")
    return {"root": root, "run": run, "lib": lib, "mine": mine}


def refused(proc, target: Path) -> None:
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and str(target) in errors[0] and "new or empty folder" in errors[0], proc.stderr


@pytest.mark.parametrize("fmt", ["hf", "md", "txt", "parquet", "jsonl"])
def test_export_refuses_a_run_a_library_and_a_folder_of_somebody_elses(world, fmt):
    for target in ("run", "lib", "mine"):
        before = snapshot(world[target])
        proc = run_cli("export", str(world["run"]), "--format", fmt, "--out", str(world[target]))
        refused(proc, world[target])
        assert snapshot(world[target]) == before
    assert not list(world["root"].glob(".*.tmp"))


def test_export_writes_a_new_or_empty_folder_and_replaces_only_its_own(world, tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert run_cli("export", str(world["run"]), "--format", "md", "--out", str(out)).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "a.md", "b.md"]
    (out / "a.md").write_text("stale")
    # Its own folder, another format: replaced whole (nothing of the md export lingers).
    assert run_cli("export", str(world["run"]), "--format", "hf", "--out", str(out)).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "README.md", "documents", "pages"]
    # A folder another command made is not export's to replace.
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / OUTPUT_MARKER).write_text("merge\n")
    (merged / "pages.jsonl").write_text("{}\n")
    proc = run_cli("export", str(world["run"]), "--format", "hf", "--out", str(merged))
    refused(proc, merged)
    assert "made by vlmocr merge" in proc.stderr and (merged / "pages.jsonl").read_text() == "{}\n"


def test_export_jsonl_file_replaces_only_an_earlier_export(world, tmp_path):
    records = world["run"] / "pages.jsonl"
    before = records.read_bytes()
    refused_file = run_cli("export", str(world["run"]), "--format", "jsonl", "--out", str(records))
    assert refused_file.returncode == 3 and "not an earlier export" in refused_file.stderr
    assert records.read_bytes() == before
    out = tmp_path / "docs.jsonl"
    for _ in range(2):  # new, then its own earlier export
        assert run_cli("export", str(world["run"]), "--format", "jsonl", "--out", str(out)).returncode == 0
        assert [json.loads(x)["doc_id"] for x in out.read_text().splitlines()] == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]


def test_merge_refuses_a_folder_it_did_not_make(world, tmp_path):
    run = tmp_path / "sharded"
    textlayer_run(run / "shards" / "1", world["root"] / "src" / "a.pdf")
    for target in (world["mine"], world["lib"], run / "shards" / "1"):
        before = snapshot(target)
        refused(run_cli("merge", str(run), "--out", str(target)), target)
        assert snapshot(target) == before
    # RUN/merged: new, then its own (marked); one merged before markers is recognised too.
    assert run_cli("merge", str(run)).returncode == 0
    assert (run / "merged" / OUTPUT_MARKER).read_text() == "merge\n"
    (run / "merged" / OUTPUT_MARKER).unlink()
    assert run_cli("merge", str(run)).returncode == 0
    assert (run / "merged" / "pages.jsonl").is_file()


def test_report_refuses_a_folder_it_did_not_make(world, tmp_path):
    for target in (world["mine"], world["lib"]):
        before = snapshot(target)
        refused(run_cli("report", str(world["run"]), "--out", str(target)), target)
        assert snapshot(target) == before
    out = tmp_path / "report"
    for _ in range(2):  # new, then its own
        assert run_cli("report", str(world["run"]), "--out", str(out)).returncode == 0
    assert (out / OUTPUT_MARKER).read_text() == "report\n" and (out / "index.html").is_file()
    (out / OUTPUT_MARKER).unlink()  # a report built before reports were marked is still its own
    assert run_cli("report", str(world["run"]), "--out", str(out)).returncode == 0
