"""A real Tesseract run over the two typewritten pages of tests/data/gt with images, shared by the
score and compare tests."""

from __future__ import annotations

import shutil

import pytest

from support.cli import run_cli
from support.components import GT, need

GT_PAGES = ["ehri_en/EHRI-DR-19390519-US_03.jpg", "ehri_en/EHRI-BF-19380509b_EN_02.jpg"]


@pytest.fixture(scope="package")
def real_run(tmp_path_factory):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    run = tmp_path_factory.mktemp("real") / "run"
    res = run_cli("run", *[str(GT / p) for p in GT_PAGES], "--out", str(run), "--engine", "tesseract",
                  "--lang", "eng", "--workers", "2")
    assert res.returncode == 0, res.stderr
    return run
