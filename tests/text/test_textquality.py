"""Quality without ground truth: dictionary words and implausible characters, on real pages."""

from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path

import pytest

from support.cli import cli_in_process as cli
from support.cli import run_cli
from vlmocr.runfolder.record import PageRecord, Row
from vlmocr.runfolder.store import RecordWriter
from vlmocr.text.textquality import (
    assess_page,
    guess_language,
    implausible_chars,
    lexicon,
    page_language,
    wordfreq_code,
    words_of,
)


def rec(text: str, doc_id: str = "d", page: int = 1, **extra) -> Row:
    return Row.of({"doc_id": doc_id, "page": page, "status": "ok", "text": text, "key": "k", **extra})


def garble(text: str, seed: int = 1) -> str:
    """Every word's letters shuffled: the shape of a page, none of its words."""
    rnd = random.Random(seed)
    out = []
    for w in text.split():
        letters = list(w)
        rnd.shuffle(letters)
        out.append("".join(letters))
    return " ".join(out)


def test_language_codes():
    assert [wordfreq_code(x) for x in ("eng", "en", "English", "deu+eng", "frk", "fra", "ces", "dan", "grc", "de-DE")] \
        == ["en", "en", "en", "de", "de", "fr", "cs", "da", "grc", "de"]
    assert wordfreq_code("xyz") is None and wordfreq_code(None) is None
    assert lexicon("xyz") is None


def test_truth_pages_of_every_set_read_as_words(gt):
    # the ground truth itself: every page's language is guessed right and none is suspicious
    with (gt / "pages.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {row["set"] for row in rows} == {"goethe", "grenzboten", "zonaras", "ehri_en", "ehri_de", "ehri_cs",
                                            "ehri_da", "tapus"}
    for row in rows:
        text = (gt / row["truth"]).read_text(encoding="utf-8")
        q = assess_page(rec(text, row["name"]))
        assert q.language == wordfreq_code(row["language"]), row["name"]
        assert q.language_from == "guess"
        assert not q.suspicious, (row["name"], q.reasons)
        assert q.implausible == 0
        floor = 0.45 if row["language"] == "grc" else 0.75  # polytonic Greek against a modern list
        assert q.known_share > floor, (row["name"], q.known_share)


def test_garbled_page_is_suspicious(gt):
    text = (gt / "ehri_en" / "EHRI-DR-19421116-US_02.txt").read_text(encoding="utf-8")
    good = assess_page(rec(text), lang="eng")
    bad = assess_page(rec(garble(text)), lang="eng")
    assert good.known_share > 0.9 and not good.suspicious
    assert bad.known_share < 0.6 and bad.suspicious and bad.reasons[0].startswith("known words")


def test_implausible_characters():
    german = "Die Verwaltung der Stadt hat beschlossen, das Gebäude zu erhalten. " * 3
    assert implausible_chars(german, "de") == []
    mixed = german + "Дом 家 \ufffd \x07"
    assert sorted(implausible_chars(mixed, "de")) == sorted(["Д", "о", "м", "家", "\ufffd", "\x07"])
    # Greek is at home in a Greek page, Latin too (the apparatus), Cyrillic is not
    assert implausible_chars("λόγος Hist. eccl.", "grc") == []
    assert implausible_chars("λόγος", "en") == ["λ", "ό", "γ", "ο", "ς"]
    q = assess_page(rec(mixed), lang="de")
    assert q.implausible == 6 and q.suspicious and "implausible characters" in q.reasons[0]
    assert set(q.implausible_sample) == {"Д", "о", "м", "家", "\ufffd", "\x07"}


def test_short_pages_are_not_judged_on_words():
    q = assess_page(rec("Xqzt vlorp."), lang="en")
    assert q.words == 2 and q.known_share == 0 and not q.suspicious
    assert assess_page(rec(""), lang="en").reasons == ["no text"]
    failed = assess_page(rec("", status="error"), lang="en")
    assert failed.suspicious and failed.reasons == ["status error"]


def test_where_the_language_comes_from():
    text = "the of and to in a is that for it as was with be by on not he"
    assert page_language(rec(text, fields={"language": "de"}), "fr") == ("de", "record")
    assert page_language(rec(text), "fr") == ("fr", "option")
    assert page_language(rec(text, model="tesseract:deu+eng")) == ("de", "model")
    assert page_language(rec(text)) == ("en", "guess")
    assert page_language(rec("12 34")) == (None, "none")
    assert guess_language("Le président de la République a signé le décret et les ministres sont partis.") == "fr"
    assert guess_language("Der Präsident hat das Gesetz unterschrieben und die Minister sind nach Hause gegangen.") \
        == "de"


def test_lexicon_lookups():
    de, en, grc = lexicon("de"), lexicon("en"), lexicon("grc")
    assert de.known("Straße") and de.known("STRASSE") and de.known("Häuser") and de.known("ſie")
    assert en.known("well-known") and not en.known("xqzt")
    assert grc.known("λόγος") and grc.known("καὶ")  # polytonic, accents folded
    assert words_of("Self-esteem, l’homme — 42 x") == ["Self-esteem", "l’homme"]


def write_run(run: Path, records: list[Row]) -> Path:
    with RecordWriter(run / "pages.jsonl") as w:
        for r in records:
            w.append(PageRecord(source="x.pdf", engine="test", **r.data))
    return run


def test_suspicious_cli(gt, tmp_path):
    en = (gt / "ehri_en" / "EHRI-DR-19421116-US_05.txt").read_text(encoding="utf-8")
    de = (gt / "ehri_de" / "EHRI-BF-19381105_DE_02.txt").read_text(encoding="utf-8")
    run = write_run(tmp_path / "run", [rec(en, "en", 1), rec(garble(en), "en", 2), rec(de, "de", 1),
                                       rec(de + " Дом Дом Дом Дом Дом Дом Дом Дом Дом Дом Дом Дом Дом Дом Дом Дом Дом",
                                           "de", 2)])
    res = cli("suspicious", str(run), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["pages"] == 4 and data["suspicious"] == 2
    assert [(p["doc_id"], p["page"]) for p in data["suspicious_pages"]] == [("en", 2), ("de", 2)]
    assert data["languages"] == {"de": 2, "en": 2}
    res = cli("suspicious", str(run), "--max-suspicious", "1")
    assert res.returncode == 4 and "Suspicious: 2 of 4 pages" in res.stdout
    res = cli("evaluate", str(run), "--no-truth")
    assert res.returncode == 0 and "Suspicious: 2 of 4 pages" in res.stdout and "en" in res.stdout


@pytest.mark.tesseract
def test_greek_page_read_as_english_is_suspicious(gt, tmp_path):
    if shutil.which("tesseract") is None:
        from support.components import need

        need(False, "tesseract binary", "tesseract-ocr")
    pages = [gt / "zonaras" / "zonaras_0054.png", gt / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"]
    res = run_cli("run", *map(str, pages), "--out", str(tmp_path / "run"), "--engine", "tesseract", "--lang", "eng",
                  "--workers", "2", "--longest-side", "1400")
    # The run itself already flags it: its quality signal fails the rule (exit 2, review).
    assert res.returncode == 2, res.stderr
    data = json.loads(cli("suspicious", str(tmp_path / "run"), "--json", "--all").stdout)
    by_doc = {p["doc_id"]: p for p in data["pages"]}
    assert by_doc["zonaras_0054"]["status"] == "suspect" and by_doc["EHRI-BF-19380509b_EN_02"]["status"] == "ok"
    assert by_doc["zonaras_0054"]["signal"]["score"] < by_doc["zonaras_0054"]["signal"]["threshold"]
    # the model says eng: the Greek page, read with the English model, has few English words
    assert by_doc["zonaras_0054"]["language"] == "en" and by_doc["zonaras_0054"]["language_from"] == "model"
    assert by_doc["zonaras_0054"]["suspicious"] and by_doc["zonaras_0054"]["known_share"] < 0.5
    assert not by_doc["EHRI-BF-19380509b_EN_02"]["suspicious"]
    assert by_doc["EHRI-BF-19380509b_EN_02"]["known_share"] > 0.9


def test_suspicious_follows_the_runs_signal_rule(gt, tmp_path):
    """A page the run's quality signal called suspect (here: most lines the engine was unsure
    of, while its words are dictionary words) is suspicious too — one rule for the run, the
    report and `suspicious`; the signal is measured again on a cleaned layer."""
    from vlmocr.text.signal import judge

    en = (gt / "ehri_en" / "EHRI-DR-19421116-US_05.txt").read_text(encoding="utf-8")
    lines = [line for line in en.splitlines() if line.strip()]
    shaky, _ = judge(en, "tesseract", lang="eng", confidence=0.6, line_confidences=[0.3] * len(lines))
    sure, _ = judge(en, "tesseract", lang="eng", confidence=0.95, line_confidences=[0.95] * len(lines))
    assert shaky["score"] < shaky["threshold"] <= sure["score"]
    run = write_run(tmp_path / "run", [rec(en, "a", 1, status="suspect", quality=shaky),
                                       rec(en, "b", 1, quality=sure)])
    data = json.loads(cli("suspicious", str(run), "--json").stdout)
    assert [(p["doc_id"], p["page"]) for p in data["suspicious_pages"]] == [("a", 1)]
    page = data["suspicious_pages"][0]
    assert page["known_share"] > 0.9 and any(r.startswith("signal ") for r in page["reasons"])
    assert page["signal"]["score"] == shaky["score"]
    # the cleaned layer: measured again (no line scores are kept, the engine confidence is)
    data = json.loads(cli("suspicious", str(run), "--clean", "--json", "--all").stdout)
    by_doc = {p["doc_id"]: p for p in data["pages"]}
    assert by_doc["a"]["signal"]["confidence"] == 0.6 and by_doc["b"]["signal"]["confidence"] == 0.95
