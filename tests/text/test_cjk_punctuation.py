"""Issue 47, point 4: RapidOCR wrote `。` for a full stop on Latin-script pages (a worn typewriter's
full stop prints as a small ring, which its recogniser, trained on Chinese print too, takes for the
ideographic full stop); `suspicious` counted 0 % implausible characters, `clean` kept them, and only
the PDF export's font warning showed them. Now the reading of a page in another script folds them
back (`cjk_punctuation_folded:N`), and they count as implausible on a Latin page."""

from __future__ import annotations

from PIL import Image, ImageDraw, ImageFont

from support.cli import run_cli
from support.records import finals
from vlmocr.text.cjk_punctuation import fold, is_cjk_punctuation
from vlmocr.text.textquality import implausible_chars

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LINES = [("The river rose over the old mill", "And the town"), ("The council met in the chapel", "Nobody came"),
         ("The water fell again", "Then it rained")]


def ringed_page() -> Image.Image:
    """Three lines of print of two sentences each, the first's full stop printed as a small ring."""
    font = ImageFont.truetype(FONT, 36)
    im = Image.new("L", (1400, 400), 255)
    draw = ImageDraw.Draw(im)
    for i, (first, second) in enumerate(LINES):
        y = 60 + 100 * i
        draw.text((40, y), first, font=font, fill=0)
        x = 44 + draw.textlength(first, font=font)
        draw.ellipse((x, y + 26, x + 10, y + 36), outline=0, width=3)
        draw.text((x + 30, y), second, font=font, fill=0)
    return im


def test_a_ringed_full_stop_read_as_the_ideographic_one_is_folded_back(tmp_path):
    (tmp_path / "in").mkdir()
    ringed_page().save(tmp_path / "in" / "page.png")
    res = run_cli("run", str(tmp_path / "in"), "--out", str(tmp_path / "r"), "--engine", "rapidocr", "--lang", "eng",
                  "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert not any(is_cjk_punctuation(c) for c in rec["text"]), rec["text"]
    assert any(f.startswith("cjk_punctuation_folded:") for f in rec["flags"]), rec["flags"]
    assert rec["text"].count(".") == 3
    words = [w[5] for line in rec["positions"]["lines"] for w in line["words"]]
    assert not any(is_cjk_punctuation(c) for w in words for c in w)


def test_cjk_punctuation_is_implausible_on_a_latin_page_and_folds():
    assert implausible_chars("Er kam nach Hause。 Dann，ging er", "deu") == ["。", "，"]
    assert implausible_chars("Er kam nach Hause. Dann, ging er", "deu") == []
    assert fold("mill。 and，then（x）！「y」") == ('mill. and,then(x)!"y"', 7)
    assert fold("plain ASCII.") == ("plain ASCII.", 0) and fold("Ελληνικά·") == ("Ελληνικά·", 0)


def test_the_pdf_exports_font_warning_names_the_document_and_page(tmp_path):
    # OCRmyPDF's and fpdf2's warnings named no document or page and pointed at a web download on
    # an offline machine: the export's note says which document, which page, which characters.
    import json

    from vlmocr.testing.openai_server import ServerConfig, serve_in_process
    from vlmocr.testing.pagecode import expected_text, make_coded_png

    (tmp_path / "in").mkdir()
    make_coded_png(tmp_path / "in" / "a.png", 1)
    make_coded_png(tmp_path / "in" / "b.png", 2)
    with serve_in_process(ServerConfig(answer="script", script={1: expected_text(1),
                                                                 2: expected_text(2) + " \U00013000"})) as srv:
        res = run_cli("run", str(tmp_path / "in"), "--out", str(tmp_path / "r"), "--endpoint", srv.url, "--model",
                      "test-model", "--profile", "generic", "--workers", "1",
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode in (0, 2), res.stderr
    res = run_cli("export", str(tmp_path / "r"), "--format", "pdf", "--out", str(tmp_path / "pdf"), "--json")
    assert res.returncode == 0, res.stderr
    notes = json.loads(res.stdout)["notes"]
    assert any(n.startswith("b.pdf: page(s) 1 hold characters no installed font draws ('\U00013000')") for n in notes)
    assert not any(n.startswith("a.pdf") for n in notes)
    assert "missing the following glyphs" not in res.stderr and "fonts.google.com" not in res.stderr
