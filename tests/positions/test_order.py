"""Side notes read out of place (positions/order.py): an engine that reads block by block reads
margin headings, or the numbers of a list set apart from their items, as a block of their own,
and the signal, which sees words and not their places, passes the page. Synthetic lines for the
rule's edges; a real Danish memo with margin headings read by real Tesseract and RapidOCR."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.engines.pick import Candidate, pick
from vlmocr.positions.order import MIN_NOTES, MIN_ROWS, SIDE_NOTES, column_gutter, column_keys, side_notes
from vlmocr.runfolder.record import Line, Positions

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def line(x0: int, y0: int, x1: int, y1: int, text: str, block: int = 0) -> Line:
    return Line(box=(x0, y0, x1, y1), words=[(x0, y0, x1, y1, 0.9, w) for w in text.split()], block=block)


BODY = "Jøder skal senest 14 Dage efter Bekendtgørelsen anmelde sig"


def body(y: int, n: int, x0: int = 300, x1: int = 650, pitch: int = 25) -> list[Line]:
    return [line(x0, y + i * pitch, x1, y + i * pitch + 18, BODY, block=1) for i in range(n)]


def page(lines: list[Line]) -> Positions:
    return Positions(width=700, height=1200, source="tesseract", lines=lines)


def test_margin_headings_read_as_a_block_of_their_own_are_side_notes():
    # As Tesseract read EHRI-DR-19431002-DK_01: the four headings first, then the body, each
    # heading at the height of its paragraph's first line.
    heads = [line(50, 100 + 150 * k, 180, 117 + 150 * k, name)
             for k, name in enumerate(["Begrebet Jøder.", "Anmeldelsespligt.", "Kendetegn.", "Bevægelsesforbud."])]
    lines = heads + body(100, 24)
    assert side_notes(page(lines)) == [0, 1, 2, 3]
    # Read in place, each heading just before its paragraph's first line, they are in order.
    in_place = []
    for k in range(4):
        in_place += [heads[k], *body(100 + 150 * k, 6)]
    assert side_notes(page(in_place)) == []


def test_list_numbers_apart_from_their_items_are_side_notes():
    # tapus_btv1b53097347b: "1)" … "5)" read as a column of their own before the chapters.
    nums = [line(290, 400 + 200 * k, 316, 425 + 200 * k, f"{k + 1})") for k in range(5)]
    items = [line(340, 400 + 200 * k, 560, 421 + 200 * k, "COMMUNICATION SUR PLACE") for k in range(5)]
    assert side_notes(page(nums + items)) == [0, 1, 2, 3, 4]


def test_fewer_than_min_notes_a_label_beside_its_value_is_not_a_doubt():
    # tapus_btv1b10583138r: two labels, each beside its paragraph's first line, read apart from it.
    assert MIN_NOTES == 3
    labels = [line(280, 280 + 400 * k, 500, 310 + 400 * k, "REMISE DES RECOMPENSES:") for k in range(2)]
    values = [line(815, 276 + 400 * k, 1700, 311 + 400 * k, "Le 15 août 1962 à Bagnères-de-Bigorre, Monsieur")
              for k in range(2)]
    filler = body(1200, 4, 280, 1700)
    assert side_notes(Positions(width=1900, height=2000, source="tesseract", lines=labels + values + filler)) == []


def test_two_columns_read_one_after_the_other_are_in_order():
    # Each column's paragraphs end in a short line beside a full line of the other column, read
    # far from it; but each short line has its paragraph's line just above it.
    left, right = [], []
    for col, out in ((0, left), (1, right)):
        x0 = 50 + col * 330
        for i in range(30):
            short = i % 6 == (5 if col == 0 else 2)  # paragraphs end at other heights in each column
            out.append(line(x0, 100 + 25 * i, x0 + (90 if short else 300), 118 + 25 * i,
                            "ment." if short else "a full line of a column of running text"))
    assert side_notes(page(left + right)) == []


def test_small_print_in_the_gutter_and_specks_are_not_notes():
    # A manuscript's folio marks beside an edition's lines (zonaras: 25 px marks, 60 px lines),
    # and marks with no letter or digit (a stamp read as "®").
    lines = [line(300, 100 + 100 * k, 1550, 160 + 100 * k, "καὶ φρουρὸς οὐκ ἦν ἐν αὐταῖς") for k in range(8)]
    marks = [line(1600, 120 + 100 * k, 1616, 145 + 100 * k, "οι") for k in range(4)]
    specks = [line(30, 105 + 100 * k, 80, 155 + 100 * k, "®") for k in range(4)]
    assert side_notes(Positions(width=1861, height=1000, source="tesseract", lines=lines + marks + specks)) == []


def test_a_verse_s_line_numbers_in_the_margin_are_not_notes():
    verse = [line(300, 100 + 30 * i, 600 + 7 * (i % 5), 120 + 30 * i, "Sing, goddess, the anger of Achilles")
             for i in range(25)]
    numbers = [line(650, 100 + 30 * i, 672, 120 + 30 * i, str(i + 1)) for i in range(4, 25, 5)]
    assert side_notes(page(numbers + verse)) == []
    # The same column numbered as a list's items is out of place.
    items = [line(650, 100 + 30 * i, 680, 120 + 30 * i, f"{i + 1})") for i in range(4, 25, 5)]
    assert len(side_notes(page(items + verse))) == 5


def test_a_reading_in_order_is_kept_over_a_higher_scored_one_out_of_order():
    out_of_order = Candidate("tesseract", True, {"score": 0.95, SIDE_NOTES: 4})
    in_order = Candidate("rapidocr", True, {"score": 0.93})
    best, why = pick([out_of_order, in_order])
    assert best == 1 and why.startswith("in order (tesseract read side notes apart from their lines)")
    assert pick([Candidate("tesseract", True, {"score": 0.95}), in_order])[0] == 0


def two_column_pdf(path, paragraphs: list[str]):
    """A page of two columns of running text (reportlab, DejaVu Sans 10 pt), each paragraph's
    last line short."""
    import textwrap

    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("DejaVuSans", str(FONT)))
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("DejaVuSans", 10)
    x, y = 40, 790
    for para in paragraphs:
        for text in textwrap.wrap(para, 44):
            if y < 60:
                assert x == 40, "more text than two columns hold"
                x, y = 310, 790  # the second column
            c.drawString(x, y, text)
            y -= 13  # no space between paragraphs: the columns' lines stand at the same heights
    c.save()
    return path


def test_a_page_of_two_columns_read_by_tesseract_has_no_side_notes(tmp_path):
    """Real Tesseract on a real two-column page: it reads the columns one after the other, so
    the short last lines of the left column's paragraphs sit beside lines of the right column
    read far from them — and each has its paragraph just above it."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    need(FONT.exists(), "DejaVuSans.ttf", "fonts-dejavu-core")
    # Running English text, none of it twice (a repeated paragraph is a loop: tests/text).
    words = " ".join(" ".join(t.read_text(encoding="utf-8").split()) for t in sorted((GT / "ehri_en").glob("*.txt")))
    cut = [words[i:i + 260] for i in range(0, len(words), 260)]
    assert len(cut) >= 16
    paragraphs = [p.rsplit(" ", 3)[0] for p in cut[:16]]
    scans = tmp_path / "in"
    scans.mkdir()
    two_column_pdf(scans / "columns.pdf", paragraphs)
    run = tmp_path / "run"
    res = run_cli("run", str(scans), "--out", str(run), "--engine", "tesseract", "--lang", "eng", "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    (rec,) = finals(run).values()
    lines = Positions.model_validate(rec["positions"]).lines
    mid = 297 * rec["width"] / 595
    left = [i for i, ln in enumerate(lines) if ln.box[2] < mid]
    right = [i for i, ln in enumerate(lines) if ln.box[0] > mid]
    assert len(left) > 20 and len(right) > 20 and max(left) < min(right)  # column after column
    assert SIDE_NOTES not in rec["flags"] and SIDE_NOTES not in rec["quality"], rec["quality"]
    assert rec["status"] == "ok", rec["quality"]


def test_a_memo_with_margin_headings_is_suspect_and_the_cascade_keeps_a_reading_in_order(tmp_path):
    """EHRI-DR-19431002-DK_01: Tesseract (dan) reads its four margin headings before the body
    (11.3 % CER against the truth, score 0.905 over a threshold of 0.896: `ok` before this rule);
    RapidOCR joins each heading to the line it stands beside (1.8 %)."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = tmp_path / "in"
    scans.mkdir()
    shutil.copy(GT / "ehri_da" / "EHRI-DR-19431002-DK_01.jpg", scans / "memo.jpg")
    alone = tmp_path / "alone"
    res = run_cli("run", str(scans), "--out", str(alone), "--engine", "tesseract", "--lang", "dan", "--workers", "1")
    assert res.returncode == 2, res.stderr  # pages for review
    (rec,) = finals(alone).values()
    assert rec["status"] == "suspect" and SIDE_NOTES in rec["flags"]
    assert rec["quality"][SIDE_NOTES] >= MIN_NOTES and rec["quality"]["score"] >= rec["quality"]["threshold"]
    assert rec["text"].index("Kendetegn.") < rec["text"].index("Notits vedrørende")  # read before the body
    assert "local_thresholds" not in rec["flags"] and "rotation" not in rec  # no second reading for order
    # `vlmocr suspicious` says why, and a cleaned layer (letters changed, not the order) keeps it.
    for layer in ((), ("--clean",)):
        res = run_cli("suspicious", str(alone), "--json", *layer)
        (page,) = json.loads(res.stdout)["suspicious_pages"]
        assert any(r.startswith("side_notes: 4 short lines beside the body") for r in page["reasons"]), page
        assert page["signal"][SIDE_NOTES] == 4

    cascade = tmp_path / "cascade"
    res = run_cli("run", str(scans), "--out", str(cascade), "--engine", "tesseract,rapidocr", "--lang", "dan",
                  "--workers", "1")
    assert res.returncode == 0, res.stderr
    (rec,) = finals(cascade).values()
    assert (rec["engine"], rec["status"]) == ("rapidocr", "ok"), rec["engine_choice"]
    assert [t["engine"] for t in rec["tiers"]] == ["tesseract", "rapidocr"]
    assert rec["tiers"][0]["status"] == "suspect"
    assert "in order (tesseract read side notes apart from their lines)" in rec["engine_choice"]
    text = rec["text"]
    assert text.index("Notits vedrørende") < text.index("Begrebet Jøder") < text.index("Anmeldelsespligt")


# Two columns (RapidOCR joins what lies at one height: a page of two columns read across both).

def column_page(rows: int = 30, heading: bool = True) -> list[tuple[int, int, int, int]]:
    """Boxes of a page: a heading across both columns, then two columns of `rows` lines."""
    out = [(100, 40, 1100, 80)] if heading else []
    for i in range(rows):
        y = 120 + 30 * i
        out += [(100, y, 560 - (200 if i % 7 == 6 else 0), y + 20), (640, y, 1100, y + 20)]
    return out


def test_two_columns_are_found_and_read_column_after_column():
    boxes = column_page()
    gutter = column_gutter(boxes)
    assert gutter is not None and 560 <= gutter <= 640
    keys = column_keys(boxes, gutter)
    assert keys[0] == (0, 2) and keys[1] == (1, 0) and keys[2] == (1, 1)  # heading; left; right
    assert sorted(range(len(boxes)), key=lambda i: keys[i])[:3] == [0, 1, 3]  # heading, then the left column


def test_one_column_with_tabbed_lines_or_page_numbers_is_not_two_columns():
    one = [(100, 100 + 30 * i, 1100, 120 + 30 * i) for i in range(30)]
    # a few rows with a wide gap (a date and a place, a signature block)
    tabbed = one[:25] + [(100, 900 + 30 * i, 500, 920 + 30 * i) for i in range(4)] + \
        [(700, 900 + 30 * i, 1100, 920 + 30 * i) for i in range(4)]
    assert column_gutter(tabbed) is None
    # a table of contents: each title with its page number far to the right
    toc = [(100, 100 + 30 * i, 600, 120 + 30 * i) for i in range(20)] + \
        [(1050, 100 + 30 * i, 1100, 120 + 30 * i) for i in range(20)]
    assert column_gutter(toc) is None
    assert column_gutter(column_page(rows=MIN_ROWS - 1, heading=False)) is None


def test_lines_across_the_gap_mean_no_gutter():
    # Two wide pieces on many rows, but most lines of the page run across the gap: one column
    # whose lines happen to have a space there.
    boxes = column_page(rows=8, heading=False) + [(100, 400 + 30 * i, 1100, 420 + 30 * i) for i in range(-10, 20)]
    assert column_gutter(boxes) is None


def page_image(pdf, out):
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    doc[0].render(scale=200 / 72).to_pil().convert("L").save(out)
    doc.close()
    return out


def test_a_scan_of_two_columns_read_by_the_default_path_is_in_column_order(tmp_path):
    """The same two-column page as a scan (no text layer): `auto` reads English with RapidOCR,
    which read it across both columns — every line the left's and the right's joined, `ok`, score
    0.997 — before its boxes were split at the gutter."""
    need(FONT.exists(), "DejaVuSans.ttf", "fonts-dejavu-core")
    words = " ".join(" ".join(t.read_text(encoding="utf-8").split()) for t in sorted((GT / "ehri_en").glob("*.txt")))
    cut = [words[i:i + 260] for i in range(0, len(words), 260)]
    paragraphs = [p.rsplit(" ", 3)[0] for p in cut[:16]]
    scans = tmp_path / "in"
    scans.mkdir()
    page_image(two_column_pdf(tmp_path / "columns.pdf", paragraphs), scans / "columns.png")
    run = tmp_path / "run"
    res = run_cli("run", str(scans), "--out", str(run), "--lang", "eng", "--workers", "1")
    assert res.returncode == 0, res.stderr
    (rec,) = finals(run).values()
    assert (rec["engine"], rec["status"]) == ("rapidocr", "ok")
    text = " ".join(rec["text"].split())
    # Every paragraph whole and in order: the left column's, then the right's.
    at = [text.find(" ".join(p.split()[1:6])) for p in paragraphs]
    assert all(a >= 0 for a in at) and at == sorted(at), at
