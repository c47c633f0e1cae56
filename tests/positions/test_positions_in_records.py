"""Issue 29 point 1: every CPU reading keeps where its words lie — Tesseract's word boxes and
confidences, RapidOCR's word boxes — in the page record, in the pixels of the page as scanned
(with its size), mapped back when vlmocr turned the page before reading it (issue 33 point 4).
A real typewritten page (tests/data/gt), real engines, the real CLI."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need_tesseract_osd
from support.documents import save_turned
from support.records import finals
from vlmocr.evaluation.score import cer
from vlmocr.runfolder.record import Row

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    need_tesseract_osd()
    folder = tmp_path_factory.mktemp("scans")
    # The page's upper half (20 of its 40 lines): RapidOCR on one core reads a line a second here.
    with Image.open(PAGE) as im:
        im.convert("L").crop((0, 0, im.width, im.height // 2)).save(folder / "half.png")
    save_turned(folder / "half.png", folder, {"upright": None, "quarter": Image.Transpose.ROTATE_90})
    (folder / "half.png").unlink()
    return folder


def iou(a, b) -> float:
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0, x1 - x0) * max(0, y1 - y0)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


@pytest.mark.parametrize("engine", ["tesseract", "rapidocr"])
def test_word_boxes_lie_on_their_ink_on_the_page_as_scanned(scans, tmp_path, engine):
    run = tmp_path / engine
    res = run_cli("run", str(scans), "--out", str(run), "--workers", "1", "--engine", engine)
    assert res.returncode == 0, res.stderr
    rows = {doc: Row.of(rec) for (doc, _), rec in finals(run).items()}
    upright, quarter = rows["upright"].word_positions(), rows["quarter"].word_positions()
    assert upright is not None and quarter is not None and rows["quarter"].rotation == 270
    assert upright.source == quarter.source == engine
    for name, pos in (("upright", upright), ("quarter", quarter)):
        with Image.open(scans / f"{name}.png") as im:
            scan = np.asarray(im.convert("L"))
        # The page as scanned, not as read: the quarter-turned half page is portrait.
        assert (pos.width, pos.height) == (scan.shape[1], scan.shape[0])
        words = pos.words()
        joined = " ".join(w[5] for w in words)
        assert cer(joined, " ".join(rows[name].text.split())) < 0.03, joined[:200]
        assert len(words) > 150 and all(w[4] is not None and 0 <= w[4] <= 1 for w in words)
        inked = [w for w in words if len(w[5]) >= 3 and (scan[w[1]:w[3], w[0]:w[2]] < 128).mean() > 0.03]
        assert len(inked) >= 0.97 * sum(1 for w in words if len(w[5]) >= 3)
    # The same words in the same places: a quarter-turned scan maps (x, y) → (y, W − x).
    W = upright.width

    def turned(b):
        return (b[1], W - b[2], b[3], W - b[0])

    def unique(pos):
        seen: dict[str, list] = {}
        for w in pos.words():
            if re.fullmatch(r"[A-Za-z]{5,}", w[5]):
                seen.setdefault(w[5], []).append(w)
        return {t: ws[0] for t, ws in seen.items() if len(ws) == 1}

    a, b = unique(upright), unique(quarter)
    both = set(a) & set(b)
    assert len(both) > 30
    close = sum(1 for t in both if iou(turned(a[t][:4]), b[t][:4]) > 0.6)
    assert close >= 0.95 * len(both), (close, len(both))
