"""Issue 29 point 1, born-digital pages: a page read from its PDF text layer keeps where its lines
lie (PDFium's text rectangles; words spread across each by their letters), in the pixels of the
page as `vlmocr run` renders it — on a page whose /Rotate turns it as shown too. Checked against
the ink of the page rendered by the same renderer."""

from __future__ import annotations

import numpy as np
import pikepdf

from support.cli import run_cli
from support.documents import make_text_pdf
from support.records import finals
from vlmocr.inputs.render import render_page
from vlmocr.runfolder.record import Row, Sizing

LINES = ["Dear Sir, thank you for the books which arrived on Tuesday.",
         "We shall pay the account by the end of the month.", "Yours faithfully, J. Smith"]


def test_text_layer_words_lie_on_their_ink(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    make_text_pdf(folder / "letter.pdf", [LINES])
    with pikepdf.open(folder / "letter.pdf") as pdf:
        pdf.pages[0].obj["/Rotate"] = 90
        pdf.save(folder / "turned.pdf")
    run = tmp_path / "run"
    assert run_cli("run", str(folder), "--out", str(run), "--workers", "1").returncode == 0
    for doc in ("letter", "turned"):
        row = Row.of(finals(run)[(doc, 1)])
        pos = row.word_positions()
        assert row.engine == "textlayer" and pos is not None and pos.source == "textlayer"
        page = np.asarray(render_page(folder / f"{doc}.pdf", 1, Sizing()).image.convert("L"))
        assert (pos.width, pos.height) == (page.shape[1], page.shape[0]), doc  # the page as rendered
        words = pos.words()
        # The words of the text recorded, in its order (PDFium reads a turned page's lines in the
        # order they run as shown).
        assert " ".join(w[5] for w in words) == " ".join(row.text.split())
        assert sorted(w[5] for w in words) == sorted(" ".join(LINES).split())
        inked = [w for w in words if (page[w[1]:w[3], w[0]:w[2]] < 160).mean() > 0.05]
        assert len(inked) >= 0.9 * len(words), (doc, len(inked), len(words))
