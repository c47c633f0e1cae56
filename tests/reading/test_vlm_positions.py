"""Issue 29 point 2, end to end: `vlmocr run --endpoint … --align-with tesseract` gives a VLM's
answer word positions — the page also read by Tesseract in the worker pool, the answer's words
placed on its boxes — so the searchable PDF of a VLM reading highlights the VLM's words where
they lie. A real HTTP server that answers what RapidOCR reads on the image it was sent (its line
breaks and misreadings differ from Tesseract's), a real typewritten page, upright and scanned a
quarter turn off (turned before it is read again: the positions refer to the page as scanned)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.evaluation.score import cer
from vlmocr.positions.align import word_key
from vlmocr.runfolder.record import Row
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"
NO_KEY = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    need(shutil.which("pdftotext") is not None, "pdftotext", "poppler-utils")
    folder = tmp_path_factory.mktemp("vlm-positions")
    with Image.open(PAGE) as im:
        im.convert("L").save(folder / "upright.png")
    return folder


def test_a_vlm_answer_gets_positions_and_a_searchable_pdf(scans, tmp_path):
    run = tmp_path / "run"
    # The server answers the page's transcription, as a VLM that reads it well (its "ocr" mode
    # would read the page with RapidOCR, ~20 s a page on one core here, twice).
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    with serve_in_process(ServerConfig(answer="static", static_text=truth)) as srv:
        res = run_cli("run", str(scans), "--out", str(run), "--endpoint", srv.url, "--workers", "1",
                      "--align-with", "tesseract", env=NO_KEY)
        plain = tmp_path / "plain"
        res_plain = run_cli("run", str(scans), "--out", str(plain), "--endpoint", srv.url, "--workers", "1",
                            env=NO_KEY)
    assert res.returncode == 0 and res_plain.returncode == 0, res.stderr + res_plain.stderr
    row = Row.of(finals(run)[("upright", 1)])
    pos = row.word_positions()
    assert row.engine == "openai" and pos is not None and pos.source == "aligned:tesseract"
    assert [w[5] for w in pos.words()] == [t for t in row.text.split() if word_key(t)]  # the VLM's words
    assert pos.aligned is not None and pos.aligned >= 0.85, pos.aligned
    with Image.open(scans / "upright.png") as im:
        assert (pos.width, pos.height) == im.size  # the page as scanned
    # Without --align-with the answer has no positions (and the run the same key: it adds, not changes).
    plain_row = Row.of(finals(plain)[("upright", 1)])
    assert plain_row.word_positions() is None and plain_row.key == row.key and plain_row.text == row.text

    out = tmp_path / "pdf"
    res = run_cli("export", str(run), "--format", "pdf", "--out", str(out))
    assert res.returncode == 0, res.stderr
    text = subprocess.run(["pdftotext", "-raw", str(out / "upright.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert 1 - cer(" ".join(text.split()), " ".join(w[5] for w in pos.words())) >= 0.98
    # The plain run's PDF still carries the text (spread over the page, not placed), and says so.
    res = run_cli("export", str(plain), "--format", "pdf", "--out", str(tmp_path / "pdf-plain"))
    assert res.returncode == 0 and "no word positions" in res.stderr, res.stderr


def test_align_with_names_an_engine_that_gives_boxes(scans, tmp_path):
    res = run_cli("run", str(scans), "--out", str(tmp_path / "r"), "--endpoint", "http://127.0.0.1:9/v1",
                  "--align-with", "textlayer", env=NO_KEY)
    assert res.returncode != 0 and "--align-with" in res.stderr and "tesseract" in res.stderr, res.stderr


ART_OF_WAR = ("Sun Tzu said: The art of war is of vital importance to the State. It is a matter of life and "
              "death, a road either to safety or to ruin. Hence it is a subject of inquiry which can on no "
              "account be neglected.")


def test_an_answer_the_cpu_reading_does_not_support_is_never_ok(scans, tmp_path):
    # Issue 30, point 0: fluent English on a page of English typescript passes the text's own
    # signal; the page read by Tesseract (which passes its signal) holds almost none of its words.
    from support.records import read_records

    plain = tmp_path / "plain"
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="static", static_text=ART_OF_WAR)) as srv:
        run_cli("run", str(scans), "--out", str(plain), "--endpoint", srv.url, "--workers", "1", "--no-retry",
                env=NO_KEY)
        # The fallback at the ladder's end reads with Tesseract too (RapidOCR: ~20 s a page here).
        res = run_cli("run", str(scans), "--out", str(run), "--endpoint", srv.url, "--workers", "1",
                      "--align-with", "tesseract", "--ocr-engine", "tesseract", env=NO_KEY)
    assert finals(plain)[("upright", 1)]["status"] == "ok"  # what the text alone could not see
    recs = read_records(run)
    asked = [r for r in recs if r["engine"] == "openai"]
    assert asked and all(r["status"] == "suspect" for r in asked), [r["status"] for r in asked]
    assert all(any(f.startswith("unsupported_by_tesseract:0.") for f in r["flags"]) for r in asked)
    assert not any(r["status"] == "ok" and "Sun Tzu" in r["text"] for r in recs)
    assert res.returncode in (0, 2), res.stderr


def test_an_answer_with_an_invented_passage_beside_the_page_s_text_is_never_ok(scans, tmp_path):
    # Issue 30, point 2: the page's own text (most of the answer: the share rule passes it) and
    # after it a passage of 73 words the CPU reading has no trace of — a continuation past the
    # page's end (Tesseract's reading of the page as sent holds a few words of noise opposite it).
    from support.records import read_records

    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="static", static_text=truth + "\n" + ART_OF_WAR)) as srv:
        res = run_cli("run", str(scans), "--out", str(run), "--endpoint", srv.url, "--workers", "1", "--no-retry",
                      "--align-with", "tesseract", "--ocr-engine", "tesseract", env=NO_KEY)
    assert res.returncode in (0, 2), res.stderr
    asked = [r for r in read_records(run) if r["engine"] == "openai"]
    assert asked and all(r["status"] == "suspect" for r in asked), [(r["status"], r["flags"]) for r in asked]
    runs = [int(f.rsplit(":", 1)[1]) for r in asked for f in r["flags"] if f.startswith("unsupported_passage_by_tesseract:")]
    assert len(runs) == len(asked) and all(n >= 40 for n in runs), [r["flags"] for r in asked]
    assert not any(f.startswith("unsupported_by_") for r in asked for f in r["flags"])  # most words are the page's


def test_the_page_s_text_alone_is_ok(scans, tmp_path):
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="static", static_text=truth)) as srv:
        res = run_cli("run", str(scans), "--out", str(run), "--endpoint", srv.url, "--workers", "1", "--no-retry",
                      "--align-with", "tesseract", "--ocr-engine", "tesseract", env=NO_KEY)
    assert res.returncode == 0, res.stderr
    (rec,) = finals(run).values()
    assert rec["status"] == "ok" and not any("unsupported" in f for f in rec["flags"]), rec["flags"]
