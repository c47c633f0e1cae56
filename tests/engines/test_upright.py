"""OSD's second opinion (issue 33). Tesseract's OSD, sure of itself, takes small typewritten scans
for upside down: on the 60 typewritten pages of ../shared/gt, upright, it called 10 upside down at
confidence 2.5–12 (BENCHMARKS.md, "OSD's second opinion"), and `--rotate-pages always` — or a
VLM answer that failed its signal — turned them over. RapidOCR's 0/180 line classifier, asked of
pieces of the page's lines, overrules such a turn. A real Danish typescript (tests/data/gt, one
of the ten), real OSD, the classifier's model from the rapidocr wheel."""

from __future__ import annotations

import shutil

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr import languages
from vlmocr.engines.osd import osd_image
from vlmocr.engines.upright import line_pieces, lines_turn, upright_score
from vlmocr.reading.orientation import turn_to_upright

PAGE = GT / "ehri_da" / "EHRI-DR-19431002-DK_01.jpg"  # 697 × 1128, typewritten, upright


@pytest.fixture(scope="module")
def page():
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    need("osd" in languages.installed_languages(), "tesseract OSD data", "tesseract-ocr-osd")
    with Image.open(PAGE) as im:
        return im.convert("L")


def test_line_pieces_read_the_way_the_page_lies(page):
    pieces = line_pieces(page)
    assert len(pieces) == 12
    assert all(2.5 < c.width / c.height < 6 for c in pieces)  # about four line heights wide
    up, n = upright_score(page)
    down, _ = upright_score(page.transpose(Image.Transpose.ROTATE_180))
    assert n == 12 and up > 0.4 and down < -0.4, (up, down)
    # Blank paper: nothing to ask.
    assert upright_score(Image.new("L", page.size, 238)) == (0.0, 0)


def test_osd_wrongly_sure_is_overruled_and_right_turns_stand(page):
    # The world as it is: OSD (tesseract-ocr-osd) is sure this upright page lies upside down,
    # and sure the page upside down lies upright.
    assert (osd_image(page).turn, osd_image(page).turns) == (180, True)
    flipped = page.transpose(Image.Transpose.ROTATE_180)
    osd = osd_image(flipped)
    assert osd.turn == 0 and osd.turn_confidence >= 2, osd
    kept = turn_to_upright(page)
    assert kept.turn == 0 and kept.flag is not None and kept.flag.startswith("osd_overruled:180>0:")
    turned = turn_to_upright(flipped)
    assert turned.turn == 180 and turned.flag is not None and turned.flag.startswith("osd_overruled:0>180:")


def test_osd_unsure_of_a_page_on_its_side_the_lines_say_which_quarter(page):
    # On either side OSD is unsure of this page (confidence ~1, under 2): the ink says it lies on
    # its side, and the line classifier, asked of the page turned a quarter, says which way.
    for transpose, turn in ((Image.Transpose.ROTATE_90, 270), (Image.Transpose.ROTATE_270, 90)):
        side = page.transpose(transpose)
        assert not osd_image(side).sure
        assert lines_turn(side, sideways=True)[0] == turn
        got = turn_to_upright(side)
        assert (got.turn, got.how) == (turn, "lines"), got
        assert got.flag is not None and got.flag.startswith(f"lines_turned:{turn}:"), got
    # Upright, or blank paper: no quarter turn is invented (the ink does not say "on its side").
    assert turn_to_upright(page).turn == 0
    assert turn_to_upright(Image.new("L", page.size, 238)).turn == 0
    assert lines_turn(Image.new("L", page.size, 238), sideways=True) == (0, 0.0)


def test_osd_unsure_of_a_page_upside_down_the_lines_turn_it_over_and_a_strip_is_never_turned_wrong(page):
    # The upper half of the Danish typescript, upside down: OSD is unsure of it (under 2), its
    # lines read clearly upside down.
    half = page.crop((0, 0, page.width, int(page.height * 0.45))).transpose(Image.Transpose.ROTATE_180)
    assert not osd_image(half).sure
    got = turn_to_upright(half)
    assert (got.turn, got.how) == (180, "lines") and got.flag is not None and got.flag.startswith("lines_turned:180:")
    # A strip of four to six lines (wider than tall, so the ink may take it for a page on its
    # side): turned every way, it is turned back or left as it lies — never turned wrong.
    for frac in (0.15, 0.2, 0.3):
        strip = page.crop((0, 0, page.width, int(page.height * frac)))
        for how, back in ((None, 0), (Image.Transpose.ROTATE_90, 270), (Image.Transpose.ROTATE_180, 180),
                          (Image.Transpose.ROTATE_270, 90)):
            turned = strip.transpose(how) if how is not None else strip
            assert turn_to_upright(turned).turn in (0, back), (frac, how)


def test_always_leaves_the_upright_typescript_upright_and_says_why(page, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    page.save(folder / "upright.png")
    page.transpose(Image.Transpose.ROTATE_180).save(folder / "upside_down.png")
    run = tmp_path / "run"
    res = run_cli("run", str(folder), "--out", str(run), "--workers", "1", "--engine", "tesseract",
                  "--lang", "dan", "--rotate-pages", "always")
    assert res.returncode in (0, 2), res.stderr
    recs = {doc: rec for (doc, _), rec in finals(run).items()}
    upright = recs["upright"]
    assert "rotation" not in upright, upright["flags"]
    assert any(f.startswith("osd_overruled:180>0:") for f in upright["flags"]), upright["flags"]
    assert recs["upside_down"]["rotation"] == 180
    assert any(f.startswith("osd_overruled:0>180:") for f in recs["upside_down"]["flags"])
    assert recs["upside_down"]["text"][:200] == upright["text"][:200]
