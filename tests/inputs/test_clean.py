"""Issue 33, point 3: `run --clean` flattens the paper's shade, binarises (Sauvola) and removes
specks before a scan is read, and the page's flags say so. A real typewritten page (tests/data/gt)
aged as old paper ages: yellowed unevenly, the verso showing through, dust on the glass."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageOps

from support.cli import run_cli
from support.components import GT
from support.records import finals
from vlmocr.evaluation.score import cer
from vlmocr.inputs.clean import clean_page

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"


def aged(page: Image.Image) -> Image.Image:
    """Yellowed from left to right, the verso (the page mirrored) faint through it, dust."""
    a = np.asarray(page.convert("L")).astype(np.float32)
    h, w = a.shape
    shade = np.linspace(1.0, 0.72, w)[None, :]  # the paper darkens towards one edge
    verso = np.asarray(ImageOps.mirror(page.convert("L"))).astype(np.float32)
    through = 255 - 0.18 * (255 - verso)  # the verso's ink, faint
    out = np.minimum(a, through) * shade
    rng = np.random.default_rng(3)
    out[rng.random(a.shape) < 0.002] = 30  # dust: single dark pixels
    return Image.fromarray(np.clip(out, 0, 255).astype(np.uint8), mode="L")


@pytest.fixture(scope="module")
def page() -> Image.Image:
    with Image.open(PAGE) as im:
        return aged(im.convert("L"))


def test_cleaning_whitens_the_paper_and_keeps_the_ink(page):
    with Image.open(PAGE) as im:
        original = np.asarray(im.convert("L"))
    out, flags = clean_page(page)
    a = np.asarray(out)
    assert out.mode == "L" and out.size == page.size and set(np.unique(a)) <= {0, 255}
    assert flags[0] == "cleaned:flatten+sauvola" and any(f.startswith("specks_removed:") for f in flags)
    ink = original < 110  # the page's own letters
    paper = original > 200
    assert (a[ink] == 0).mean() > 0.85  # letters stay black
    # The shade, the show-through and the dust are gone from the paper: under 1 % of it is ink.
    assert (a[paper] == 0).mean() < 0.01, (a[paper] == 0).mean()
    before = np.asarray(page)
    assert (before[paper] < 200).mean() > 0.2  # they were there


def test_run_clean_reads_the_cleaned_scan_and_says_so(page, tmp_path):
    scans = tmp_path / "scans"
    scans.mkdir()
    page.save(scans / "aged.png")
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    res = run_cli("run", str(scans), "--out", str(tmp_path / "clean"), "--workers", "1", "--engine", "rapidocr",
                  "--clean")
    assert res.returncode in (0, 2), res.stderr
    rec = next(iter(finals(tmp_path / "clean").values()))
    assert "cleaned:flatten+sauvola" in rec["flags"], rec["flags"]
    assert cer(rec["text"], truth) < 0.1, cer(rec["text"], truth)
    res = run_cli("run", str(scans), "--out", str(tmp_path / "plain"), "--workers", "1", "--engine", "rapidocr")
    plain = next(iter(finals(tmp_path / "plain").values()))
    assert not any(f.startswith("cleaned:") for f in plain["flags"])
    assert plain["key"] != rec["key"]  # a cleaned reading is another reading: its own settings key
