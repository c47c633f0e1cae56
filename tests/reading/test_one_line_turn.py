"""Issue 46, point 5: `--rotate-pages always` turned an upright page of one line and kept the worse
reading — OSD unsure (confidence 0.0), the line classifier's word alone (its pieces of the line
turned a quarter scored clearer than the few it found across). One line never decides a turn now
(engines/upright.one_line), and a page turned before it was read is read as it lay too, the
better reading kept (the user guide's rule). The page: one typewritten line of a real Czech
letter (tests/data/gt) on a slip of paper."""

from __future__ import annotations

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need_tesseract_osd
from support.records import finals
from vlmocr.engines import upright
from vlmocr.evaluation.score import cer
from vlmocr.reading import orientation, worker
from vlmocr.reading.context import PageContext
from vlmocr.runfolder.record import PageTask, Sizing

PAGE = GT / "ehri_cs" / "EHRI-BF-19380314-CZ_03_top.jpg"
LINE = (188, 522, 574, 557)  # one line of the letter, as Tesseract finds it on the page


@pytest.fixture(scope="module")
def slip(tmp_path_factory):
    need_tesseract_osd()
    x0, y0, x1, y1 = LINE
    with Image.open(PAGE) as im:
        line = im.convert("L").crop((x0 - 6, y0 - 4, x1 + 6, y1 + 4))
    paper = Image.new("L", (line.width + 60, line.height + 60), 255)  # the line on a slip of paper
    paper.paste(line, (30, 30))
    folder = tmp_path_factory.mktemp("slip")
    (folder / "in").mkdir()
    paper.save(folder / "in" / "slip.png")
    return folder


def test_one_line_never_decides_a_turn(slip):
    with Image.open(slip / "in" / "slip.png") as im:
        paper = im.convert("L")
    assert upright.one_line(paper) and upright.one_line(paper.transpose(Image.Transpose.ROTATE_90))
    assert orientation.turn_to_upright(paper).turn == 0
    assert upright.lines_turn(paper, True) == (0, 0.0)


def test_rotate_pages_always_leaves_an_upright_line_upright(slip, tmp_path):
    res = run_cli("run", str(slip / "in"), "--out", str(tmp_path / "r"), "--rotate-pages", "always", "--workers", "1",
                  "--lang", "ces")
    assert res.returncode in (0, 2), res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec.get("rotation") is None and not any(f.startswith(("rotated:", "lines_turned:")) for f in rec["flags"])
    upright_text = rec["text"]
    # The same page read with no turn at all reads the same.
    res = run_cli("run", str(slip / "in"), "--out", str(tmp_path / "off"), "--rotate-pages", "off", "--workers", "1",
                  "--lang", "ces")
    (plain,) = finals(tmp_path / "off").values()
    assert cer(upright_text, plain["text"]) < 0.05, (upright_text, plain["text"])


def test_a_turn_made_before_reading_stays_only_if_its_reading_is_better(slip, monkeypatch):
    # The classifier's old word (the one-line guard off): the slip turned a quarter before it is
    # read. Its reading as it lay is the better one, and that is the one kept.
    monkeypatch.setattr(upright, "one_line", lambda image: False)
    path = slip / "in" / "slip.png"
    task = PageTask(doc_id="slip", source=str(path), path=str(path), page=1, doc_pages=1, key="k",
                    engine="rapidocr", reader="rapidocr", sizing=Sizing())
    rec = worker.read_page(task, PageContext(rotate_pages="always"))
    assert any(f.startswith("lines_turned:270:") for f in rec.flags), rec.flags  # turned, then read
    assert "turn_not_kept:270" in rec.flags and rec.rotation is None, rec.flags
    assert rec.width > rec.height  # the page as it lay
