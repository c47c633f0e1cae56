"""Issue 33, point 1: a page scanned on its side or upside down was read as it lay — CER above 80 %
where the same page upright reads at a few per cent — and every such page went to review. A CPU
reading that fails its signal now asks Tesseract's OSD how the page lies (upright pages that read
well pay nothing), reads it again turned, keeps the better reading, and the record says what was
done. A real typewritten page (tests/data/gt; its upper half: RapidOCR on one core reads a line a
second, and the claim is the same on twenty lines as on forty), real RapidOCR and real OSD."""

from __future__ import annotations

import shutil

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need_tesseract_osd
from support.documents import save_turned
from support.records import finals
from vlmocr.evaluation.score import cer
from vlmocr.positions.align import shared_words

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"
TURNED = {"upright": None, "quarter": Image.Transpose.ROTATE_90, "upside_down": Image.Transpose.ROTATE_180,
          "quarter_back": Image.Transpose.ROTATE_270}


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    need_tesseract_osd()
    folder = tmp_path_factory.mktemp("turned")
    with Image.open(PAGE) as im:
        page = im.convert("L")
    w, h = page.size
    half = page.crop((0, 0, w, h // 2))  # the upper half: 20 of its 40 lines
    half.save(folder / "half.png")
    save_turned(folder / "half.png", folder, TURNED)
    (folder / "half.png").unlink()
    # Blank paper with a little dust: nothing to turn.
    Image.new("L", half.size, 238).save(folder / "blank.png")
    # Mixed: a portrait page, a dozen lines across its top and below them a block set sideways (a
    # landscape table on a portrait page): read as it lies, not turned.
    mixed = page.copy()
    block = page.crop((0, int(h * 0.3), w, int(h * 0.3) + w // 2)).transpose(Image.Transpose.ROTATE_90)
    mixed.paste(Image.new("L", (w, h - int(h * 0.32)), 245), (0, int(h * 0.32)))
    mixed.paste(block.resize((min(block.width, w - 40), min(block.height, h - int(h * 0.62) - 20))),
                (20, int(h * 0.62) + 10))
    mixed.save(folder / "mixed.png")
    return folder


def test_pages_on_their_side_or_upside_down_are_read_turned(scans, tmp_path):
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")  # of the whole page
    run = tmp_path / "auto"
    res = run_cli("run", str(scans), "--out", str(run), "--workers", "1", "--engine", "rapidocr")
    assert res.returncode == 0, res.stderr
    recs = {doc: rec for (doc, _), rec in finals(run).items()}
    upright = recs["upright"]
    assert "rotation" not in upright and not any(f.startswith("rotated:") for f in upright["flags"])
    # Upright, the half page reads well: its words are the truth's.
    assert upright["status"] == "ok" and len(upright["text"].split()) > 150
    assert shared_words(upright["text"], truth)[0] > 0.9
    # ROTATE_90 turned the scan a quarter counter-clockwise: 270 more make it upright; each
    # turned page reads as the page upright does.
    for doc, turn in (("quarter", 270), ("upside_down", 180), ("quarter_back", 90)):
        rec = recs[doc]
        assert (rec["rotation"], rec["rotation_from"]) == (turn, "osd"), rec["flags"]
        assert f"rotated:{turn}" in rec["flags"] and rec["status"] == "ok"
        assert cer(rec["text"], upright["text"]) < 0.02, (doc, cer(rec["text"], upright["text"]))
        assert (rec["width"] > rec["height"]) == (upright["width"] > upright["height"])  # read upright
    # No turn invented: blank paper, and a portrait page with a block set sideways in it.
    blank = recs["blank"]
    assert not blank["text"].strip() and "rotation" not in blank and "skew" not in blank
    mixed = recs["mixed"]
    assert "rotation" not in mixed and not any(f.startswith("rotated:") for f in mixed["flags"]), mixed["flags"]
    assert mixed["width"] < mixed["height"]

    # Off: the page is read as it lies — garbage, flagged for review (what the check saves). One
    # page only: RapidOCR on one core reads a page in seconds.
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(scans / "quarter.png", lone)
    off = tmp_path / "off"
    res = run_cli("run", str(lone), "--out", str(off), "--workers", "1", "--engine", "rapidocr",
                  "--rotate-pages", "off")
    assert res.returncode == 2, res.stderr
    (lying,) = finals(off).values()
    assert lying["status"] == "suspect" and cer(lying["text"], upright["text"]) > 0.5
    assert "rotation" not in lying and not any(f.startswith("rotated:") for f in lying["flags"])


def test_always_turns_each_page_by_osd_before_it_is_read(scans, tmp_path):
    # `--rotate-pages always`: OSD before every page, the turn made before the first reading
    # (rotation_from osd); blank paper and the portrait page with a sideways block stay as they are.
    run = tmp_path / "always"
    res = run_cli("run", str(scans), "--out", str(run), "--workers", "1", "--engine", "tesseract",
                  "--rotate-pages", "always")
    recs = {doc: rec for (doc, _), rec in finals(run).items()}
    # Tesseract reads the sideways block as garbage: that page, and only it, is for review.
    assert res.returncode == 2 and [d for d, r in recs.items() if r["status"] != "ok"] == ["mixed"], res.stderr
    upright = recs["upright"]["text"]
    assert "rotation" not in recs["upright"] and len(upright.split()) > 150
    for doc, turn in (("quarter", 270), ("upside_down", 180), ("quarter_back", 90)):
        rec = recs[doc]
        assert (rec["rotation"], rec["rotation_from"], rec["status"]) == (turn, "osd", "ok"), rec["flags"]
        assert cer(rec["text"], upright) < 0.02, (doc, cer(rec["text"], upright))
    for doc in ("blank", "mixed"):
        assert "rotation" not in recs[doc] and not any(f.startswith("rotated:") for f in recs[doc]["flags"])


def test_a_page_is_on_its_side_when_osd_and_its_ink_both_say_so():
    """`on_its_side`: OSD sure of a quarter turn and the ink's lines running down the page. Then the
    page's turned reading is kept even when the signal scores it no higher than Tesseract's reading
    of the page as it lay (words whose order it loses: BENCHMARKS.md, "Local thresholds")."""
    from vlmocr.reading.orientation import on_its_side, turn_to_upright

    need_tesseract_osd()
    with Image.open(GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg") as im:
        page = im.convert("L")
    for how in (Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_270, Image.Transpose.ROTATE_180, None):
        img = page.transpose(how) if how is not None else page
        up = turn_to_upright(img)
        assert on_its_side(up, img) == (how in (Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_270)), (how, up)
    blank = Image.new("L", (800, 1000), 250)
    assert not on_its_side(turn_to_upright(blank), blank)  # OSD never sure of blank paper
