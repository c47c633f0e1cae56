"""Issue 30, point 3: `plan --pilot RUN` turns a pilot run's tiers into the whole corpus's core-hours
and GPU-hours, and with prices into a cost per 1,000 pages per tier. The pilot is a real run of the
cascade with a VLM tier (real Tesseract, a real HTTP server) over three scans, the corpus a real
triage of a folder of them."""

from __future__ import annotations

import json
import shutil

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.documents import save_tier_scans
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

NO_KEY = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}


def test_a_pilot_gives_each_tier_its_share_hours_and_cost(tmp_path):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = save_tier_scans(GT, tmp_path / "pilot")
    pilot = tmp_path / "run"
    truth = (GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.txt").read_text(encoding="utf-8")
    with serve_in_process(ServerConfig(answer="static", static_text=truth)) as srv:
        res = run_cli("run", str(scans), "--out", str(pilot), "--engine", "tesseract", "--lang", "eng", "--vlm-tier",
                      "--endpoint", srv.url, "--workers", "1", env=NO_KEY)
    assert res.returncode == 0, res.stderr
    # The corpus: 30 scans (one dot apart: triage sets exact duplicates aside) of which the
    # pilot's three are a sample.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(10):
        for f in scans.iterdir():
            with Image.open(f) as im:
                page = im.convert("L")
            page.putpixel((i, 0), 0)
            page.save(corpus / f"{i}-{f.stem}.png")
    triage = tmp_path / "t.csv"
    res = run_cli("triage", str(corpus), "--out", str(triage))
    assert res.returncode == 0, res.stderr

    res = run_cli("plan", "--triage", str(triage), "--pilot", str(pilot), "--pages-per-hour", "600",
                  "--cpu-price", "0.04", "--gpu-price", "2.5", "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["pilot_pages"] == 3 and plan["corpus_ocr_pages"] == 30
    first, vlm = plan["tiers"]
    assert (first["engines"], first["gpu"], first["reached"], first["share"]) == (["tesseract"], False, 3, 1.0)
    assert first["went_on"] == {"suspect": 1}
    assert (vlm["engines"], vlm["gpu"], vlm["reached"], vlm["corpus_pages"]) == (["openai"], True, 1, 10)
    assert vlm["hours"] == pytest.approx(10 / 600, abs=0.01)
    assert vlm["cost_per_1000"] == pytest.approx(10 / 600 * 2.5 / 30 * 1000, rel=0.01)  # 1.39 per 1,000 pages
    # Core-hours: the pilot's Tesseract seconds a page, times the corpus's 30 pages.
    assert first["hours"] == pytest.approx(30 * first["seconds_per_page"] / 3600, abs=0.01)
    assert first["cost_per_1000"] == pytest.approx(first["seconds_per_page"] / 3600 * 0.04 * 1000, rel=0.01)

    text = run_cli("plan", "--triage", str(triage), "--pilot", str(pilot))
    assert text.returncode == 0, text.stderr
    assert "GPU-hours need the VLM's pages per hour" in text.stdout and "1 suspect" in text.stdout
    bad = run_cli("plan", "--triage", str(triage), "--cpu-price", "1", "--pages-per-hour", "100")
    assert bad.returncode == 3 and "--pilot" in bad.stderr
