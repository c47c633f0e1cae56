"""Issue 32, point 7: a German answer for an English page was `ok`, score 0.98 (0.92 with the
manifest's language `en`): a translation passes every other measure as a fluent reading. When the
page's language is known — its manifest row, an explicit --lang — an answer mostly in another
language is `suspect` with reason wrong_language. The default --lang is no one's word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import run_cli
from vlmocr.runfolder.record import Signal
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import make_coded_pdf
from vlmocr.text.signal import judge
from vlmocr.text.textquality import other_language

ENGLISH = ("The committee met on Tuesday to discuss the budget for the coming year. After a long debate "
           "the members agreed that the school would receive more money for books and for the repair of "
           "the roof, which had been leaking since the winter.")
GERMAN = ("Der Ausschuss trat am Dienstag zusammen, um den Haushalt für das kommende Jahr zu besprechen. Nach "
          "einer langen Debatte einigten sich die Mitglieder darauf, dass die Schule mehr Geld für Bücher und "
          "für die Reparatur des Daches erhalten würde, das seit dem Winter undicht war.")


def test_the_measure():
    assert other_language(GERMAN, ["en"]) == "de" and other_language(ENGLISH, ["en"]) is None
    assert other_language(GERMAN, ["de", "en"]) is None  # "deu+eng" allows both
    assert other_language(GERMAN, []) is None  # nobody said what the page is in
    quality, suspect = judge(GERMAN, "openai", lang="eng", expected="eng")
    assert suspect and quality["wrong_language"] == "de" and "wrong_language" in Signal.of(quality).reason()
    quality, suspect = judge(GERMAN, "openai", lang="eng")
    assert quality["wrong_language"] is None  # the default language is no one's word


def run(tmp_path: Path, *extra: str, manifest_lang: str | None = None) -> dict:
    doc = make_coded_pdf(tmp_path / "page.pdf", [7])
    paths: tuple[str, ...] = (str(doc),)
    if manifest_lang:
        manifest = tmp_path / "m.csv"
        manifest.write_text(f"doc_id,path,language\npage,{doc},{manifest_lang}\n")
        paths = ("--manifest", str(manifest))
    out = tmp_path / f"r{len(list(tmp_path.glob('r*')))}"
    with serve_in_process(ServerConfig(answer="script", script={7: GERMAN})) as srv:
        res = run_cli("run", *paths, "--out", str(out), "--endpoint", srv.url, "--engine", "openai", "--no-retry",
                      "--workers", "1", *extra, env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode in (0, 2), res.stderr
    (rec,) = [json.loads(line) for line in (out / "pages.jsonl").open()]
    return rec


@pytest.mark.parametrize("how", ["--lang", "manifest"])
def test_a_translation_is_suspect_when_the_page_language_is_known(tmp_path, how):
    rec = run(tmp_path, "--lang", "eng") if how == "--lang" else run(tmp_path, manifest_lang="en")
    assert rec["status"] == "suspect" and rec["quality"]["wrong_language"] == "de", rec["quality"]


def test_no_language_said_no_judgement(tmp_path):
    rec = run(tmp_path)
    assert rec["status"] == "ok" and rec["quality"]["wrong_language"] is None


@pytest.mark.parametrize("source, suspect", [("", True), ("triage", False)])
def test_a_triage_suggestion_is_no_ones_word(tmp_path, source, suspect):
    """Issue 27, point 3: `manifest --triage` carries triage's suggested language, marked
    language_from = triage. The run reads and judges the pages in it, but only a person's language
    (the column as written) makes an answer in another language suspect."""
    doc = make_coded_pdf(tmp_path / "page.pdf", [7])
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"doc_id,path,language,language_from\npage,{doc},en,{source}\n")
    with serve_in_process(ServerConfig(answer="script", script={7: GERMAN})) as srv:
        res = run_cli("run", "--manifest", str(manifest), "--out", str(tmp_path / "r"), "--endpoint", srv.url,
                      "--engine", "openai", "--no-retry", "--workers", "1",
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode in (0, 2), res.stderr
    (rec,) = [json.loads(line) for line in (tmp_path / "r" / "pages.jsonl").open()]
    assert (rec["status"] == "suspect") is suspect, rec
    assert (rec["quality"]["wrong_language"] == "de") is suspect
