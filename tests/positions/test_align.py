"""Issue 29 point 2: a VLM's plain answer gets word positions by aligning its words to a CPU
reading of the same page. A real Tesseract reading of a real typewritten page (tests/data/gt);
as the VLM's answer, the page's human transcription (other line breaks, the CPU's misreadings
corrected), dressed in Markdown as VLMs answer; and, for contrast, fluent text that is not on the
page at all."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from support.components import GT, need
from vlmocr.engines.base import PageInput
from vlmocr.positions.align import align, word_key

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"
TRUTH = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
INVENTED = ("The art of war is of vital importance to the State. It is a matter of life and death, a road either "
            "to safety or to ruin. Hence it is a subject of inquiry which can on no account be neglected. ") * 3


@pytest.fixture(scope="module")
def reading():
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    from vlmocr.engines.tesseract import TesseractEngine

    with Image.open(PAGE) as im:
        page = im.convert("L")
    pos = TesseractEngine("eng").read(PageInput("d", 1, page, "", 300.0, [], None)).positions
    assert pos is not None
    return page, pos


def test_the_vlms_words_take_the_cpu_words_boxes_and_hold_ink(reading):
    page, cpu = reading
    answer = "# Report\n\n" + TRUTH.replace("Committee", "**Committee**") + "\n\n| --- |"
    pos = align(answer, cpu)
    assert pos is not None and pos.source == "aligned:tesseract" and (pos.width, pos.height) == (cpu.width, cpu.height)
    words = pos.words()
    # Every word of the answer is placed, in the answer's order; markup alone is no word.
    assert [w[5] for w in words] == [t for t in answer.split() if word_key(t)]
    assert pos.aligned is not None and pos.aligned >= 0.9, pos.aligned
    cpu_boxes = {w[:4] for w in cpu.words()}
    assert sum(1 for w in words if w[:4] in cpu_boxes) >= 0.9 * len(words)
    scan = np.asarray(page)
    long = [w for w in words if len(word_key(w[5])) >= 3]
    inked = [w for w in long if (scan[w[1]:w[3], w[0]:w[2]] < 128).mean() > 0.03]
    assert len(inked) >= 0.95 * len(long)
    # Each line's box holds its words; a line is one CPU line's run of words.
    for line in pos.lines:
        x0, y0, x1, y1 = line.box
        assert all(x0 <= w[0] and y0 <= w[1] and w[2] <= x1 and w[3] <= y1 for w in line.words)


def test_a_word_the_cpu_missed_is_placed_in_its_gap_between_its_neighbours(reading):
    _, cpu = reading
    line = cpu.lines[1]  # "facts approached these families and …"
    missed = line.words[3]
    lost = line.model_copy(update={"words": [w for w in line.words if w is not missed]})
    partial = cpu.model_copy(update={"lines": [cpu.lines[0], lost, *cpu.lines[2:]]})
    answer = " ".join(w[5] for w in line.words)  # the VLM read the word the CPU did not
    placed = next(w for w in align(answer, partial).words() if w[5] == missed[5])
    before, after = line.words[2], line.words[4]
    assert before[2] <= placed[0] and placed[2] <= after[0]
    assert line.box[1] <= placed[1] and placed[3] <= line.box[3]
    # It lies over the word's ink: most of the true box is covered.
    overlap = max(0, min(placed[2], missed[2]) - max(placed[0], missed[0]))
    assert overlap >= 0.7 * (missed[2] - missed[0])
    # A word with no room beside it (the CPU read it into its neighbour) shares the neighbour's box.
    words = [w[5] for w in line.words]
    squeezed = next(w for w in align(" ".join([*words[:3], "extraordinary", *words[3:]]), cpu).words()
                    if w[5] == "extraordinary")
    assert squeezed[:4] == line.words[2][:4]


def test_text_that_is_not_on_the_page_barely_aligns(reading):
    _, cpu = reading
    pos = align(INVENTED, cpu)
    assert pos is None or (pos.aligned or 0) < 0.15, pos and pos.aligned
    assert align("", cpu) is None
