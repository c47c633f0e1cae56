"""Triage's `lang` column and the quality signal's page language come from one guesser: on the
same real text (the transcriptions in tests/data/gt, set in a PDF's text layer) they name the
same language, and it is the one the ground truth states."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from support.components import REPO, need
from vlmocr.corpus.triage import TriageOptions, triage_document
from vlmocr.languages import canonical_name
from vlmocr.text.signal import page_language

GT = REPO / "tests" / "data" / "gt"
# A font with Latin, Czech and polytonic Greek letters, so the text layer holds the truth as is.
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
# One page of each language the ground truth has: German (typescript and Fraktur), French, Czech,
# Danish, English, polytonic Greek.
PAGES = ["ehri_de/EHRI-BF-19381105_DE_02", "goethe/goethe_0014", "tapus/tapus_bljd_DSN113_00027",
         "ehri_cs/EHRI-ET-JMP001_03", "ehri_da/EHRI-DR-19410127-DK_04", "ehri_en/EHRI-DR-19390519-US_03",
         "zonaras/zonaras_0054"]


def stated_language(name: str) -> str:
    with (GT / "pages.csv").open(encoding="utf-8", newline="") as fh:
        return next(r["language"] for r in csv.DictReader(fh) if r["name"] == name)


def text_pdf(path: Path, lines: list[str]) -> Path:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("DejaVuSans", str(FONT)))
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    y = 800
    for line in lines:
        if y < 40:
            c.showPage()
            y = 800
        c.setFont("DejaVuSans", 8)
        c.drawString(30, y, line)
        y -= 11
    c.save()
    return path


@pytest.mark.parametrize("page", PAGES)
def test_triage_lang_is_the_signals_page_language(page, tmp_path):
    need(FONT.exists(), "DejaVuSans.ttf", "fonts-dejavu-core")
    truth = (GT / f"{page}.txt").read_text(encoding="utf-8")
    pdf = text_pdf(tmp_path / "page.pdf", [line for line in truth.splitlines() if line.strip()])
    row = triage_document("page", str(pdf), TriageOptions())
    assert row["status"] == "ok" and row["text_pages"] >= 1, row
    signal_lang = page_language(truth)
    assert signal_lang, page
    assert row["lang"] == canonical_name(signal_lang) == stated_language(Path(page).name)
    assert row["suggest_lang"] == row["lang"]  # the language's own data reads its script


def test_greek_the_guesser_cannot_name_is_told_by_its_letters(tmp_path):
    """Too few stopwords to guess a language: monotonic letters suggest ell, polytonic grc."""
    need(FONT.exists(), "DejaVuSans.ttf", "fonts-dejavu-core")
    words = {"mono": "Ελλάδα Ευρώπη πρωτεύουσα Αθήνα ιστορία θάλασσα νησιά βουνά",
             "poly": "Ῥωμαίων βασιλεὺς στρατιῶται νίκην ἔργα ἡμέρᾳ πόλεμον ἄρχοντες"}
    got = {}
    for name, line in words.items():
        pdf = text_pdf(tmp_path / f"{name}.pdf", [line] * 6)
        row = triage_document(name, str(pdf), TriageOptions())
        assert (row["script"], row["lang"]) == ("Grek", "und"), row
        got[name] = row["suggest_lang"]
    assert got == {"mono": "ell", "poly": "grc"}
