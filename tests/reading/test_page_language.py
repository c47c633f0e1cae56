"""The page's language reaches the quality signal: a manifest row's `language` (above a guess and
above --lang), a profile's `language` (below --lang), carried through PageTask into the worker
and the VLM reader, and through SLURM staging — changing the settings key only where it changes
what reads the page (the engine, Tesseract's data: tests/engines/test_document_language.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.cli import run_cli
from support.components import REPO, need
from support.records import finals, read_records
from support.tessdata import only_data
from vlmocr.cluster.slurm.submit import stage_documents
from vlmocr.inputs.sources import from_manifest
from vlmocr.runfolder.rundir import RunDir
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import make_coded_pdf

NO_KEY = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}


def gt_file(name: str) -> Path:
    found = sorted((REPO / "tests" / "data" / "gt").rglob(name))
    assert found, name
    return found[0]


@pytest.mark.tesseract
def test_a_manifest_language_makes_the_signal_judge_the_page_in_it(tmp_path, tesseract):
    """Zonaras (polytonic Greek) read with English data: without a stated language the signal
    judges Latin-letter garbage as English; the row that says `grc` has it judged as Greek.
    Tesseract has English data only here: with grc it would read the stated page with that
    (engines/choice.for_document; tests/engines/test_document_language.py)."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    eng_only = only_data(tmp_path / "tessdata", "eng")
    page = gt_file("zonaras_0054.png")
    shutil.copy(page, tmp_path / "a.png")
    shutil.copy(page, tmp_path / "b.png")
    manifest = tmp_path / "m.csv"
    manifest.write_text("doc_id,path,language\nstated,a.png,grc\nguessed,b.png,\n", encoding="utf-8")
    run = tmp_path / "r"
    res = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--engine", "tesseract", "--lang", "eng",
                  "--workers", "1", env=eng_only)
    assert res.returncode == 2, res.stderr  # both readings are garbage: review
    recs = finals(run)
    stated, guessed = recs[("stated", 1)], recs[("guessed", 1)]
    assert stated["text"] == guessed["text"]  # the same reading: only the judgement differs
    assert (stated["quality"]["language"], stated["quality"]["script"]) == ("grc", "Grek")
    assert guessed["quality"]["script"] == "Latn" and guessed["quality"]["language"] != "grc"
    assert stated["status"] == "suspect"
    # What reads is the same (no grc data): the same key for both, and a changed language whose
    # data is missing too re-reads nothing.
    assert stated["key"] == guessed["key"]
    manifest.write_text("doc_id,path,language\nstated,a.png,deu\nguessed,b.png,ell\n", encoding="utf-8")
    again = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--engine", "tesseract", "--lang", "eng",
                    "--workers", "1", env=eng_only)
    assert again.returncode == 2 and len(read_records(run)) == 2, again.stderr


def test_a_manifest_language_is_checked_where_it_is_written(tmp_path):
    page = tmp_path / "p.png"
    shutil.copy(gt_file("goethe_0014.png"), page)
    manifest = tmp_path / "m.csv"
    manifest.write_text("doc_id,path,language\nok,p.png,de\n", encoding="utf-8")
    assert from_manifest(manifest)[0].language == "deu"
    (tmp_path / "m.jsonl").write_text(json.dumps({"path": "p.png", "language": "script/Fraktur"}) + "\n")
    assert from_manifest(tmp_path / "m.jsonl")[0].language == "script/Fraktur"
    manifest.write_text("doc_id,path,language\nok,p.png,deutsch\n", encoding="utf-8")
    res = run_cli("run", "--manifest", str(manifest), "--out", str(tmp_path / "r"), "--engine", "textlayer")
    assert res.returncode == 3 and f"{manifest}:2" in res.stderr and "'deutsch'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_the_vlm_answer_is_judged_in_the_manifest_or_profile_language(tmp_path):
    make_coded_pdf(tmp_path / "coded.pdf", [1])
    manifest = tmp_path / "m.csv"
    manifest.write_text("doc_id,path,language\nstated,coded.pdf,grc\nplain,coded.pdf,\n", encoding="utf-8")
    profile = tmp_path / "fraktur.toml"
    profile.write_text('name = "fraktur"\nprompt = "Transcribe the page."\nlanguage = "fraktur"\n',
                       encoding="utf-8")
    with serve_in_process(ServerConfig()) as srv:
        runs = {}
        for name, extra in (("manifest", ()), ("profile", ("--profile", str(profile))),
                            ("explicit", ("--profile", str(profile), "--lang", "dan"))):
            res = run_cli("run", "--manifest", str(manifest), "--out", str(tmp_path / name), "--endpoint", srv.url,
                          "--workers", "1", *extra, env=NO_KEY)
            assert res.returncode in (0, 2), res.stderr
            runs[name] = finals(tmp_path / name)
    # The row's language wins over the profile and over --lang.
    for name in runs:
        assert runs[name][("stated", 1)]["quality"]["language"] == "grc", name
    # Without one, the run's language: the profile's (Fraktur data: the page is judged as
    # Fraktur), unless --lang is given. (The language itself is guessed from the text, English
    # for the test server's pages: a run's language only fills in when no guess is possible.)
    assert runs["manifest"][("plain", 1)]["quality"]["script"] == "Latn"
    assert runs["profile"][("plain", 1)]["quality"]["script"] == "Latf"
    assert runs["explicit"][("plain", 1)]["quality"]["script"] == "Latn"
    # Every record names the language its page was read as, and where that came from (issue 27).
    read_as = {name: {doc: (runs[name][(doc, 1)]["language"], runs[name][(doc, 1)]["language_from"])
                      for doc in ("stated", "plain")} for name in runs}
    assert read_as == {"manifest": {"stated": ("grc", "manifest"), "plain": ("eng", "default")},
                       "profile": {"stated": ("grc", "manifest"), "plain": ("frk", "profile")},
                       "explicit": {"stated": ("grc", "manifest"), "plain": ("dan", "--lang")}}


def test_slurm_staging_keeps_the_language(tmp_path):
    shutil.copy(gt_file("goethe_0014.png"), tmp_path / "p.png")
    shutil.copy(gt_file("zonaras_0054.png"), tmp_path / "q.png")
    manifest = tmp_path / "m.csv"
    manifest.write_text("doc_id,path,language\ngoethe,p.png,frk\nzonaras,q.png,\n", encoding="utf-8")
    staged, _ = stage_documents(tmp_path / "run", "bulk", manifest=manifest)
    assert {d.doc_id: d.language for d in from_manifest(staged)} == {"goethe": "frk", "zonaras": None}
    # A manifest without languages stages as before: no language column.
    plain = tmp_path / "plain.csv"
    plain.write_text("doc_id,path\ngoethe,p.png\n", encoding="utf-8")
    staged, _ = stage_documents(tmp_path / "run2", "bulk", manifest=plain)
    assert staged.read_text(encoding="utf-8").splitlines()[0] == "doc_id,path,pages,dpi"
    assert RunDir(tmp_path / "run2").staged == staged.parent
