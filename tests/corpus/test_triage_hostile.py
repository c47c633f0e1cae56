"""`vlmocr triage` on hostile files: it says up front what `vlmocr run` will refuse."""

from __future__ import annotations

import csv

from support.cli import cli_in_process
from vlmocr.testing.hostile_files import write_pdf, write_tiff


def test_triage_names_oversized_frames_thin_pages_and_page_tree_liars(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_tiff(corpus / "frames.tif", [(400, 300), (28000, 28000), (1, 400)])
    write_pdf(corpus / "million.pdf", [(595, 842)], claimed_pages=1_000_000)
    monkeypatch.setenv("VLMOCR_MAX_DOC_PAGES", "1000")
    out = tmp_path / "t.csv"
    res = cli_in_process("triage", str(corpus), "--out", str(out), "--workers", "1", "--sheets", str(tmp_path / "s"))
    assert res.returncode == 0, res.stderr
    rows = {r["doc_id"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    frames = rows["frames"]
    assert frames["status"] == "ok" and frames["pages"] == "3" and frames["bad_pages"] == "2"
    assert frames["reason"] == "frame 2 of 28000x28000 px exceeds the 400 MP limit: frames.tif (and 1 more pages)"
    million = rows["million"]
    assert million["status"] == "too_many_pages" and "claims 1,000,000 pages" in million["reason"]
    assert (tmp_path / "s" / "frames.png").exists()
