"""`vlmocr triage` names each document's script and the --lang to read it with: from the text
layer's letters, from Tesseract's script detection on real scans (`--osd N`), or honestly
"unknown" for a scan nobody looked at."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from support.cli import run_cli
from support.components import REPO, need
from support.documents import make_text_pdf
from vlmocr import languages
from vlmocr.corpus.facts import greek_language, text_script
from vlmocr.engines.osd import PageScript, document_script, parse_osd

GT = REPO / "tests" / "data" / "gt"
GERMAN = ["Der Verein hat sich in der Sitzung vom 12. Mai mit der Frage beschäftigt,",
          "ob die Mitglieder auch in diesem Jahre wieder zu einer Reise in die Berge",
          "aufgefordert werden sollen, und ist zu dem Schlusse gekommen, dass man es",
          "bei dem alten Brauche lassen will, weil die meisten es so wünschen."]


def gt_file(name: str) -> Path:
    found = sorted(GT.rglob(name))
    assert found, name
    return found[0]


def rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return {r["doc_id"]: r for r in csv.DictReader(fh)}


def test_the_script_of_real_transcriptions():
    greek = gt_file("zonaras_0054.txt").read_text(encoding="utf-8")
    assert text_script(greek) == "Grek" and greek_language(greek) == "grc"  # polytonic, Latin apparatus aside
    assert greek_language("Η Ελλάδα είναι χώρα της Ευρώπης") == "ell"
    assert text_script(gt_file("goethe_0014.txt").read_text(encoding="utf-8")) == "Latn"  # Fraktur, spelled in Latin
    assert text_script("Ab 12") == ""  # too few letters to say


def test_osd_output_and_the_vote():
    out = "Page number: 0\nOrientation in degrees: 0\nRotate: 0\nOrientation confidence: 15.81\n" \
          "Script: Fraktur\nScript confidence: 30.71\n"
    assert parse_osd(out) == ("Latf", 30.71) and parse_osd("Too few characters. Skipping this page") == ("", 0.0)
    # A Greek answer at 0.6 is OSD guessing (typewritten German scored so): it abstains.
    assert document_script([PageScript("Grek", 0.6, 1.0), PageScript("Latn", 4.0, 1.0)]) == ("Latn", "osd 1/2 pages")
    assert document_script([PageScript("Latf", 7.5, 1.0)])[0] == ""  # a Fraktur answer needs 10
    assert document_script([PageScript("Grek", 3.5, 1.0), PageScript("Grek", 2.2, 1.0),
                            PageScript("Latn", 0.3, 1.0)]) == ("Grek", "osd 2/3 pages")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("scripts")
    shutil.copy(gt_file("goethe_0014.png"), d / "goethe.png")
    shutil.copy(gt_file("zonaras_0054.png"), d / "zonaras.png")
    make_text_pdf(d / "verein.pdf", [GERMAN * 3])
    return d


def test_without_osd_a_scan_is_unknown_and_a_text_layer_says_its_script(corpus, tmp_path):
    res = run_cli("triage", str(corpus), "--out", str(tmp_path / "t.csv"), "--workers", "1")
    assert res.returncode == 0, res.stderr
    got = rows(tmp_path / "t.csv")
    verein = got["verein"]
    assert (verein["script"], verein["script_source"], verein["lang"], verein["suggest_lang"]) == \
        ("Latn", "text layer", "deu", "deu")
    for scan in ("goethe", "zonaras"):
        assert (got[scan]["script"], got[scan]["suggest_lang"]) == ("", "")
        assert got[scan]["script_source"] == "unknown (scan; --osd N to detect)"
    assert "scripts: Latn=1 unknown=2" in res.stdout


@pytest.mark.tesseract
def test_osd_tells_fraktur_and_greek_scans_apart(corpus, tmp_path, tesseract):
    need("osd" in languages.installed_languages(), "tesseract OSD data", "tesseract-ocr-osd")
    res = run_cli("triage", str(corpus), "--out", str(tmp_path / "t.csv"), "--workers", "1", "--osd", "1", "--json")
    assert res.returncode == 0, res.stderr
    got = rows(tmp_path / "t.csv")
    assert (got["goethe"]["script"], got["goethe"]["script_source"], got["goethe"]["suggest_lang"]) == \
        ("Latf", "osd 1/1 pages", "frk")
    assert (got["zonaras"]["script"], got["zonaras"]["suggest_lang"]) == ("Grek", "grc")
    assert got["verein"]["script"] == "Latn"  # no scans: OSD is not run on it


@pytest.mark.tesseract
def test_osd_without_its_data_is_one_line_naming_the_package(corpus, tmp_path, tesseract):
    data = tmp_path / "tessdata"
    data.mkdir()
    (data / "eng.traineddata").symlink_to(Path(languages.tessdata_folder()) / "eng.traineddata")
    res = run_cli("triage", str(corpus), "--out", str(tmp_path / "t.csv"), "--osd", "1",
                  env={"TESSDATA_PREFIX": str(data)})
    assert res.returncode == 3
    assert len(res.stderr.strip().splitlines()) == 1 and "apt-get install tesseract-ocr-osd" in res.stderr
    assert not (tmp_path / "t.csv").exists()
