"""Long s and its kin: opt-in folds in the clean rules and in `vlmocr evaluate`, which names the
normalisation it applied — on a real Fraktur page read by the real Tesseract."""

from __future__ import annotations

import json
import shutil
import unicodedata
from pathlib import Path

import pytest

from support.cli import run_cli
from support.components import REPO, need
from vlmocr.evaluation.score import canonical_folds, normalisation_name, normalize
from vlmocr.exceptions import UsageError
from vlmocr.text import historic
from vlmocr.text.clean import CleanRules, clean_text, load_rules, parse_rules

FRAKTUR = "Aͤrzte ſind ꝛc. auf der Poſt, Schiﬀe und ﬁnden die Laſt; Cæſar"


def test_each_fold_writes_what_its_ocrd_level_writes():
    assert historic.fold(FRAKTUR, ["long_s"]) == "Aͤrzte sind ꝛc. auf der Post, Schiﬀe und ﬁnden die Last; Cæsar"
    level2 = historic.fold(FRAKTUR, historic.LEVELS["ocrd2"])
    assert level2 == "Ärzte ſind ꝛc. auf der Poſt, Schiffe und finden die Laſt; Cæſar"
    assert unicodedata.is_normalized("NFC", level2)  # the umlaut is the one precomposed letter
    level1 = historic.fold(FRAKTUR, historic.LEVELS["ocrd1"])
    assert level1 == "Ärzte sind rc. auf der Post, Schiffe und finden die Last; Cæsar"  # æ is a letter: it stays
    # ligatures apply first: the long-s-t ligature is ſt at level 2 and st at level 1
    assert historic.fold("ﬅ", ["ligatures"]) == "ſt" and historic.fold("ﬅ", ["long_s", "ligatures"]) == "st"


def test_the_clean_rules_fold_only_when_asked_and_old_layers_keep_their_hash(tmp_path):
    default = load_rules()
    assert clean_text(FRAKTUR, default) == FRAKTUR  # opt-in: the raw letters stay
    rules = tmp_path / "fold.toml"
    rules.write_text("[fold]\nlong_s = true\n", encoding="utf-8")
    folded = load_rules(rules)
    assert clean_text(FRAKTUR, folded) == FRAKTUR.replace("ſ", "s")
    # No fold on: the rule set's hash is the one it had before [fold] existed, so a cleaned layer
    # built then is still current; any fold on changes it.
    off = parse_rules("[fold]\nlong_s = false\n")
    assert off.hash == CleanRules().hash == default.hash
    assert "fold" not in default.canonical() and folded.canonical()["fold"]["long_s"] is True
    assert folded.hash != default.hash


def test_evaluate_folds_are_named_and_validated():
    assert canonical_folds(["case", "long_s"]) == ["long_s", "case"]
    assert canonical_folds(["ocrd1"]) == ["ligatures", "superscript_e", "r_rotunda", "long_s"]
    assert normalisation_name() == "nfc+whitespace"
    assert normalisation_name(["long_s"]) == "nfc+whitespace+long_s"
    assert normalize("Poſt  ﬁnden", ["ocrd2"]) == "Poſt finden"
    with pytest.raises(UsageError):
        canonical_folds(["longs"])


@pytest.fixture(scope="module")
def fraktur_run(tmp_path_factory) -> tuple[Path, Path]:
    """A real Fraktur page (Goethe 1809) read with Tesseract's frk, which writes ſ where the
    transcription (OCR-D level 1 for s) has s."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    base = tmp_path_factory.mktemp("fraktur")
    truth = base / "truth"
    truth.mkdir()
    for found in (REPO / "tests" / "data" / "gt").rglob("goethe_0014.*"):
        shutil.copy(found, truth / found.name)
    run = base / "run"
    res = run_cli("run", str(truth / "goethe_0014.png"), "--out", str(run), "--engine", "tesseract", "--lang", "frk",
                  "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    return run, truth


@pytest.mark.tesseract
def test_evaluate_says_which_normalisation_and_the_long_s_fold_halves_the_error(fraktur_run, tmp_path):
    run, truth = fraktur_run
    raw = run_cli("evaluate", str(run), "--truth", str(truth), "--json", "--bootstrap", "0")
    folded = run_cli("evaluate", str(run), "--truth", str(truth), "--json", "--bootstrap", "0", "--fold", "long_s")
    assert raw.returncode == 0 and folded.returncode == 0, raw.stderr + folded.stderr
    raw_ev, folded_ev = json.loads(raw.stdout), json.loads(folded.stdout)
    assert raw_ev["normalisation"] == "nfc+whitespace"
    assert folded_ev["normalisation"] == "nfc+whitespace+long_s"
    assert "ſ" in json.loads((run / "pages.jsonl").read_text(encoding="utf-8").splitlines()[-1])["text"]
    assert folded_ev["corpus"]["cer"] < 0.75 * raw_ev["corpus"]["cer"]
    table = run_cli("evaluate", str(run), "--truth", str(truth), "--bootstrap", "0", "--fold", "ocrd1")
    shown = " ".join(table.stdout.split())  # the console wraps long lines
    assert "normalisation: nfc+whitespace+ligatures+superscript_e+r_rotunda+long_s" in shown
    # The clean rule folds the text itself (the truth is not touched); evaluate says so.
    rules = tmp_path / "fold.toml"
    rules.write_text("[fold]\nlong_s = true\n", encoding="utf-8")
    cleaned = run_cli("evaluate", str(run), "--truth", str(truth), "--json", "--bootstrap", "0", "--clean",
                      "--rules", str(rules))
    unfolded = run_cli("evaluate", str(run), "--truth", str(truth), "--json", "--bootstrap", "0", "--clean")
    clean_ev, unfolded_ev = json.loads(cleaned.stdout), json.loads(unfolded.stdout)
    assert clean_ev["clean_folds"] == ["long_s"] and clean_ev["normalisation"] == "nfc+whitespace"
    assert "clean_folds" not in unfolded_ev
    assert clean_ev["corpus"]["cer"] < 0.75 * unfolded_ev["corpus"]["cer"]
    bad = run_cli("evaluate", str(run), "--truth", str(truth), "--fold", "longs")
    assert bad.returncode == 3 and len(bad.stderr.strip().splitlines()) == 1
