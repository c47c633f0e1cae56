"""A document's truth in one file, its pages separated by form feeds (issue 19, point 13): read as
pages 1…N by `vlmocr evaluate` (a folder or a CSV), never scored whole against page 1; the
samples' own truth scores every page of a real run of the samples; `compare` names its CER
micro or macro."""

from __future__ import annotations

import json
import shutil

import pytest

from support.cli import cli_in_process as cli
from support.cli import run_cli
from support.components import REPO, need
from support.documents import make_text_pdf

PAGES = [["The first page of the letter", "written in a plain hand."],
         ["The second page of it", "signed by the clerk."],
         ["A third page, the postscript."]]


@pytest.fixture
def letter_run(tmp_path):
    """A real three-page born-digital PDF read from its text layer."""
    docs = tmp_path / "docs"
    docs.mkdir()
    make_text_pdf(docs / "letter.pdf", PAGES)
    run = tmp_path / "run"
    res = run_cli("run", str(docs), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    return run


def _evaluate(run, truth, *extra):
    res = cli("evaluate", str(run), "--truth", str(truth), "--bootstrap", "0", "--json", *extra)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout), res.stderr


def test_a_form_feed_separated_truth_file_is_one_truth_per_page(letter_run, tmp_path):
    truth = tmp_path / "truth"
    truth.mkdir()
    # pdftotext's way: every page ends with a form feed (the last one starts no page)
    (truth / "letter.txt").write_text("".join("\n".join(p) + "\n\f" for p in PAGES), encoding="utf-8")
    data, err = _evaluate(letter_run, truth)
    assert data["corpus"]["pages"] == 3 and data["corpus"]["missing"] == 0
    assert data["corpus"]["cer"] == 0.0, data["worst"]
    assert [(p["doc_id"], p["page"]) for p in data["pages"]] == [("letter", 1), ("letter", 2), ("letter", 3)]
    # stderr says only which reading it scored, which layout it read and how many pages matched
    # (issue 27), no note
    assert data["unscored_records"] == 0 and data["notes"] == []
    assert [line for line in err.strip().splitlines()
            if not line.startswith("truth: ") and ": reading " not in line] == []
    assert "3 matched a record" in err


def test_a_truth_csv_row_without_page_is_split_too(letter_run, tmp_path):
    (tmp_path / "letter.txt").write_text("\n\f\n".join("\n".join(p) for p in PAGES), encoding="utf-8")
    (tmp_path / "t.csv").write_text("doc_id,truth_path\nletter,letter.txt\n", encoding="utf-8")
    data, _ = _evaluate(letter_run, tmp_path / "t.csv")
    assert data["corpus"]["pages"] == 3 and data["corpus"]["cer"] == 0.0


def test_one_page_of_truth_for_a_longer_document_is_said(letter_run, tmp_path):
    truth = tmp_path / "truth"
    truth.mkdir()
    # the mistake the samples made: pages separated by a blank line, not a form feed
    (truth / "letter.txt").write_text("\n\n".join("\n".join(p) for p in PAGES), encoding="utf-8")
    data, err = _evaluate(letter_run, truth)
    assert data["corpus"]["pages"] == 1 and data["unscored_records"] == 2
    assert len(data["notes"]) == 1 and "letter, which has 3 pages" in err and "form feeds" in err


def test_a_page_file_holding_several_pages_is_a_usage_error(letter_run, tmp_path):
    truth = tmp_path / "truth"
    truth.mkdir()
    (truth / "letter.p2.txt").write_text("one\fanother", encoding="utf-8")
    res = cli("evaluate", str(letter_run), "--truth", str(truth))
    assert res.returncode == 3
    assert "letter.p2.txt" in res.stderr and "form feeds" in res.stderr and "Traceback" not in res.stderr


def test_compare_names_micro_and_macro(letter_run, tmp_path):
    truth = tmp_path / "truth"
    truth.mkdir()
    (truth / "letter.txt").write_text("\f".join("\n".join(p) for p in PAGES), encoding="utf-8")
    twin = tmp_path / "twin"
    twin.mkdir()
    shutil.copy(letter_run / "pages.jsonl", twin / "pages.jsonl")
    res = cli("compare", str(letter_run), str(twin), "--truth", str(truth))
    assert res.returncode == 0, res.stdout + res.stderr
    line = " ".join(res.stdout.split())  # as a person reads it, however the console wrapped it
    assert "CER A vs B micro 0.00 % macro 0.00 %" in line
    assert "against truth (3 pages) CER micro A 0.00 % B 0.00 % (Δ +0.00 pp), macro A 0.00 % B 0.00 %" in line
    data = json.loads(cli("compare", str(letter_run), str(twin), "--truth", str(truth), "--json").stdout)
    assert data["corpus"]["cer_a_macro"] == 0.0 and data["truth_pages"] == 3


@pytest.mark.tesseract
@pytest.mark.slow
def test_the_samples_truth_scores_every_page_of_a_samples_run(tmp_path):
    """`vlmocr run samples/` then `vlmocr evaluate RUN --truth samples/`, as the README says: 7
    pages in 4 documents, each scored against its own page of truth. Measured: 13.1 % CER
    (micro) with Tesseract (eng); scored as 4 pages before, the same run gave 41.3 %."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    run = tmp_path / "run"
    res = run_cli("run", str(REPO / "samples"), "--out", str(run), "--ocr-engine", "tesseract", "--lang", "eng",
                  "--workers", "2", env={"OMP_THREAD_LIMIT": "1"})
    assert res.returncode in (0, 2), res.stderr
    data, err = _evaluate(run, REPO / "samples")
    corpus = data["corpus"]
    assert corpus["pages"] == 7 and corpus["missing"] == 0 and data["unscored_records"] == 0, err
    assert data["notes"] == []
    pages = {(p["doc_id"], p["page"]): p["cer"] for p in data["pages"]}
    assert pages[("born-digital", 1)] == 0.0 and pages[("born-digital", 2)] == 0.0  # the text layer, exact
    # every typewritten English page is read well; the corpus is far below the page-1-only score
    assert pages[("scanned-typewritten", 1)] < 0.08 and pages[("scanned-typewritten", 2)] < 0.08
    assert corpus["cer"] < 0.2, corpus
