"""A Tesseract reading that fails its signal is read once more binarised by Sauvola (Tesseract's
`thresholding_method=2`: a threshold for each part of the page) instead of Otsu's one for the
whole page, and kept only when its signal is the better: faint carbon copies and stained paper
are what one threshold loses (BENCHMARKS.md, "Local thresholds"). The top half of a Czech carbon
copy of ../shared/gt (tests/data/gt), real Tesseract."""

from __future__ import annotations

import shutil

from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.reading.judging import bilevel

CARBON = GT / "ehri_cs" / "EHRI-BF-19380314-CZ_03_top.jpg"


def test_a_carbon_copy_tesseract_fails_is_read_again_with_local_thresholds(tmp_path):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    res = run_cli("run", str(CARBON), "--out", str(tmp_path / "run"), "--engine", "tesseract", "--lang", "ces",
                  "--workers", "1")
    assert res.returncode == 0, res.stderr
    (rec,) = finals(tmp_path / "run").values()
    # Otsu's reading failed its signal; Sauvola's passes it, and is the page's.
    assert rec["status"] == "ok" and "local_thresholds" in rec["flags"], rec["flags"]
    (otsu,) = [a for a in rec["quality"]["alternatives"] if a.get("thresholds") == "otsu"]
    assert otsu["engine"] == "tesseract" and otsu["status"] == "suspect"
    assert otsu["score"] < rec["quality"]["score"]
    assert rec["engine"] == "tesseract" and rec["positions"]["source"] == "tesseract" and rec["positions"]["lines"]


def test_a_carbon_copy_upside_down_is_turned_then_read_with_local_thresholds(tmp_path):
    # The second reading reads the page as turned, not the file as it lies (the engine may read a
    # page's file itself only while it is the file's pixels).
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    with Image.open(CARBON) as im:
        im.transpose(Image.Transpose.ROTATE_180).save(tmp_path / "down.png")
    res = run_cli("run", str(tmp_path / "down.png"), "--out", str(tmp_path / "run"), "--engine", "tesseract",
                  "--lang", "ces", "--workers", "1")
    assert res.returncode == 0, res.stderr
    (rec,) = finals(tmp_path / "run").values()
    assert (rec["status"], rec["rotation"]) == ("ok", 180) and "local_thresholds" in rec["flags"], rec["flags"]


def test_a_page_read_well_or_black_and_white_already_is_not_read_again():
    with Image.open(CARBON) as im:
        assert not bilevel(im.convert("L"))
        assert bilevel(im.convert("1")) and bilevel(im.convert("1").convert("L"))
    with Image.open(GT / "zonaras" / "zonaras_0054.png") as im:  # a bitonal scan as shipped
        assert bilevel(im.convert("L"))
