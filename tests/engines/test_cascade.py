"""Issue 30, point 1, CPU tiers: `--engine tesseract,rapidocr` reads every page with Tesseract and
asks RapidOCR only for the pages whose Tesseract reading fails its signal, keeping the better of
the two; the record names the engine that read it, the tier and why, and the other reading's
score. Real engines on real pages (tests/data/gt): a Fraktur page Tesseract reads well with
German data, and an English typescript read with German data, which fails the signal."""

from __future__ import annotations

import shutil

from support.cli import run_cli
from support.components import GT, need
from support.records import finals

from vlmocr.engines.registry import CPU_ENGINES, engine_key_material


def test_the_second_tier_reads_only_the_pages_the_first_fails(tmp_path):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = tmp_path / "in"
    scans.mkdir()
    shutil.copy(GT / "goethe" / "goethe_0014.png", scans / "fraktur.png")
    shutil.copy(GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg", scans / "english.jpg")
    run = tmp_path / "run"
    res = run_cli("run", str(scans), "--out", str(run), "--engine", "tesseract,rapidocr", "--lang", "deu",
                  "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    recs = {doc: rec for (doc, _), rec in finals(run).items()}
    first = recs["fraktur"]
    assert (first["engine"], first["status"]) == ("tesseract", "ok")
    assert first["engine_choice"] == "tesseract: tier 1 of 2: passed its signal"
    assert "alternatives" not in first["quality"]  # RapidOCR never read it
    second = recs["english"]
    assert second["engine_choice"].startswith(f"{second['engine']}: tier 2 of 2, tesseract failed the signal; ")
    others = {a["engine"] for a in second["quality"]["alternatives"]}
    assert others == {"tesseract", "rapidocr"} - {second["engine"]}


def test_the_cascade_is_its_own_reading():
    casc, both = CPU_ENGINES["tesseract,rapidocr"], CPU_ENGINES["tesseract+rapidocr"]
    assert casc.cascade and not both.cascade and casc.parts == both.parts == ("tesseract", "rapidocr")
    # Both engines' settings are in its key (it may read with either).
    assert engine_key_material("tesseract,rapidocr", "deu") == engine_key_material("tesseract+rapidocr", "deu")
