"""Hostile names: file names that are not UTF-8, doc ids that collide on case-insensitive or
Windows file systems, and cells a spreadsheet would run as formulas. Real files, the real
`vlmocr` command."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from support.cli import cli_in_process
from support.components import need
from support.documents import make_text_pdf
from support.records import read_records
from vlmocr.exceptions import UsageError
from vlmocr.inputs.sources import (
    CSV_FORMULA_START,
    check_doc_id,
    derive_doc_id,
    discover,
    neutralise_cell,
    restore_cell,
)

LINE = "A short line of real text, long enough for the text layer to count."


def pdf(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return make_text_pdf(path, [[LINE]])


def non_utf8(folder: Path, name: bytes) -> Path:
    """A file whose name has bytes that are not UTF-8 (a Latin-1 name from an old archive)."""
    good = pdf(folder / "source.pdf")
    target = os.path.join(os.fsencode(folder), name)
    try:
        os.rename(os.fsencode(good), target)
        taken = True
    except OSError:
        taken = False
    need(taken, "a file system that takes names that are not UTF-8")
    return Path(os.fsdecode(target))


def test_a_non_utf8_file_name_is_read_and_named_not_fatal(tmp_path):
    corpus = tmp_path / "corpus"
    pdf(corpus / "good.pdf")
    non_utf8(corpus, b"Gr\xfc\xdfe.pdf")  # "Grüße" in Latin-1
    (corpus / os.fsdecode(b"kaputt\xe9.pdf")).write_bytes(b"%PDF-1.4 not really")
    run = tmp_path / "run"
    res = cli_in_process("run", str(corpus), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert res.returncode == 9, res.stderr  # the corrupt one is bad_input (exit 9); nothing crashed
    recs = {r["doc_id"]: r for r in read_records(run)}
    assert recs["Gr%FC%DFe"]["status"] == "ok" and LINE in recs["Gr%FC%DFe"]["text"]
    assert recs["Gr%FC%DFe"]["source"].endswith("Gr\\xfc\\xdfe.pdf")
    bad = recs["kaputt%E9"]
    assert bad["status"] == "bad_input" and bad["error"].endswith("kaputt\\xe9.pdf")
    assert recs["good"]["status"] == "ok"

    # triage names it the same way; a manifest made from it finds the file again
    t = tmp_path / "t.csv"
    res = cli_in_process("triage", str(corpus), "--out", str(t), "--workers", "1")
    assert res.returncode == 0, res.stderr
    rows = {r["doc_id"]: r for r in csv.DictReader(t.open(encoding="utf-8"))}
    assert rows["Gr%FC%DFe"]["status"] == "ok" and rows["Gr%FC%DFe"]["path"].endswith("Gr\\xfc\\xdfe.pdf")
    m = tmp_path / "m.csv"
    assert cli_in_process("manifest", "--triage", str(t), "--out", str(m)).returncode == 0
    run2 = tmp_path / "run2"
    res = cli_in_process("run", "--manifest", str(m), "--out", str(run2), "--engine", "textlayer", "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert {r["doc_id"]: r["status"] for r in read_records(run2)} == {"Gr%FC%DFe": "ok", "good": "ok"}


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_dedup_writes_a_manifest_of_non_utf8_names_that_run_reads_back(tmp_path, suffix):
    """Issue 32, point 8: `dedup --manifest-out` died with a traceback (UnicodeEncodeError) on a tree
    with a non-UTF-8 file name. The name is written as its bytes (surrogateescape) and the run finds
    the very file again, in both manifest formats."""
    corpus = tmp_path / "corpus"
    pdf(corpus / "good.pdf")
    non_utf8(corpus, b"Gr\xfc\xdfe.pdf")
    m = tmp_path / f"m.{suffix}"
    res = cli_in_process("dedup", str(corpus), "--manifest-out", str(m), "--report", str(tmp_path / "rep.csv"))
    assert res.returncode == 0, res.stderr
    assert b"Gr\xfc\xdfe.pdf" in m.read_bytes()  # the name's own bytes
    run = tmp_path / "run"
    res = cli_in_process("run", "--manifest", str(m), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert res.returncode == 0, res.stderr
    recs = {r["doc_id"]: r for r in read_records(run)}
    assert set(recs) == {"Gr%FC%DFe", "good"} and all(r["status"] == "ok" for r in recs.values())


@pytest.mark.parametrize("first,second", [("same", "SAME"), ("Caf\u00e9", "cafe\u0301")])
def test_ids_that_one_file_system_folds_together_are_refused_before_any_work(tmp_path, first, second):
    pdf(tmp_path / "corpus" / f"{first}.pdf")
    pdf(tmp_path / "corpus" / f"{second}.pdf")
    run = tmp_path / "run"
    res = cli_in_process("run", str(tmp_path / "corpus"), "--out", str(run), "--engine", "textlayer")
    assert res.returncode == 3
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if "differ only in case" in ln]
    assert len(lines) == 1 and first in lines[0]
    assert not (run / "pages.jsonl").exists()
    res = cli_in_process("triage", str(tmp_path / "corpus"), "--out", str(tmp_path / "t.csv"))
    assert res.returncode == 3 and not (tmp_path / "t.csv").exists()


def test_manifest_ids_differing_in_case_are_refused(tmp_path):
    pdf(tmp_path / "a.pdf")
    m = tmp_path / "m.csv"
    m.write_text("doc_id,path\nReport,a.pdf\nreport,a.pdf\n", encoding="utf-8")
    with pytest.raises(UsageError, match="'Report' and 'report'"):
        discover(manifest=m)


@pytest.mark.parametrize("doc_id", ["CON", "nul", "Com1", "LPT9.old", "aux.tar", "ends."])
def test_windows_reserved_manifest_ids_are_refused_with_the_line(tmp_path, doc_id):
    pdf(tmp_path / "a.pdf")
    m = tmp_path / "m.jsonl"
    m.write_text(json.dumps({"doc_id": doc_id, "path": "a.pdf"}) + "\n", encoding="utf-8")
    assert check_doc_id(doc_id)
    with pytest.raises(UsageError, match="m.jsonl:1"):
        discover(manifest=m)


def test_reserved_file_names_get_ids_that_are_not(tmp_path):
    for name in ["CON.pdf", "nul.v2.pdf", "com1.pdf", "console.pdf", "dots..pdf"]:
        pdf(tmp_path / name)
    ids = [d.doc_id for d in discover([tmp_path])]
    assert ids == ["CON_", "com1_", "console", "dots._", "nul_.v2"]
    assert all(check_doc_id(i) is None for i in ids)
    assert check_doc_id("ends ") and derive_doc_id("ends .pdf") == "ends _"


def test_non_utf8_bytes_give_distinct_valid_ids():
    a = derive_doc_id(os.fsdecode(b"dir/r\xe9sum\xe9.pdf"))
    b = derive_doc_id(os.fsdecode(b"dir/r\xc3\xa9sum\xc3\xa9.pdf"))  # the same name in UTF-8
    assert a == "dir__r%E9sum%E9" and b == "dir__résumé"
    assert check_doc_id(a) is None
    assert check_doc_id("x\udcff") == "it is not valid Unicode"


@pytest.mark.parametrize("value", ["=cmd|' /C calc'!A0", "+1", "-2", "@SUM(A1)", "\tx", "\rx", "'=x", "''", "'",
                                   "'a", "plain", "", "a=b"])
def test_csv_cells_round_trip_and_never_start_a_formula(value):
    cell = neutralise_cell(value)
    assert not cell.startswith(CSV_FORMULA_START)
    assert restore_cell(cell) == value


def test_triage_and_manifest_csv_neutralise_formulas_and_run_reads_the_ids_back(tmp_path):
    corpus = tmp_path / "corpus"
    names = ["=cmd|' -C calc'!A0", "+SUM(1)", "-dash", "@at"]
    for name in names:
        pdf(corpus / f"{name}.pdf")
    t, m = tmp_path / "t.csv", tmp_path / "m.csv"
    assert cli_in_process("triage", str(corpus), "--out", str(t), "--workers", "1").returncode == 0
    assert cli_in_process("manifest", "--triage", str(t), "--out", str(m), "--skipped",
                          str(tmp_path / "s.csv"), "--stage", str(tmp_path / "staged")).returncode == 0
    for written in (t, m, tmp_path / "m.originals.csv", tmp_path / "s.csv"):
        for row in csv.reader(written.open(encoding="utf-8", newline="")):
            assert not [c for c in row if c.startswith(CSV_FORMULA_START)], (written.name, row)
    assert "'=cmd|' -C calc'!A0" in t.read_text(encoding="utf-8")
    run = tmp_path / "run"
    res = cli_in_process("run", "--manifest", str(m), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert sorted(r["doc_id"] for r in read_records(run)) == sorted(names)
