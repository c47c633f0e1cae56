"""Issue 46, point 4: a page far longer than it is wide. A 95:1 strip (inside the 1:100 aspect cap)
was shrunk by RapidOCR until its long side fit 2000 px, its letters ~6 px high, and its gibberish
passed as `ok`. Now such a page is read in pieces stacked one under the other (engines/rapidocr.py,
`strip_stacked`), nothing shrunk, each word back where it lies; and a reading made from lines the
engine saw too small to read is never `ok` (the flag `small_letters:H`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from support.cli import run_cli
from support.records import finals
from vlmocr.engines import rapidocr
from vlmocr.engines.base import PageInput
from vlmocr.evaluation.score import cer
from vlmocr.reading.worker import read_judged
from vlmocr.runfolder.record import Status

SENTENCE = ("In the year of the great flood the river rose over the old mill and the village council met in the "
            "chapel to decide what should be done with the harvest that had been stored in the barns near the water. "
            "Two ferrymen rowed the schoolmaster across at dawn; his ledger, wrapped in oilcloth, stayed dry. "
            "By March the printer had set a notice asking every household to report its losses to the clerk, "
            "who kept them in a green box beside the stove until the commission arrived from the capital.")


def strip(length: int = 9500, height: int = 100, size: int = 30) -> tuple[Image.Image, str]:
    """One long line of print, `length` × `height` px: (the image, its text)."""
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", size)
    measure = ImageDraw.Draw(Image.new("L", (1, 1)))
    words = SENTENCE
    text = ""
    for word in words.split():
        if measure.textlength(f"{text} {word}", font=font) + 80 > length:
            break
        text = f"{text} {word}".strip()
    im = Image.new("L", (length, height), 255)
    ImageDraw.Draw(im).text((40, (height - size) // 2), text, font=font, fill=0)
    return im, text


@pytest.fixture(scope="module")
def engine():
    return rapidocr.RapidOcrEngine()


def test_a_95_to_1_strip_is_read_at_its_own_size(engine):
    im, text = strip()
    assert im.size[0] / im.size[1] == 95
    reading = engine.read(PageInput("strip", 1, im, "", 300.0, [], None))
    assert cer(reading.text, text) < 0.01, reading.text
    assert not any(f.startswith("small_letters") for f in reading.flags)
    words = reading.positions.words()
    assert len(words) == len(text.split())
    # Every word back where it lies on the page: left to right along the whole strip, on its line.
    ink = np.nonzero((np.asarray(im) < 128).any(axis=0))[0]  # the columns holding print
    assert [w[0] for w in words] == sorted(w[0] for w in words) and abs(words[-1][2] - ink[-1]) < 20
    assert all(0 <= w[1] < w[3] <= im.size[1] for w in words)


def test_a_strip_standing_up_is_cut_along_its_height(engine):
    # Words one under the other down a tall, narrow page (a spine, a list): read as they lie.
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 28)
    words = SENTENCE.split()[:80]
    im = Image.new("L", (220, 60 * len(words) + 40), 255)
    draw = ImageDraw.Draw(im)
    for i, word in enumerate(words):
        draw.text((20, 20 + 60 * i), word, font=font, fill=0)
    assert im.size[1] / im.size[0] > 16
    stacked, back = rapidocr.strip_stacked(im)
    assert back is not None and stacked.size[1] <= 2000
    reading = engine.read(PageInput("spine", 1, im, "", 300.0, [], None))
    assert cer(reading.text.replace("\n", " "), " ".join(words)) < 0.02, reading.text


def test_a_reading_from_lines_too_small_to_read_is_never_ok(monkeypatch):
    # The strip read whole, as before (RapidOCR shrinks it to 2000 px long): the lines it saw were
    # a few pixels high; whatever the recogniser's confidence, the page goes to review.
    monkeypatch.setattr(rapidocr, "STRIP_ASPECT", 10_000)
    im, _ = strip()
    judged = read_judged("rapidocr", PageInput("strip", 1, im, "", 300.0, [], None), False, None)
    assert any(f.startswith("small_letters:") for f in judged.reading.flags), judged.reading.flags
    assert judged.status is not Status.ok


def test_run_reads_a_strip_ok(tmp_path: Path):
    im, text = strip()
    (tmp_path / "in").mkdir()
    im.save(tmp_path / "in" / "strip.png")
    res = run_cli("run", str(tmp_path / "in"), "--out", str(tmp_path / "r"), "--engine", "rapidocr", "--workers", "1")
    assert res.returncode == 0, res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["status"] == "ok" and cer(rec["text"], text) < 0.01, rec["text"]
