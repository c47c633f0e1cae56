"""`vlmocr dedup`: byte-identical and same-text documents, within the inputs and against a library."""

from __future__ import annotations

import csv
import json
import shutil

from support.cli import run_cli, textlayer_run
from support.documents import body_lines, make_doc, make_scan_pdf, make_text_pdf
from vlmocr.inputs.sources import from_manifest
from vlmocr.library.dedup import normalise_text, text_digest
from vlmocr.library.publish import publish


def test_duplicates_by_bytes_and_by_text_and_a_manifest_of_what_is_new(tmp_path):
    src = tmp_path / "in"
    make_doc(src, "a.pdf", 1, 2)
    shutil.copy(src / "a.pdf", src / "a_copy.pdf")  # the same bytes
    # The same text laid out differently (other line breaks, other font): other bytes, same text.
    make_text_pdf(src / "b.pdf", [body_lines(2, 1), body_lines(2, 2)])
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(src / "b_resaved.pdf"), pagesize=A4)
    c.setTitle("resaved")
    for page in (1, 2):
        lines = body_lines(2, page)
        rewrapped = " ".join(lines).split()
        y = 800
        for i in range(0, len(rewrapped), 6):
            c.setFont("Times-Roman", 11)
            c.drawString(60, y, " ".join(rewrapped[i:i + 6]))
            y -= 16
        c.showPage()
    c.save()
    make_scan_pdf(src / "scan.pdf", [["A scanned page", "has no text layer"]])
    shutil.copy(src / "scan.pdf", src / "scan_copy.pdf")
    (src / "missing_later.pdf").write_bytes(b"not really a pdf")

    manifest = tmp_path / "new.csv"
    report = tmp_path / "report.csv"
    proc = run_cli("dedup", str(src), "--manifest-out", str(manifest), "--report", str(report), "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "duplicate_bytes=2 duplicate_text=1" in proc.stdout
    rows = {r["doc_id"]: r for r in csv.DictReader(report.open())}
    assert rows["a_copy"]["status"] == "duplicate" and rows["a_copy"]["match"] == "bytes"
    assert rows["a_copy"]["duplicate_of"] == "a" and rows["a_copy"]["where"] == "input"
    assert rows["b_resaved"]["match"] == "text" and rows["b_resaved"]["duplicate_of"] == "b"
    assert rows["b_resaved"]["sha256"] != rows["b"]["sha256"] and rows["b_resaved"]["text_sha256"] == rows["b"]["text_sha256"]
    assert rows["scan_copy"]["match"] == "bytes" and rows["scan"]["text_sha256"] == ""  # a scan has no text digest
    assert rows["missing_later"]["status"] == "new"  # unreadable as a PDF: `run` gives it bad_input
    new = from_manifest(manifest)
    assert [d.doc_id for d in new] == ["a", "b", "missing_later", "scan"]
    assert all(d.path.is_absolute() and d.path.is_file() for d in new)
    # The manifest is what `vlmocr run --manifest` reads.
    run = tmp_path / "run"
    proc = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert "in 4 docs" in proc.stdout


def test_against_a_library_and_a_manifest_input(tmp_path):
    src = tmp_path / "in"
    make_doc(src, "held.pdf", 1, 2)
    make_doc(src, "other.pdf", 2, 1)
    run = tmp_path / "run"
    textlayer_run(run, src)
    lib = tmp_path / "lib"
    publish([run], lib)
    later = tmp_path / "later"
    later.mkdir()
    shutil.copy(src / "held.pdf", later / "renamed.pdf")  # bytes the library holds
    make_text_pdf(later / "other_again.pdf", [[f"  {line}  " for line in body_lines(2, 1)]])  # same text
    make_doc(later, "fresh.pdf", 3, 1)
    m = tmp_path / "in.csv"
    m.write_text("doc_id,path,pages\nrenamed,later/renamed.pdf,1-2\nother_again,later/other_again.pdf,\n"
                 "fresh,later/fresh.pdf,1\n")
    out = tmp_path / "new.csv"
    proc = run_cli("dedup", "--manifest", str(m), "--library", str(lib), "--manifest-out", str(out), "--json",
                   "--report", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    rows = {r["doc_id"]: r for r in result["rows"]}
    assert rows["renamed"]["where"] == "library" and rows["renamed"]["match"] == "bytes"
    assert rows["renamed"]["duplicate_of"].startswith("held--")
    assert rows["other_again"]["where"] == "library" and rows["other_again"]["match"] == "text"
    assert rows["fresh"]["status"] == "new" and result["in_library"] == 2
    assert out.read_text().splitlines()[0] == "doc_id,path,pages,dpi"
    assert [(d.doc_id, d.pages) for d in from_manifest(out)] == [("fresh", (1,))]
    assert json.loads((tmp_path / "r.json").read_text())["new"] == 1


def test_text_normalisation():
    assert normalise_text("Straße  —  ﬁne\nline-\nbreak") == "strasse fine line break"
    assert normalise_text("A,B;C") == normalise_text("a b  c")


def test_text_digest_needs_a_usable_text_layer(tmp_path):
    make_scan_pdf(tmp_path / "scan.pdf", [["no text layer here"]])
    assert text_digest(tmp_path / "scan.pdf")[0] is None
    make_doc(tmp_path, "t.pdf", 1, 2)
    digest, pages, _ = text_digest(tmp_path / "t.pdf")
    assert digest and pages == 2
    (tmp_path / "img.png").write_bytes(b"")
    assert text_digest(tmp_path / "img.png") == (None, None, "not a PDF")


def test_a_fifo_in_the_tree_is_unreadable_not_a_hang(tmp_path):
    """Opening a FIFO for reading blocks until a writer comes: dedup must not wait for one."""
    import os

    src = tmp_path / "src"
    make_doc(src, "a.pdf", 1, 1)
    os.mkfifo(src / "pipe.pdf")
    out = tmp_path / "new.csv"
    proc = run_cli("dedup", str(src), "--manifest-out", str(out), "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {r["doc_id"]: r for r in json.loads(proc.stdout)["rows"]}
    assert rows["a"]["status"] == "new"
    assert rows["pipe"]["status"] == "unreadable" and "not a regular file" in rows["pipe"]["detail"]
    assert "unreadable pipe" in " ".join(proc.stderr.split())
    assert [r["doc_id"] for r in csv.DictReader(out.open())] == ["a"]


def test_the_seeds_pipeline_dedup_to_jsonl_then_run_the_manifest(tmp_path):
    """Seed 001: `dedup <papers>/ --library <library> --manifest-out <run>/papers.jsonl`, then
    `run --manifest <run>/papers.jsonl`: the .jsonl name must hold JSON lines, not CSV."""
    papers = tmp_path / "papers"
    make_doc(papers, "held.pdf", 1, 2)
    first = tmp_path / "first"
    textlayer_run(first, papers)
    lib = tmp_path / "lib"
    publish([first], lib)
    make_doc(papers, "fresh.pdf", 2, 2)
    shutil.copy(papers / "held.pdf", papers / "held_again.pdf")
    run = tmp_path / "run"
    manifest = run / "papers.jsonl"
    proc = run_cli("dedup", f"{papers}/", "--library", str(lib), "--manifest-out", str(manifest))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert lines == [{"doc_id": "fresh", "path": str((papers / "fresh.pdf").resolve())}]
    proc = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert "in 1 docs" in proc.stdout and (run / "docs" / "fresh.md").is_file()
    # .csv stays CSV, readable by the same run
    proc = run_cli("dedup", f"{papers}/", "--library", str(lib), "--manifest-out", str(tmp_path / "papers.csv"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "papers.csv").read_text().splitlines()[0] == "doc_id,path"
    assert [d.doc_id for d in from_manifest(tmp_path / "papers.csv")] == ["fresh"]


def test_a_manifest_name_of_another_format_is_refused_before_hashing(tmp_path):
    make_doc(tmp_path / "in", "a.pdf", 1, 1)
    proc = run_cli("dedup", str(tmp_path / "in"), "--manifest-out", str(tmp_path / "new.txt"))
    assert proc.returncode == 3
    assert proc.stderr.strip().count("\n") == 0 and "--manifest-out" in proc.stderr and ".jsonl" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "new.txt").exists()
