"""A VLM run's fallback (a page whose retry ladder is spent) reads a scan as a CPU run with
`--lang` = the document's manifest language would (RunConfig.fallback_reading, the same
engines/choice.for_document as CPU runs): a Greek document with Tesseract's grc data, not the
run's RapidOCR; the record's engine_choice says why. The VLM pages' settings key ignores the
language (a resume owes nothing). A real HTTP server (its ladder made to run out: every answer
loops) and real Tesseract on a real page (tests/data/gt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import run_cli
from support.documents import make_scan_pdf
from support.records import finals, read_records
from support.tessdata import need_tesseract, only_data, write_manifest
from vlmocr.evaluation.score import cer
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import make_coded_pdf

pytestmark = pytest.mark.tesseract

# Every answer loops: every page's ladder runs out and the fallback reads it.
LOOPING = ServerConfig(faults={"loop": {"rate": 1.0}})



def vlm_run(manifest: Path, run: Path, url: str, *extra: str, env: dict | None = None):
    return run_cli("run", "--manifest", str(manifest), "--out", str(run), "--endpoint", url, "--engine", "openai",
                   "--request-timeout", "3", "--workers", "1", *extra,
                   env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", **(env or {})})


def test_a_greek_document_falls_back_to_tesseract_grc_under_auto(tmp_path, gt):
    need_tesseract("grc")
    greek = gt / "zonaras" / "zonaras_0054.png"
    plain = make_coded_pdf(tmp_path / "plain.pdf", [1], with_text_layer=True)
    manifest = write_manifest(tmp_path / "m.csv", {"zonaras": (greek, "grc"), "plain": (plain, "")})
    run = tmp_path / "run"
    with serve_in_process(LOOPING) as srv:
        res = vlm_run(manifest, run, srv.url)  # --lang eng: the run's fallback is RapidOCR
        assert res.returncode in (0, 2), res.stderr
        recs = finals(run)
        z, p = recs[("zonaras", 1)], recs[("plain", 1)]
        assert (z["engine"], z["model"]) == ("tesseract", "tesseract:grc"), z
        assert z["engine_choice"] == ("tesseract: the document's language grc: installed with grc, a Grek script "
                                      "rapidocr has no model for")
        assert "fallback" in z["flags"] and "fallback_reason:ladder exhausted" in z["flags"]
        assert z["status"] == "fallback" and cer(z["text"], greek.with_suffix(".txt").read_text("utf-8")) < 0.12
        # Without a language: as before (the text layer; no choice of the document's to state).
        assert p["engine"] == "textlayer" and p["status"] == "fallback" and "engine_choice" not in p
        # The VLM key ignores the language: one key for the run, its attempts and its fallbacks.
        info = json.loads((run / "run.json").read_text())
        assert {r["key"] for r in read_records(run)} == {info["key"]} and info["key_material"]["reader"] == "openai"

        # Resumed: nothing is owed, nothing is asked of the server or read again.
        n, asked = len(read_records(run)), len(srv.requests())
        res = vlm_run(manifest, run, srv.url)
        assert res.returncode in (0, 2), res.stderr
        assert len(read_records(run)) == n and len(srv.requests()) == asked


def test_named_tesseract_falls_back_with_the_documents_data_else_the_runs(tmp_path):
    """`--ocr-engine tesseract --lang eng` where Tesseract has eng and deu only: a German
    document's fallback reads with deu, a Greek one with the run's eng (grc missing: said on the
    record and once on stderr), one without a language exactly as before."""
    need_tesseract("eng", "deu")
    pdf = make_scan_pdf(tmp_path / "scan.pdf", [["Ein Brief in deutscher Sprache", "mit einer zweiten Zeile"]],
                        size=(700, 260))
    manifest = write_manifest(tmp_path / "m.csv", {"german": (pdf, "deu"), "greek": (pdf, "grc"),
                                                   "plain": (pdf, "")})
    run = tmp_path / "run"
    with serve_in_process(LOOPING) as srv:
        res = vlm_run(manifest, run, srv.url, "--ocr-engine", "tesseract", "--lang", "eng",
                      env=only_data(tmp_path / "tessdata", "eng", "deu"))
    assert res.returncode in (0, 2), res.stderr
    recs = finals(run)
    german, greek, plain = recs[("german", 1)], recs[("greek", 1)], recs[("plain", 1)]
    assert all("fallback" in r["flags"] for r in (german, greek, plain))
    assert german["model"] == "tesseract:deu" and "Brief" in german["text"]
    assert german["engine_choice"] == "tesseract: named by --ocr-engine, with the document's language deu"
    assert greek["model"] == plain["model"] == "tesseract:eng"
    assert greek["engine_choice"] == ("tesseract: the run's choice (eng): the document's language grc: "
                                      "tesseract has no data for grc")
    assert plain["engine_choice"] == "tesseract: named by --ocr-engine"
    assert res.stderr.count("documents in grc: tesseract has no language data for grc: apt-get install "
                            "tesseract-ocr-grc") == 1, res.stderr
    assert len({r["key"] for r in read_records(run)}) == 1


def test_the_fallback_renders_at_the_documents_dpi(tmp_path):
    """Issue 28: the fallback rendered every page at the run's --dpi (cfg.sizing() without the
    document's), dropping the manifest's per-document dpi; it renders as a CPU run of that manifest
    would."""
    scan = make_coded_pdf(tmp_path / "scan.pdf", [1])
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"doc_id,path,dpi\nlow,{scan},100\nplain,{scan},\n", encoding="utf-8")
    run = tmp_path / "run"
    with serve_in_process(LOOPING) as srv:
        res = vlm_run(manifest, run, srv.url, "--ocr-engine", "tesseract")
    assert res.returncode in (0, 2), res.stderr
    recs = finals(run)
    low, plain = recs[("low", 1)], recs[("plain", 1)]
    assert "fallback" in low["flags"] and "fallback" in plain["flags"]
    assert (low["engine"], plain["engine"]) == ("tesseract", "tesseract")
    assert low["dpi"] == 100 and plain["dpi"] == 200
    assert plain["width"] == pytest.approx(2 * low["width"], abs=2)
