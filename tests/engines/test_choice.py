"""Which engine reads a scan (engines/choice.py), with real Tesseract and RapidOCR on real pages:
`--engine auto` takes RapidOCR for Latin-script languages (measured better on ../shared/gt),
Tesseract for a script RapidOCR has no model for when it is installed with the language's data,
else RapidOCR and says why (Tesseract's data hidden by TESSDATA_PREFIX, or the binary off the
PATH: real configurations); a run keeps its engine on resume; `tesseract+rapidocr` keeps the
reading with the better signal and shows the other's score."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import run_cli
from support.documents import make_scan_pdf
from support.records import finals, read_records
from support.tessdata import need_tesseract
from vlmocr.engines.choice import choose_ocr_engine
from vlmocr.engines.pick import Candidate, pick
from vlmocr.evaluation.score import cer

pytestmark = pytest.mark.tesseract




def no_data(tmp_path: Path) -> dict[str, str]:
    """Tesseract installed, but looking for its language data in an empty folder."""
    empty = tmp_path / "tessdata"
    empty.mkdir(exist_ok=True)
    return {"TESSDATA_PREFIX": str(empty)}


def not_installed(tmp_path: Path) -> dict[str, str]:
    """A PATH without tesseract on it (python is run by its full path)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    return {"PATH": str(bin_dir)}


def small_scan(tmp_path: Path, pages: int = 1) -> Path:
    """A small image-only PDF: RapidOCR reads a page of it in a second or two."""
    return make_scan_pdf(tmp_path / "scan.pdf", [[f"Page {p} of a plain letter", "with a second line of text"]
                                                 for p in range(1, pages + 1)], size=(700, 260))


def test_the_choice_follows_tesseract_and_its_data(tmp_path):
    need_tesseract("eng", "grc")
    latin = "rapidocr: reads Latn script better than tesseract (BENCHMARKS.md)"
    assert str(choose_ocr_engine("auto", "eng")) == latin
    assert str(choose_ocr_engine("auto", "frk")) == latin.replace("Latn", "Latf")
    assert str(choose_ocr_engine("auto", "grc")) == "tesseract: installed with grc, a Grek script rapidocr has no model for"
    assert str(choose_ocr_engine("tesseract", "eng")) == "tesseract: named by --ocr-engine"
    # Real configurations of the probe: an empty TESSDATA_PREFIX lists no languages.
    assert choice_in(no_data(tmp_path), "grc") == \
        "rapidocr: tesseract has no data for grc (rapidocr has no Grek model: expect review)"
    assert choice_in(not_installed(tmp_path), "grc") == \
        "rapidocr: tesseract not installed (rapidocr has no Grek model: expect review)"
    assert choice_in(not_installed(tmp_path), "eng") == latin


def choice_in(env: dict[str, str], lang: str) -> str:
    """`auto`'s choice in a fresh process with `env` (the probe is cached per process)."""
    code = f"from vlmocr.engines.choice import choose_ocr_engine as c; print(c('auto', {lang!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **env})
    return out.stdout.strip()


def test_auto_reads_greek_with_tesseract_when_it_has_grc(tmp_path, gt):
    need_tesseract("grc")
    page = gt / "zonaras" / "zonaras_0054.png"
    res = run_cli("run", str(page), "--out", str(tmp_path / "r"), "--lang", "grc", "--workers", "1")
    assert res.returncode == 0, res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["engine"] == "tesseract"
    assert rec["engine_choice"] == "tesseract: installed with grc, a Grek script rapidocr has no model for"
    assert cer(rec["text"], page.with_suffix(".txt").read_text(encoding="utf-8")) < 0.10
    # Said once at the start, kept in run.json; the settings keep what was asked.
    assert res.stderr.count("tesseract (installed with grc") == 1, res.stderr
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["engine_choice"] == {"engine": "tesseract", "lang": "grc",
                                     "reason": "installed with grc, a Grek script rapidocr has no model for"}
    assert info["settings"]["ocr_engine"] == "auto" and info["key_material"]["reader"] == "tesseract"
    assert info["versions"]["tesseract"]


def test_auto_without_the_language_data_reads_with_rapidocr_and_says_why(tmp_path):
    need_tesseract()
    res = run_cli("run", str(small_scan(tmp_path)), "--out", str(tmp_path / "r"), "--lang", "grc",
                  "--workers", "1", env=no_data(tmp_path))
    assert res.returncode in (0, 2), res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["engine"] == "rapidocr"
    assert rec["engine_choice"] == "rapidocr: tesseract has no data for grc (rapidocr has no Grek model: expect review)"
    assert "rapidocr (tesseract has no data for grc" in res.stderr
    assert "plain letter" in rec["text"]


def test_a_run_keeps_its_engine_on_resume(tmp_path):
    """Started where Tesseract had no Greek data (auto → RapidOCR), resumed where it has: the pages
    still owed are read with RapidOCR too — one engine per document — and the record says why.
    Naming the engine reads the run again with it (a new settings key), never a mix."""
    need_tesseract("grc")
    pdf = small_scan(tmp_path, pages=2)
    run = tmp_path / "run"
    first = tmp_path / "first.csv"
    first.write_text(f"doc_id,path,pages\nletter,{pdf},1\n", encoding="utf-8")
    res = run_cli("run", "--manifest", str(first), "--out", str(run), "--workers", "1", "--lang", "grc",
                  env=no_data(tmp_path))
    assert res.returncode in (0, 2), res.stderr
    assert [r["engine"] for r in read_records(run)] == ["rapidocr"]

    both = tmp_path / "both.csv"
    both.write_text(f"doc_id,path\nletter,{pdf}\n", encoding="utf-8")
    res = run_cli("run", "--manifest", str(both), "--out", str(run), "--workers", "1", "--lang", "grc")
    assert res.returncode in (0, 2), res.stderr
    recs = read_records(run)
    assert [(r["page"], r["engine"]) for r in recs] == [(1, "rapidocr"), (2, "rapidocr")]
    assert recs[1]["engine_choice"].startswith("rapidocr: this run started with it (tesseract is now installed")
    assert len({r["key"] for r in recs}) == 1
    assert "rapidocr (this run started with it" in res.stderr
    md = (run / "docs" / "letter.md").read_text(encoding="utf-8")
    assert md.count("| rapidocr -->") == 2 and "tesseract" not in md

    # Named: a new key, so every page is read again with Tesseract and the document is its alone.
    res = run_cli("run", "--manifest", str(both), "--out", str(run), "--workers", "1", "--lang", "grc",
                  "--ocr-engine", "tesseract", "--reread")
    assert res.returncode in (0, 2), res.stderr
    news = read_records(run)[2:]
    assert [(r["page"], r["engine"]) for r in news] == [(1, "tesseract"), (2, "tesseract")]
    assert "engine_choice" not in news[0] or news[0]["engine_choice"] == "tesseract: named by --ocr-engine"
    md = (run / "docs" / "letter.md").read_text(encoding="utf-8")
    assert md.count("| tesseract -->") == 2 and "rapidocr" not in md


def test_a_run_started_with_tesseract_will_not_go_on_without_its_data(tmp_path):
    need_tesseract("grc")
    pdf = small_scan(tmp_path)
    run = tmp_path / "run"
    assert run_cli("run", str(pdf), "--out", str(run), "--workers", "1", "--lang", "grc").returncode in (0, 2)
    assert [r["engine"] for r in read_records(run)] == ["tesseract"]
    res = run_cli("run", str(pdf), "--out", str(run), "--workers", "1", "--lang", "grc", env=no_data(tmp_path))
    assert res.returncode == 3, (res.stdout, res.stderr)
    assert "started with tesseract (grc)" in res.stderr and "Traceback" not in res.stderr
    assert len(read_records(run)) == 1
    # --force reads the run again whole: a fresh choice, no mix.
    res = run_cli("run", str(pdf), "--out", str(run), "--workers", "1", "--lang", "grc", "--force",
                  env=no_data(tmp_path))
    assert res.returncode in (0, 2), res.stderr
    assert [r["engine"] for r in read_records(run)] == ["tesseract", "rapidocr"]


def test_auto_reads_latin_scans_with_rapidocr_and_a_tesseract_run_keeps_tesseract(tmp_path):
    """A Latin-script language: RapidOCR, said once and kept; a run started when auto still
    chose Tesseract for it goes on with Tesseract (one engine per document)."""
    need_tesseract("eng")
    pdf = small_scan(tmp_path)
    res = run_cli("run", str(pdf), "--out", str(tmp_path / "r"), "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["engine"] == "rapidocr" and rec["engine_choice"].startswith("rapidocr: reads Latn script better")
    assert "plain letter" in rec["text"]
    # A run directory auto started with Tesseract for eng (the former rule) keeps it on resume.
    kept = choose_ocr_engine("auto", "eng", earlier=("tesseract", "eng"))
    assert kept.engine == "tesseract" and kept.reason.startswith("this run started with it")


def test_both_engines_keep_the_reading_with_the_better_signal(tmp_path, gt):
    """Fraktur German read with Greek data is garbage from Tesseract; RapidOCR (no language
    data) reads it well: the composite keeps RapidOCR's reading and shows Tesseract's score."""
    need_tesseract("grc")
    page = gt / "goethe" / "goethe_0014.png"
    truth = page.with_suffix(".txt").read_text(encoding="utf-8")
    res = run_cli("run", str(page), "--out", str(tmp_path / "t"), "--engine", "tesseract", "--lang", "grc",
                  "--workers", "1")
    (alone,) = finals(tmp_path / "t").values()
    assert cer(alone["text"], truth) > 0.3 and alone["status"] == "suspect", res.stderr

    res = run_cli("run", str(page), "--out", str(tmp_path / "r"), "--engine", "auto", "--ocr-engine",
                  "tesseract+rapidocr", "--lang", "grc", "--workers", "1")
    # --lang grc said the page is Greek: RapidOCR's good German reading is kept, and asked about
    # (issue 32: an answer in another language than the one a person gave is suspect).
    assert res.returncode == 2, res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["engine"] == "rapidocr" and rec["status"] == "suspect" and rec["quality"]["wrong_language"] == "de"
    assert rec["engine_choice"].startswith("rapidocr: better signal"), rec["engine_choice"]
    assert cer(rec["text"], truth) < 0.10
    (other,) = rec["quality"]["alternatives"]
    assert other["engine"] == "tesseract" and other["status"] == "suspect"
    assert other["score"] == alone["quality"]["score"] < rec["quality"]["score"]
    assert rec["seconds"] >= other["seconds"] > 0
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["key_material"]["reader"] == "tesseract+rapidocr" and info["key_material"]["lang"] == "grc"
    assert info["versions"]["tesseract"] and info["versions"]["rapidocr"]


def test_pick_prefers_a_readable_reading_then_the_higher_score():
    def q(score: float) -> dict[str, float]:
        return {"score": score, "threshold": 0.9}

    assert pick([Candidate("tesseract", True, q(0.8)), Candidate("rapidocr", True, q(0.95))])[0] == 1
    assert pick([Candidate("tesseract", True, q(0.95)), Candidate("rapidocr", True, q(0.8))])[0] == 0
    # A tie goes to the first named; an empty or looping reading loses to any readable one.
    assert pick([Candidate("tesseract", True, q(0.9)), Candidate("rapidocr", True, q(0.9))])[0] == 0
    best, why = pick([Candidate("tesseract", False, q(1.0)), Candidate("rapidocr", True, q(0.2))])
    assert best == 1 and why == "tesseract gave no usable reading"


def test_auto_follows_the_ranks_the_engines_declare(monkeypatch):
    """Issue 28: an engine declares its rank and scripts for `auto` in its own file; the rule has no
    engine names of its own. A new engine ranked first for Greek takes Greek from Tesseract, and
    the languages it does not claim stay with the engines that did."""
    from dataclasses import replace

    from vlmocr.engines import choice, registry
    from vlmocr.engines.base import CpuEngine

    greek = CpuEngine("greekocr", None, ocr=True, auto_rank=0, auto_scripts=frozenset({"Grek"}),
                      auto_rule="GreekOCR for Greek")
    monkeypatch.setitem(registry.CPU_ENGINES, "greekocr", greek)
    have = frozenset({"grc", "eng"})
    assert choice.best_for("grc", have) == choice.EngineChoice(
        "greekocr", "reads Grek script better than rapidocr or tesseract (BENCHMARKS.md)")
    assert choice.best_for("eng", have).engine == "rapidocr"
    assert choice.best_for("rus", frozenset({"rus"})).engine == "tesseract"
    # Unranked, `auto` never picks it.
    monkeypatch.setitem(registry.CPU_ENGINES, "greekocr", replace(greek, auto_rank=None))
    assert choice.best_for("grc", have).engine == "tesseract"
