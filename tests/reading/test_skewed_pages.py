"""Issue 33, point 2: a page scanned a few degrees askew is straightened before it is read — by the
CPU engines and before it is sent to a VLM — and the record says by how much (`skew`). Tesseract
needs it most: on the development pages askew by 8 degrees it read almost nothing (BENCHMARKS.md,
"Pages as scanned"). A real typewritten page (tests/data/gt), real Tesseract, a real HTTP server."""

from __future__ import annotations

import shutil

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.evaluation.score import cer
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"
DEGREES = 7.0
NO_KEY = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    folder = tmp_path_factory.mktemp("askew")
    with Image.open(PAGE) as im:
        page = im.convert("L")
        page.save(folder / "straight.png")
        # As a scanner leaves it: turned on a capture its own size, the corners the bed's colour.
        page.rotate(DEGREES, resample=Image.Resampling.BICUBIC, fillcolor=235).save(folder / "askew.png")
    return folder


def test_tesseract_reads_a_page_askew_as_well_as_straight(scans, tmp_path):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    run = tmp_path / "auto"
    res = run_cli("run", str(scans), "--out", str(run), "--workers", "1", "--engine", "tesseract", "--lang", "eng")
    assert res.returncode == 0, res.stderr
    recs = {doc: rec for (doc, _), rec in finals(run).items()}
    straight, askew = recs["straight"], recs["askew"]
    assert "skew" not in straight  # a straight page is read as it lies
    assert askew["skew"] == pytest.approx(DEGREES, abs=0.4) and askew["status"] == "ok"
    base = cer(straight["text"], truth)
    assert cer(askew["text"], truth) <= base + 0.02, (cer(askew["text"], truth), base)

    # Off: read as it lies — what straightening saves.
    off = tmp_path / "off"
    res = run_cli("run", str(scans), "--out", str(off), "--workers", "1", "--engine", "tesseract", "--lang", "eng",
                  "--deskew", "off")
    assert res.returncode in (0, 2), res.stderr
    lying = {doc: rec for (doc, _), rec in finals(off).items()}
    assert "skew" not in lying["askew"] and lying["straight"]["text"] == straight["text"]
    assert cer(lying["askew"]["text"], truth) > cer(askew["text"], truth) + 0.05
    # --deskew off is another reading of the folder's pages: its own settings key.
    assert lying["askew"]["key"] != askew["key"] and lying["straight"]["key"] != straight["key"]


def test_a_page_askew_is_sent_to_the_vlm_straightened_with_deskew_on(scans, tmp_path):
    """`--deskew on` straightens a page before a VLM is sent it; under `auto` (the default) a VLM is
    sent the page as it lies: measuring every page costs the client ~10 % of its feed rate."""
    with serve_in_process(ServerConfig(answer="static", static_text="A page of typewritten text.\n" * 5)) as srv:
        res = run_cli("run", str(scans), "--out", str(tmp_path / "auto"), "--endpoint", srv.url, "--workers", "1",
                      "--no-retry", env=NO_KEY)
        assert res.returncode in (0, 2), res.stderr
        assert all("skew" not in rec for rec in finals(tmp_path / "auto").values())
        res = run_cli("run", str(scans), "--out", str(tmp_path / "vlm"), "--endpoint", srv.url, "--workers", "1",
                      "--no-retry", "--deskew", "on", env=NO_KEY)
        asked = srv.requests()[2:]
    assert res.returncode in (0, 2), res.stderr
    recs = {doc: rec for (doc, _), rec in finals(tmp_path / "vlm").items()}
    assert recs["askew"]["skew"] == pytest.approx(DEGREES, abs=0.4) and "skew" not in recs["straight"]
    assert recs["askew"]["engine"] == "openai" and len(asked) == 2
    # The image sent is not the file's: it was turned back (same size, other pixels).
    with Image.open(scans / "askew.png") as im:
        assert (recs["askew"]["width"], recs["askew"]["height"]) == im.size
