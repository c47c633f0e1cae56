"""rundir: run.json read once for every reader, the one source finder (SLURM originals, the
path itself, the roots in order, the run's inputs discovered again), and the store's atomic
writers and now_iso they rely on. Real files, real symlinks, real PDFs."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest

from support.documents import make_text_pdf
from vlmocr.files import atomic_file, write_bytes_atomic, write_json_atomic
from vlmocr.inputs.finder import SourceFinder
from vlmocr.inputs.sources import discover
from vlmocr.runfolder.record import now_iso
from vlmocr.runfolder.rundir import RunDir


def _originals(cluster: Path, rows: list[dict[str, str]]) -> None:
    staged = cluster / "staged"
    staged.mkdir(parents=True, exist_ok=True)
    with (staged / "originals.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["kind", "doc_id", "staged", "original", "pages", "dpi"])
        w.writeheader()
        w.writerows(rows)


# ------------------------------------------------------------------------------ run.json


def test_read_info_says_why_run_json_is_unusable(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert run.read_info() == ({}, "not found")
    run.run_json.write_bytes(b'{"keys": ["k\xff"]}')  # not UTF-8
    data, problem = run.read_info()
    assert data == {} and problem.startswith("unreadable (") and "utf-8" in problem
    run.run_json.write_text("[1, 2]", encoding="utf-8")
    assert run.read_info() == ({}, "unreadable (a JSON list, not an object)")
    assert run.info() == {}
    write_json_atomic(run.run_json, {"keys": ["k1"]})
    assert run.read_info() == ({"keys": ["k1"]}, None)


def test_shard_runs_in_shard_order_and_the_cluster_of_a_shard(tmp_path: Path) -> None:
    for name in ("10", "2", "1", "extra", "empty"):
        (tmp_path / "shards" / name).mkdir(parents=True)
        if name != "empty":
            (tmp_path / "shards" / name / "pages.jsonl").write_text("", encoding="utf-8")
    assert [p.name for p in RunDir(tmp_path).shard_runs()] == ["1", "2", "10", "extra"]
    cwd = os.getcwd()
    os.chdir(tmp_path / "shards" / "2")
    try:  # "." names shard 2 as well as its full path does
        assert RunDir(".").cluster == RunDir(tmp_path.resolve())
    finally:
        os.chdir(cwd)
    assert RunDir(tmp_path).cluster is None


# ------------------------------------------------------------------------------ the source finder


def test_a_shard_finds_the_original_when_the_staged_link_is_gone(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    original = make_text_pdf(tmp_path / "in" / "Weird name.pdf", [["one"]])
    cluster = tmp_path / "RUN"
    _originals(cluster, [{"kind": "bulk", "doc_id": "weird", "staged": "0001.pdf", "original": str(original)}])
    shard = cluster / "shards" / "1"
    shard.mkdir(parents=True)
    finder = SourceFinder(shard)
    # The staged symlink was never made (or was removed): the original is found by the staged name,
    # whether the record spells it bare or as a path under staged/.
    assert finder.find("0001.pdf") == original
    assert finder.find(str(cluster / "staged" / "0001.pdf")) == original
    assert finder.original("0001.pdf") == str(original)
    assert finder.find("0002.pdf") is None and finder.missing() == ["0002.pdf"]


def test_roots_in_order_and_an_absolute_path_only_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    given_root, cwd = tmp_path / "given", tmp_path / "cwd"
    for folder in (given_root, cwd, run.parent, run):
        folder.mkdir(exist_ok=True)
        make_text_pdf(folder / "a.pdf", [[folder.name]])
    monkeypatch.chdir(cwd)
    assert SourceFinder(run, [given_root]).find("a.pdf") == given_root / "a.pdf"
    assert SourceFinder(run).find("a.pdf") == cwd / "a.pdf"
    (cwd / "a.pdf").unlink()
    assert SourceFinder(run).find("a.pdf") == run.parent / "a.pdf"
    (run.parent / "a.pdf").unlink()
    assert SourceFinder(run).find("a.pdf") == run / "a.pdf"
    # An absolute source that is gone is not looked for under the roots by its name.
    assert SourceFinder(run).find(str(tmp_path / "gone" / "a.pdf")) is None


def test_the_manifest_folder_and_the_runs_inputs_discovered_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    pdf = make_text_pdf(inputs / "report 1.pdf", [["x"]])
    listed = tmp_path / "lists"
    listed.mkdir()
    make_text_pdf(listed / "m.pdf", [["m"]])
    (listed / "m.csv").write_text("doc_id,path\nm,m.pdf\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    write_json_atomic(RunDir(run).run_json, {"settings": {"inputs": [str(inputs)], "manifest": str(listed / "m.csv")}})
    monkeypatch.chdir(tmp_path / "run")
    finder = SourceFinder(run)
    assert finder.manifest == listed / "m.csv"
    assert finder.find("m.pdf") == listed / "m.pdf"  # a manifest's row, relative to its folder
    # The record names the input as it was given from another cwd: found by its doc id.
    assert finder.find("elsewhere/report 1.pdf") is None
    doc_id = discover([str(inputs)])[0].doc_id
    assert finder.find("elsewhere/report 1.pdf", doc_id) == pdf


def test_resolve_follows_the_symlink(tmp_path: Path) -> None:
    real = make_text_pdf(tmp_path / "real.pdf", [["r"]])
    run = tmp_path / "run"
    run.mkdir()
    (run / "link.pdf").symlink_to(real)
    assert SourceFinder(run).find("link.pdf") == run / "link.pdf"
    assert SourceFinder(run, resolve=True).find("link.pdf") == real.resolve()


# ------------------------------------------------------------------------------ atomic writers, now_iso


def test_atomic_file_leaves_the_old_file_when_the_writer_fails(tmp_path: Path) -> None:
    target = tmp_path / "thumb.jpg"
    write_bytes_atomic(target, b"old")
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thumb.jpg"]


def test_atomic_file_replaces_a_symlink_over_a_stale_temporary(tmp_path: Path) -> None:
    """A killed writer with our pid left its temporary: os.symlink onto it would fail."""
    link = tmp_path / "0001.pdf"
    link.symlink_to("/old/original.pdf")
    (tmp_path / f".0001.pdf.{os.getpid()}.tmp").symlink_to("/stale")
    with atomic_file(link) as tmp:
        os.symlink("/new/original.pdf", tmp)
    assert os.readlink(link) == "/new/original.pdf"
    assert [p.name for p in tmp_path.iterdir()] == ["0001.pdf"]


def test_now_iso_precision() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", now_iso())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", now_iso("seconds"))
    assert json.loads(json.dumps(now_iso("seconds")))


def test_run_json_reads_back_typed(tmp_path):
    """Issue 28, point 1: run.json has a typed back door (RunDir.run_info), filled by the scheduler
    as a RunInfo instead of a literal; a field another version wrote in another shape is left out
    rather than failing a reader, and fields other writers add are kept."""
    from vlmocr.runfolder.rundir import RunDir, RunInfo

    info = RunInfo(key="k1", keys=["k1"], settings={"engine": "auto"}, shard=None)
    data = info.as_json()
    assert data["schema"] == 1 and data["shard"] is None and data["keys"] == ["k1"]
    assert not {"engine_choice", "server", "workers", "summary"} & set(data)  # written only when set
    (tmp_path / "run.json").write_text(json.dumps({**data, "documents": "many", "merged_from": ["a", "b"],
                                                   "summary": {"exit_code": 0}}))
    back = RunDir(tmp_path).run_info()
    assert back.key == "k1" and back.keys == ["k1"] and back.settings == {"engine": "auto"}
    assert back.documents is None  # not an int: left out, the rest read
    assert back.summary == {"exit_code": 0} and back.model_extra == {"merged_from": ["a", "b"]}
    assert RunDir(tmp_path / "none").run_info() == RunInfo()
