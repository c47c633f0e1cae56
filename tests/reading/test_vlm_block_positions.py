"""Issue 29 point 1, grounded VLMs: a profile whose model answers with block boxes (DeepSeek-OCR's
`<|ref|>…<|det|>[[x0, y0, x1, y1]]<|/det|>`, thousandths of the image sent) gives its pages
positions from them — exact to the block, each block's lines laid down its box and their words
across each line — without a CPU reading. A real HTTP server answering in DeepSeek-OCR's grounded
format, and in LightOnOCR-3's (`![text](x0,y0,x1,y1)` before each block, 0-1000), with the blocks
where a real page (tests/data/gt) holds them."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.engines.base import PageInput
from vlmocr.runfolder.record import Row
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"


# profile → (the scale of its boxes, one block as the model writes it)
FORMATS = {
    "deepseek-ocr": (999, "<|ref|>text<|/ref|><|det|>[{box}]<|/det|>\n{text}"),
    "lightonocr-3": (1000, "![text]({x0},{y0},{x1},{y1}) {text}"),
}


def grounded_answer(page: Image.Image, profile: str = "deepseek-ocr") -> str:
    """The page's paragraphs as the profile's model writes them: its box on the model's scale, its text."""
    from vlmocr.engines.tesseract import TesseractEngine

    pos = TesseractEngine("eng").read(PageInput("d", 1, page, "", 300.0, [], None)).positions
    assert pos is not None
    parts = []
    blocks: dict[int, list] = {}
    for line in pos.lines:
        blocks.setdefault(line.block, []).append(line)
    for lines in blocks.values():
        x0, y0 = min(ln.box[0] for ln in lines), min(ln.box[1] for ln in lines)
        x1, y1 = max(ln.box[2] for ln in lines), max(ln.box[3] for ln in lines)
        scale, shape = FORMATS[profile]
        box = [round(x0 * scale / pos.width), round(y0 * scale / pos.height), round(x1 * scale / pos.width),
               round(y1 * scale / pos.height)]
        text = "\n".join(" ".join(w[5] for w in ln.words) for ln in lines)
        parts.append(shape.format(box=box, x0=box[0], y0=box[1], x1=box[2], y1=box[3], text=text))
    return "\n\n".join(parts)


@pytest.mark.parametrize("profile", sorted(FORMATS))
def test_a_grounded_answer_gives_positions_from_its_blocks(tmp_path, profile):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = tmp_path / "in"
    scans.mkdir()
    with Image.open(PAGE) as im:
        page = im.convert("L")
    page.save(scans / "letter.png")
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="static", static_text=grounded_answer(page, profile))) as srv:
        res = run_cli("run", str(scans), "--out", str(run), "--endpoint", srv.url, "--profile", profile,
                      "--model", "test-model", "--workers", "1", env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode in (0, 2), res.stderr
    row = Row.of(finals(run)[("letter", 1)])
    pos = row.word_positions()
    grounding = {"deepseek-ocr": "tags", "lightonocr-3": "lightonocr"}[profile]
    assert row.engine == "openai" and row.blocks and pos is not None and pos.source == "blocks:" + grounding
    assert (pos.width, pos.height) == (row.width, row.height)  # the image sent, not turned
    # Drawn on the page as scanned (scaled to it), the words lie on ink.
    scan = np.asarray(page.resize((pos.width, pos.height)))
    words = [w for w in pos.words() if len(w[5]) >= 3]
    inked = [w for w in words if (scan[w[1]:w[3], w[0]:w[2]] < 128).mean() > 0.03]
    assert len(words) > 200 and len(inked) >= 0.9 * len(words), (len(inked), len(words))
    # Each word inside its block's box.
    for line in pos.lines:
        block = row.blocks[line.block]
        scale = FORMATS[profile][0]
        bx0, by0, bx1, by1 = (v * s / scale for v, s in zip(block.bbox, (pos.width, pos.height) * 2))
        assert all(bx0 - 2 <= w[0] and w[2] <= bx1 + 2 and by0 - 2 <= w[1] and w[3] <= by1 + 2 for w in line.words)
