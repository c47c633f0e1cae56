"""A document that states its language (its manifest row) is read as a run with `--lang` = that
language would read it (engines/choice.for_document, RunConfig.document_reading): under `auto`
Greek with Tesseract's grc data and Fraktur German with RapidOCR in one run; Tesseract, named,
with the document's data; the document's data missing: the run's choice, said on the record and
once on stderr. The engine and data are in the page's settings key: a resume re-reads nothing, a
changed language re-reads only that document, and a document whose language changes nothing
keeps the run's key. Real Tesseract and RapidOCR on real pages (tests/data/gt)."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.documents import make_scan_pdf
from support.records import finals, read_records
from support.tessdata import need_tesseract, only_data, write_manifest
from vlmocr.engines.choice import for_document
from vlmocr.evaluation.score import cer

pytestmark = pytest.mark.tesseract

GREEK = "tesseract: the document's language grc: installed with grc, a Grek script rapidocr has no model for"
FRAKTUR = "rapidocr: the document's language frk: reads Latf script better than tesseract (BENCHMARKS.md)"



def test_a_mixed_manifest_reads_each_document_with_the_engine_for_its_language(tmp_path, gt):
    need_tesseract("grc")
    greek, fraktur = gt / "zonaras" / "zonaras_0054.png", gt / "goethe" / "goethe_0014.png"
    manifest = write_manifest(tmp_path / "m.csv", {"zonaras": (greek, "grc"), "goethe": (fraktur, "frk")})
    run = tmp_path / "run"
    res = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--workers", "1")
    assert res.returncode == 0, res.stderr
    recs = finals(run)
    z, g = recs[("zonaras", 1)], recs[("goethe", 1)]
    assert (z["engine"], z["model"], z["engine_choice"]) == ("tesseract", "tesseract:grc", GREEK)
    assert (g["engine"], g["engine_choice"]) == ("rapidocr", FRAKTUR)
    greek_cer = cer(z["text"], greek.with_suffix(".txt").read_text(encoding="utf-8"))
    assert greek_cer < 0.12 and z["status"] == "ok"
    assert cer(g["text"], fraktur.with_suffix(".txt").read_text(encoding="utf-8")) < 0.10
    # Said once: the Greek documents' engine (Fraktur's is the run's own: nothing to say).
    assert res.stderr.count(f"documents in grc: {GREEK}") == 1 and "documents in frk" not in res.stderr
    info = json.loads((run / "run.json").read_text())
    # Fraktur read as the run reads (RapidOCR, no data): the run's key, as before languages chose.
    assert g["key"] == info["key"] != z["key"] and sorted(info["keys"]) == sorted({g["key"], z["key"]})
    assert info["versions"]["tesseract"] and info["versions"]["rapidocr"]

    # Resumed unchanged: nothing is read again.
    res = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--workers", "1")
    assert res.returncode == 0 and len(read_records(run)) == 2, res.stderr

    # The Greek document said to be Latin: it alone is read again, now as a Latin-script page
    # (RapidOCR: no Greek model, garbage); the Fraktur one is not touched.
    write_manifest(manifest, {"zonaras": (greek, "lat"), "goethe": (fraktur, "frk")})
    res = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    news = read_records(run)[2:]
    assert [(r["doc_id"], r["engine"]) for r in news] == [("zonaras", "rapidocr")]
    assert news[0]["key"] == g["key"]  # a Latin-script page is read as the run reads
    assert cer(news[0]["text"], greek.with_suffix(".txt").read_text(encoding="utf-8")) > 3 * greek_cer + 0.2


def test_named_tesseract_reads_with_the_documents_data_else_the_runs_and_says_why(tmp_path):
    """`--engine tesseract --lang eng`, where Tesseract has eng and deu data only: a German
    document is read with deu; a Greek one with the run's eng (grc missing), the record and one
    stderr line saying why and what to install; one without a language exactly as before."""
    need_tesseract("eng", "deu")
    pdf = make_scan_pdf(tmp_path / "scan.pdf", [["Ein Brief in deutscher Sprache", "mit einer zweiten Zeile"]],
                        size=(700, 260))
    manifest = write_manifest(tmp_path / "m.csv", {"german": (pdf, "deu"), "greek": (pdf, "grc"),
                                                   "plain": (pdf, ""), "greek2": (pdf, "grc")})
    run = tmp_path / "run"
    env = only_data(tmp_path / "tessdata", "eng", "deu")
    res = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--workers", "1", "--engine", "tesseract",
                  "--lang", "eng", env=env)
    assert res.returncode in (0, 2), res.stderr
    recs = finals(run)
    german, greek, plain = recs[("german", 1)], recs[("greek", 1)], recs[("plain", 1)]
    assert german["model"] == "tesseract:deu" and "engine_choice" not in german
    assert greek["model"] == plain["model"] == "tesseract:eng" and "engine_choice" not in plain
    assert greek["engine_choice"] == ("tesseract: the run's choice (eng): the document's language grc: "
                                      "tesseract has no data for grc")
    assert res.stderr.count("documents in grc: tesseract has no language data for grc: apt-get install "
                            "tesseract-ocr-grc") == 1, res.stderr
    assert greek["key"] == plain["key"] != german["key"]
    assert "Brief" in german["text"]

    # Installed since: the Greek documents alone are read again, with grc.
    env = only_data(tmp_path / "more", "eng", "deu", "grc")
    res = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--workers", "1", "--engine", "tesseract",
                  "--lang", "eng", env=env)
    assert res.returncode in (0, 2), res.stderr
    news = read_records(run)[4:]
    assert sorted((r["doc_id"], r["model"]) for r in news) == [("greek", "tesseract:grc"), ("greek2", "tesseract:grc")]


def test_the_choice_for_a_document():
    """for_document on given language data (Tesseract's listing), every branch."""
    have = frozenset({"eng", "deu", "grc", "Fraktur"})
    assert for_document(None, run_lang="eng", reader="rapidocr", auto=True, languages=have) is None
    assert for_document("eng", run_lang="eng", reader="rapidocr", auto=True, languages=have) is None
    greek = for_document("grc", run_lang="eng", reader="rapidocr", auto=True, languages=have)
    assert (greek.reader, greek.lang, greek.tesseract_lang, greek.note) == ("tesseract", "grc", "grc", None)
    # A script model under either layout resolves as the installed data names it.
    fraktur = for_document("grc+script/Fraktur", run_lang="eng", reader="rapidocr", auto=True, languages=have)
    assert (fraktur.reader, fraktur.lang, fraktur.tesseract_lang) == ("tesseract", "grc+script/Fraktur", "grc+Fraktur")
    latin = for_document("deu", run_lang="grc", reader="tesseract", auto=True, languages=have)
    assert (latin.reader, latin.lang, latin.tesseract_lang) == ("rapidocr", "deu", None)
    russian = for_document("rus", run_lang="grc", reader="tesseract", auto=True, languages=have)
    assert (russian.reader, russian.lang, russian.tesseract_lang) == ("tesseract", "grc", None)
    assert russian.choice == "tesseract: the run's choice (grc): the document's language rus: tesseract has no data for rus"
    assert "apt-get install tesseract-ocr-rus" in russian.note
    absent = for_document("grc", run_lang="eng", reader="rapidocr", auto=True, languages=None)
    assert absent.reader == "rapidocr" and "tesseract not installed" in absent.choice
    assert "apt-get install tesseract-ocr tesseract-ocr-grc" in absent.note
    # Named engines: Tesseract (alone or in a composite) takes the document's data; RapidOCR none.
    both = for_document("grc", run_lang="eng", reader="tesseract+rapidocr", auto=False, languages=have)
    assert (both.reader, both.lang, both.tesseract_lang, both.choice) == ("tesseract+rapidocr", "grc", "grc", None)
    assert for_document("grc", run_lang="eng", reader="rapidocr", auto=False, languages=have) is None
