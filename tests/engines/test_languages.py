"""--lang: Tesseract's names, aliases, script models under either layout, and a missing pack as a
one-line usage error naming the Debian package — against the real tesseract and its data."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import REPO, need
from vlmocr import languages
from vlmocr.exceptions import UsageError
from vlmocr.languages import (
    DEBIAN_LANGUAGES,
    canonical_lang,
    debian_package,
    installed_languages,
    resolve_lang,
    script_of_lang,
    suggest_lang,
    tesseract_has_language,
)
from vlmocr.settings.config import load_config


def gt_page(name: str) -> Path:
    """A page copied into tests/data/gt (in its set's folder or beside the others)."""
    found = sorted((REPO / "tests" / "data" / "gt").rglob(name))
    assert found, name
    return found[0]


def test_aliases_name_tesseract_data_and_tesseract_names_stay_as_given():
    assert canonical_lang("de+cs+da+sk") == "deu+ces+dan+slk"
    assert canonical_lang("fraktur") == "frk" and canonical_lang("ger+cze+slo") == "deu+ces+slk"
    assert canonical_lang("el") == "ell"  # Modern Greek; polytonic is grc, which has no 639-1 code
    # Every name Tesseract or Debian spells stays as it is: no settings key of an existing run changes.
    for name in DEBIAN_LANGUAGES | {"Fraktur", "script/Fraktur", "deu_latf", "Latin"}:
        assert canonical_lang(name) == name
    for bad in ("", "deu eng", "deu+", "../frk", "deu,eng"):
        with pytest.raises(ValueError):
            canonical_lang(bad)


def test_the_settings_take_aliases_and_refuse_a_malformed_list_in_one_line(tmp_path):
    assert load_config({"lang": "de+fraktur"}).lang == "deu+frk"
    res = run_cli("run", str(tmp_path), "--out", str(tmp_path / "r"), "--engine", "tesseract", "--lang", "deu eng")
    assert res.returncode == 3
    assert len(res.stderr.strip().splitlines()) == 1 and "lang" in res.stderr and "Traceback" not in res.stderr


def test_scripts_and_suggestions():
    assert [script_of_lang(x) for x in ("frk", "script/Fraktur", "grc+lat", "ell", "deu", "rus")] == \
        ["Latf", "Latf", "Grek", "Grek", "Latn", "Cyrl"]
    assert suggest_lang("Latf", "deu") == "frk"  # German in Fraktur: the Fraktur data, not deu
    assert suggest_lang("Grek", "") == "grc" and suggest_lang("Latn", "ces") == "ces"
    assert suggest_lang("Latn", "und") == "" and suggest_lang(None, "dan") == "dan"


@pytest.mark.tesseract
def test_the_package_named_is_the_one_that_ships_the_installed_data(tesseract):
    """For every language installed here, dpkg says which package owns its file: the map names
    that package (tesseract-ocr-frk, tesseract-ocr-script-frak for Fraktur, …)."""
    need(shutil.which("dpkg") is not None, "dpkg (a Debian system)")
    folder = Path(languages.tessdata_folder())
    checked = 0
    for name in sorted(installed_languages()):
        owner = subprocess.run(["dpkg", "-S", str(folder / f"{name}.traineddata")], capture_output=True, text=True,
                               check=False)
        if owner.returncode != 0:
            continue  # a file a user put there
        assert debian_package(name) == owner.stdout.split(":")[0], name
        checked += 1
    assert checked >= 3
    need({"frk", "grc", "ces", "dan", "slk"} <= installed_languages(), "tesseract language data frk grc ces dan slk",
         tuple(f"tesseract-ocr-{x}" for x in ("frk", "grc", "ces", "dan", "slk")))
    assert all(tesseract_has_language(x) for x in ("frk", "grc", "cs", "da", "sk", "deu+eng"))


@pytest.mark.tesseract
def test_a_script_model_is_found_under_either_spelling(tesseract):
    need("Fraktur" in installed_languages() or "script/Fraktur" in installed_languages(),
         "Tesseract's Fraktur script model", "tesseract-ocr-script-frak")
    installed = "Fraktur" if "Fraktur" in installed_languages() else "script/Fraktur"
    assert resolve_lang("script/Fraktur+de") == f"{installed}+deu"
    assert resolve_lang("Fraktur") == installed


@pytest.fixture
def eng_only(tmp_path, tesseract) -> dict[str, str]:
    """A tessdata folder holding English alone (TESSDATA_PREFIX): every other pack is missing."""
    folder = Path(languages.tessdata_folder())
    need((folder / "eng.traineddata").is_file(), "English data", "tesseract-ocr-eng")
    data = tmp_path / "tessdata"
    data.mkdir()
    (data / "eng.traineddata").symlink_to(folder / "eng.traineddata")
    return {"TESSDATA_PREFIX": str(data)}


@pytest.mark.tesseract
@pytest.mark.parametrize("lang, package", [("frk", "tesseract-ocr-frk"), ("script/Fraktur", "tesseract-ocr-script-frak"),
                                           ("sk", "tesseract-ocr-slk"), ("grc+eng", "tesseract-ocr-grc")])
def test_a_missing_pack_is_one_line_naming_the_debian_package(tmp_path, eng_only, lang, package):
    res = run_cli("run", str(gt_page("goethe_0014.png")), "--out", str(tmp_path / "r"), "--engine", "tesseract",
                  "--lang", lang, env=eng_only)
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"apt-get install {package}" in lines[0], res.stderr
    assert not (tmp_path / "r" / "pages.jsonl").exists() or not (tmp_path / "r" / "pages.jsonl").read_text()


@pytest.mark.tesseract
def test_unpackaged_data_says_where_to_put_it(eng_only, monkeypatch):
    monkeypatch.setenv("TESSDATA_PREFIX", eng_only["TESSDATA_PREFIX"])
    with pytest.raises(UsageError) as err:
        resolve_lang("deu_latf")
    assert "deu_latf.traineddata" in str(err.value) and eng_only["TESSDATA_PREFIX"] in str(err.value)


@pytest.mark.tesseract
def test_fraktur_script_model_reads_a_fraktur_page_through_a_run(tmp_path, tesseract):
    """`--lang script/Fraktur` (tessdata's spelling) reads with Debian's Fraktur.traineddata: the
    check resolves the name once and the workers read with it."""
    need("Fraktur" in installed_languages() or "script/Fraktur" in installed_languages(),
         "Tesseract's Fraktur script model", "tesseract-ocr-script-frak")
    page = gt_page("goethe_0014.png")
    res = run_cli("run", str(page), "--out", str(tmp_path / "r"), "--engine", "tesseract",
                  "--lang", "script/Fraktur", "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    rec = json.loads((tmp_path / "r" / "pages.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert rec["model"] in ("tesseract:Fraktur", "tesseract:script/Fraktur")
    from vlmocr.evaluation.score import cer

    assert cer(rec["text"], page.with_suffix(".txt").read_text(encoding="utf-8")) < 0.15


@pytest.mark.tesseract
def test_slovak_data_reads_through_its_iso_code(tmp_path, tesseract):
    """`--lang sk` is Tesseract's slk (tesseract-ocr-slk): the top of a real page, read with it."""
    need("slk" in installed_languages(), "Slovak data", "tesseract-ocr-slk")
    top = tmp_path / "top.png"
    with Image.open(gt_page("goethe_0014.png")) as im:
        im.crop((0, 0, im.width, im.height // 4)).save(top)
    res = run_cli("run", str(top), "--out", str(tmp_path / "r"), "--engine", "tesseract", "--lang", "sk",
                  "--workers", "1", env={"OMP_THREAD_LIMIT": "1"})
    assert res.returncode in (0, 2), res.stderr
    rec = json.loads((tmp_path / "r" / "pages.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert rec["model"] == "tesseract:slk" and rec["text"].strip()
    assert json.loads((tmp_path / "r" / "run.json").read_text())["settings"]["lang"] == "slk"


def test_no_tesseract_means_no_language(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on it
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path / "elsewhere"))  # a cache entry of its own
    assert not tesseract_has_language("eng") and installed_languages() == frozenset()


def test_a_language_no_tesseract_reads_by_is_refused_before_any_page(tmp_path):
    # Issue 47, point 3: `--lang german` was taken, 25 pages read for 2.5 minutes and 15 marked suspect.
    import time

    from support.cli import run_cli
    from support.documents import make_text_pdf
    from vlmocr.exceptions import ExitCode
    from vlmocr.languages import did_you_mean, unknown_names

    doc = make_text_pdf(tmp_path / "letter.pdf", [["Sehr geehrter Herr"]])
    for lang, guess in (("german", "deu"), ("Deu", "deu"), ("deuu", "deu"), ("deu+english", "eng")):
        started = time.monotonic()
        res = run_cli("run", str(doc), "--out", str(tmp_path / "run"), "--lang", lang)
        assert res.returncode == ExitCode.usage, res.stderr
        assert time.monotonic() - started < 30 and not (tmp_path / "run").exists()
        assert f"did you mean {guess}?" in res.stderr and "traineddata" not in res.stderr, res.stderr
    # The same check for a manifest's language column, naming the row, before the first page.
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"doc_id,path,language\nletter,{doc},deu\nother,{doc},danish\n", encoding="utf-8")
    res = run_cli("run", "--manifest", str(manifest), "--out", str(tmp_path / "run"))
    assert res.returncode == ExitCode.usage and f"{manifest}:3" in res.stderr and "did you mean dan?" in res.stderr
    assert unknown_names("deu+frk+grc+script/Fraktur") is None and did_you_mean("klingon") is None
