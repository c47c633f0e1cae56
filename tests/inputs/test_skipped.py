"""Every file a folder walk finds is accounted for (issue 19, point 11): documents are read, every
other file is named in run.json and counted by type in the Done line, triage gives it a row, and
hidden entries (.git, .DS_Store) are ignored without being walked into, but counted."""

from __future__ import annotations

import csv
import json

from support.cli import run_cli
from support.documents import make_doc
from vlmocr.inputs.skipped import MAX_PATHS


def _corpus(root):
    make_doc(root, "letter.pdf", 1, 1)
    make_doc(root / "box", "memo.pdf", 2, 1)
    (root / "notes.docx").write_bytes(b"PK\x03\x04 a word file beside the scans")
    (root / "box" / "mets.xml").write_text("<mets/>", encoding="utf-8")
    (root / "box" / "draft.DOCX").write_bytes(b"PK\x03\x04")
    (root / "README").write_text("about the box", encoding="utf-8")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / ".git" / "objects" / "ab").mkdir(parents=True)  # a whole repository: one hidden entry
    for i in range(30):
        (root / ".git" / "objects" / "ab" / f"{i:038x}").write_bytes(b"x")
    make_doc(root, "._letter.pdf", 3, 1)  # macOS resource fork: hidden, not a document
    return root


def test_a_run_names_every_file_it_did_not_read(tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    run = tmp_path / "run"
    res = run_cli("run", str(corpus), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert res.returncode == 0, res.stderr
    done = res.stdout.strip().splitlines()[-1]
    assert done.startswith("Done: 2 pages in 2 docs")
    assert done.endswith("; skipped 4 files: 2 .docx, 1 (no extension), 1 .xml; ignored 3 hidden entries"), done
    assert "skipped 4 files" in res.stderr  # said at the start too, before any page is read
    info = json.loads((run / "run.json").read_text(encoding="utf-8"))
    skipped = info["skipped"]
    assert (skipped["files"], skipped["hidden"]) == (4, 3)
    assert skipped["types"] == {".docx": 2, "(no extension)": 1, ".xml": 1}
    assert sorted((p["path"], p["type"]) for p in skipped["paths"]) == sorted([
        (str(corpus / "README"), "(no extension)"), (str(corpus / "box" / "draft.DOCX"), ".docx"),
        (str(corpus / "box" / "mets.xml"), ".xml"), (str(corpus / "notes.docx"), ".docx")])
    assert info["summary"]["skipped"] == {"files": 4, "types": skipped["types"], "hidden": 3}
    # a run with nothing beside its documents says nothing more
    clean = tmp_path / "clean"
    make_doc(clean, "only.pdf", 4, 1)
    res = run_cli("run", str(clean), "--out", str(tmp_path / "run2"), "--engine", "textlayer", "--workers", "1")
    assert res.returncode == 0 and "skipped" not in res.stdout and "ignored" not in res.stdout


def test_a_million_stray_files_make_a_bounded_run_json(tmp_path):
    corpus = tmp_path / "corpus"
    make_doc(corpus, "scan.pdf", 1, 1)
    for i in range(MAX_PATHS + 50):
        (corpus / f"log{i:04d}.log").write_text("x", encoding="utf-8")
    for i in range(3):
        (corpus / f"t{i}.tmp").write_text("x", encoding="utf-8")
    run = tmp_path / "run"
    res = run_cli("run", str(corpus), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith(f"; skipped {MAX_PATHS + 53} files: {MAX_PATHS + 50} .log, 3 .tmp")
    skipped = json.loads((run / "run.json").read_text(encoding="utf-8"))["skipped"]
    assert skipped["files"] == MAX_PATHS + 53 and skipped["types"] == {".log": MAX_PATHS + 50, ".tmp": 3}
    assert len(skipped["paths"]) == skipped["paths_listed"] == MAX_PATHS  # counts cover all, paths the first


def test_a_folder_of_no_documents_is_one_line_naming_what_it_holds(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.docx").write_bytes(b"PK")
    res = run_cli("run", str(tmp_path / "in"), "--out", str(tmp_path / "run"))
    assert res.returncode == 3 and "Traceback" not in res.stderr
    assert "no documents found" in res.stderr and "skipped 1 file: 1 .docx" in res.stderr


def test_triage_lists_every_file_and_the_plan_counts_only_documents(tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "triage.csv"
    res = run_cli("triage", str(corpus), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "Triage: 2 docs" in res.stdout and "skipped 4 files: 2 .docx" in res.stdout
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [(r["doc_id"], r["status"]) for r in rows] == [
        ("box__memo", "ok"), ("letter", "ok"),  # the documents, in run order
        ("README", "skipped"), ("box__draft.DOCX", "skipped"), ("box__mets.xml", "skipped"),
        ("notes.docx", "skipped")]
    notes = rows[-1]
    assert notes["path"] == str(corpus / "notes.docx") and notes["kind"] == "unsupported"
    assert notes["reason"] == "not a document: .docx (vlmocr run skips it)"
    assert notes["bytes"] == str((corpus / "notes.docx").stat().st_size)
    # what comes after triage counts documents only: no .docx is planned, none is "unreadable"
    plan = run_cli("plan", "--triage", str(out), "--pages-per-hour", "1000")
    assert plan.returncode == 0 and "Corpus: 2 documents" in plan.stdout and "0 unreadable" in plan.stdout
    manifest = run_cli("manifest", "--triage", str(out), "--out", str(tmp_path / "m.csv"))
    assert manifest.returncode == 0 and "0 unreadable" in manifest.stdout + manifest.stderr
    assert sorted(r["doc_id"] for r in csv.DictReader((tmp_path / "m.csv").open(encoding="utf-8"))) == [
        "box__memo", "letter"]
