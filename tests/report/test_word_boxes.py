"""Issue 29: the report's review page draws the words' boxes over the scan, so a reviewer sees at
a glance whether the positions are right. A real Tesseract reading of a real page, the report
built by the CLI, opened in headless Chromium: one box a word, each where the record says on the
page's thumbnail, and a switch that hides them."""

from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.runfolder.record import Row

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"


def test_the_review_page_draws_each_word_box_where_the_record_says(tmp_path: Path, page) -> None:
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = tmp_path / "in"
    scans.mkdir()
    with Image.open(PAGE) as im:
        im.convert("L").save(scans / "letter.png")
    run = tmp_path / "run"
    assert run_cli("run", str(scans), "--out", str(run), "--engine", "tesseract", "--workers", "1").returncode == 0
    pos = Row.of(finals(run)[("letter", 1)]).word_positions()
    assert pos is not None
    truth = tmp_path / "truth.csv"  # truth that differs puts the page on the review list, with its scan
    truth.write_text("doc_id,page,text\nletter,1,Something else entirely\n", encoding="utf-8")
    out = tmp_path / "report"
    assert run_cli("report", str(run), "--out", str(out), "--truth", str(truth)).returncode == 0
    page.goto((out / "review.html").as_uri() + "#q=all&n=0")
    page.wait_for("!!document.getElementById('word-boxes') && document.getElementById('page-img').complete")
    words = pos.words()
    assert page.eval("document.querySelectorAll('#word-boxes rect.wbox').length") == len(words)
    # Where each box is drawn, as a share of the image drawn: where the record says (to a pixel or two).
    drawn = page.eval("""(() => {
        const img = document.getElementById('page-img').getBoundingClientRect();
        return [...document.querySelectorAll('#word-boxes rect.wbox')].map(r => {
            const b = r.getBoundingClientRect();
            return [(b.left - img.left) / img.width, (b.top - img.top) / img.height,
                    (b.right - img.left) / img.width, (b.bottom - img.top) / img.height];
        });
    })()""")
    for (x0, y0, x1, y1, _, _), d in zip(words, drawn):
        want = (x0 / pos.width, y0 / pos.height, x1 / pos.width, y1 / pos.height)
        assert all(abs(a - b) < 0.01 for a, b in zip(want, d)), (want, d)
    assert "tesseract" in page.eval("document.getElementById('boxes-toggle').textContent")
    page.eval("document.getElementById('show-boxes').click()")
    assert page.eval("getComputedStyle(document.getElementById('word-boxes')).display") == "none"
