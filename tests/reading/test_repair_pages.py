"""A page whose reading fails its signal is repaired by what its image says is wrong and read
again, the better reading kept (reading/worker.py, inputs/repair.py); a page that reads well is
never touched. Real pages (tests/data/gt) degraded as benchmarks/bench_degraded.py degrades them,
real RapidOCR and Tesseract through `vlmocr run`."""

from __future__ import annotations

import shutil

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.evaluation.score import cer
from vlmocr.testing.degraded import degrade

PAGE = GT / "ehri_en" / "EHRI-DR-19390519-US_03.jpg"  # a 1940s typescript, English
VERSO = GT / "ehri_da" / "EHRI-DR-19431002-DK_01.jpg"


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    folder = tmp_path_factory.mktemp("degraded")
    with Image.open(PAGE) as im, Image.open(VERSO) as verso:
        page = im.convert("L")
        page.save(folder / "clean.png")
        degrade(page, "bleed", PAGE.stem, verso=verso).save(folder / "bleed.png")
        degrade(page, "noise", PAGE.stem).save(folder / "noise.png")
    return folder


def _read(folder, out, *args: str) -> dict[str, dict]:
    res = run_cli("run", str(folder), "--out", str(out), "--workers", "1", "--lang", "eng", *args)
    assert res.returncode in (0, 2), res.stderr
    return {doc: rec for (doc, _), rec in finals(out).items()}


def _flags(rec: dict, name: str) -> list[str]:
    return [f for f in rec.get("flags", []) if f.startswith(name + ":")]


def test_the_verso_bleeding_through_is_taken_out_and_the_repaired_reading_kept(scans, tmp_path):
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    pages = tmp_path / "pages"
    pages.mkdir()
    for name in ("clean", "bleed"):
        shutil.copy(scans / f"{name}.png", pages)
    recs = _read(pages, tmp_path / "auto")
    clean, bled = recs["clean"], recs["bleed"]
    # Read well: never measured, never repaired.
    assert clean["status"] == "ok" and "diagnosis" not in clean["quality"]
    assert not _flags(clean, "repaired") and not _flags(clean, "repair_not_kept")
    # The verso's strokes made the first reading fail; the repaired scan reads as the clean one.
    assert bled["status"] == "ok" and _flags(bled, "repaired") == ["repaired:layers"], bled["flags"]
    assert bled["quality"]["diagnosis"]["layers"] > 0.3
    first = [a for a in bled["quality"]["alternatives"] if a.get("image") == "as scanned"]
    assert len(first) == 1 and first[0]["status"] != "ok" and first[0]["score"] < bled["quality"]["score"]
    assert cer(bled["text"], truth) <= cer(clean["text"], truth) + 0.02, (cer(bled["text"], truth), cer(clean["text"], truth))

    # --repair off: the path without it, read as scanned — and another settings key.
    off = _read(pages, tmp_path / "off", "--repair", "off")
    assert off["clean"]["text"] == clean["text"] and off["clean"]["key"] != clean["key"]
    assert off["bleed"]["status"] != "ok" and not _flags(off["bleed"], "repaired")
    assert "diagnosis" not in off["bleed"]["quality"]
    assert cer(off["bleed"]["text"], truth) > cer(bled["text"], truth) + 0.2


def test_a_page_covered_in_specks_is_despeckled_before_it_is_read(scans, tmp_path):
    """Specks are measured on every scan (~10 ms); one covered in them is despeckled first: its
    reading as scanned can pass the signal with whole lines lost among the specks."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(scans / "noise.png", pages)
    shutil.copy(scans / "clean.png", pages)
    recs = _read(pages, tmp_path / "tess", "--engine", "tesseract")
    rec = recs["noise"]
    assert rec["status"] == "ok" and _flags(rec, "repaired") == ["repaired:despeckle"], rec["flags"]
    assert float(_flags(rec, "speckle")[0].split(":")[1]) >= 0.005
    assert cer(rec["text"], truth) < 0.05
    assert not _flags(recs["clean"], "speckle") and not _flags(recs["clean"], "repaired")
    # As scanned (--repair off) Tesseract loses a fifth of the page to the specks.
    off = _read(pages, tmp_path / "off", "--engine", "tesseract", "--repair", "off")["noise"]
    assert not _flags(off, "repaired") and cer(off["text"], truth) > cer(rec["text"], truth) + 0.1


def test_a_page_scanned_small_is_read_enlarged_with_its_word_boxes_on_the_page_as_scanned(tmp_path):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    pages = tmp_path / "pages"
    pages.mkdir()
    with Image.open(PAGE) as im:  # a quarter of its size: ~60 dpi, lines ~9 px tall
        small = im.convert("L").resize((im.width // 4, im.height // 4), Image.Resampling.LANCZOS)
    small.save(pages / "small.png")
    rec = _read(pages, tmp_path / "tess", "--engine", "tesseract")["small"]
    assert rec["status"] == "ok" and _flags(rec, "repaired") == ["repaired:enlarge"], rec["flags"]
    assert rec["quality"]["diagnosis"]["line_px"] < 20
    assert cer(rec["text"], truth) < 0.08
    # Read at twice the size, placed on the page as it is: the boxes lie within it, lines ~9 px.
    pos = rec["positions"]
    assert (pos["width"], pos["height"]) == (rec["width"], rec["height"]) == small.size
    boxes = [w[:4] for line in pos["lines"] for w in line["words"]]
    assert len(boxes) > 100 and all(x1 <= small.width and y1 <= small.height for _, _, x1, y1 in boxes)
    heights = sorted(line["box"][3] - line["box"][1] for line in pos["lines"])
    assert 5 <= heights[len(heights) // 2] < 20, heights
