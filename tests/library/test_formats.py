"""Issue 29 points 3–5: `vlmocr export --format alto|hocr|pagexml|pdf` from real Tesseract readings
of real pages — a PDF holding a text-less scan, a TIFF, a Fraktur page and a two-column page —
checked by real tools: ALTO 4.2 and PAGE-XML 2019 validate against the official schemas
(tests/data/xsd, lxml); OCRmyPDF's parser reads the hOCR; `pdftotext` gives the reading back
from the searchable PDF (≥ 98 % character agreement, words in order), its word boxes hold ink on
the page image, and a PDF input's page image is byte for byte the input's; `evaluate`'s truth
reader reads the ALTO and PAGE-XML back to the record's text."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.evaluation.score import cer
from vlmocr.evaluation.truth_xml import xml_truth
from vlmocr.runfolder.record import Row

XSD = Path(__file__).resolve().parent.parent / "data" / "xsd"
EN = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"
EN2 = GT / "ehri_en" / "EHRI-DR-19390519-US_03.jpg"
FRAKTUR = GT / "goethe" / "goethe_0014.png"


def words_text(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    need(shutil.which("pdftotext") is not None, "pdftotext", "poppler-utils")
    import img2pdf

    root = tmp_path_factory.mktemp("formats")
    inputs = root / "in"
    inputs.mkdir()
    (inputs / "scan.pdf").write_bytes(img2pdf.convert(str(EN)))  # a scan in a PDF, no text layer
    # A scan stored on its side in a PDF whose page says /Rotate 90 (as scanners write them):
    # shown upright, and its text layer must lie over it as shown.
    import pikepdf

    with Image.open(EN2) as im:
        im.convert("L").transpose(Image.Transpose.ROTATE_90).save(root / "side.jpg", quality=92)
    with pikepdf.open(io.BytesIO(img2pdf.convert(str(root / "side.jpg")))) as pdf:
        pdf.pages[0].obj["/Rotate"] = 90
        pdf.save(inputs / "rotated.pdf")
    with Image.open(EN2) as im:
        im.convert("L").save(inputs / "typescript.tiff", compression="tiff_lzw", dpi=(300, 300))
    shutil.copy(FRAKTUR, inputs / "fraktur.png")
    with Image.open(EN) as im:  # two columns: the page's upper and lower text side by side
        page = im.convert("L")
        w, h = page.size
        top, bottom = page.crop((0, 120, w, 600)), page.crop((0, 600, w, 1080))
        columns = Image.new("L", (2 * w + 80, top.height + 80), 255)
        columns.paste(top, (20, 40))
        columns.paste(bottom, (w + 60, 40))
        columns.save(inputs / "columns.png")
    manifest = root / "manifest.csv"
    with manifest.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["doc_id", "path", "language"])
        for name, lang in (("scan.pdf", "eng"), ("typescript.tiff", "eng"), ("fraktur.png", "script/Fraktur"),
                           ("columns.png", "eng"), ("rotated.pdf", "eng")):
            out.writerow([Path(name).stem, str(inputs / name), lang])
    run = root / "run"
    res = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--engine", "tesseract", "--workers", "2")
    assert res.returncode in (0, 2), res.stderr
    outs = {}
    for fmt in ("alto", "hocr", "pagexml", "pdf"):
        outs[fmt] = root / f"out-{fmt}"
        res = run_cli("export", str(run), "--format", fmt, "--out", str(outs[fmt]))
        assert res.returncode == 0, res.stderr
    rows = {doc: Row.of(rec) for (doc, _), rec in finals(run).items()}
    return inputs, rows, outs


DOCS = ("scan", "typescript", "fraktur", "columns", "rotated")


def test_alto_and_pagexml_validate_against_the_official_schemas(exported):
    from lxml import etree

    _, rows, outs = exported
    alto = etree.XMLSchema(etree.parse(str(XSD / "alto-4-2.xsd")))
    page = etree.XMLSchema(etree.parse(str(XSD / "pagecontent-2019-07-15.xsd")))
    for doc in DOCS:
        tree = etree.parse(str(outs["alto"] / f"{doc}.alto.xml"))
        assert alto.validate(tree), (doc, alto.error_log)
        strings = tree.findall(".//{*}String")
        assert len(strings) == len(rows[doc].word_positions().words())
        assert all(s.get("HPOS") is not None and 0 <= float(s.get("WC")) <= 1 for s in strings)
        files = sorted((outs["pagexml"] / doc).glob("*.xml"))
        assert [f.name for f in files] == ["p0001.xml"]
        assert page.validate(etree.parse(str(files[0]))), (doc, page.error_log)
    # A file the schema refuses is refused (the check can fail): a String without its CONTENT.
    broken = etree.parse(str(outs["alto"] / "scan.alto.xml"))
    del broken.find(".//{*}String").attrib["CONTENT"]
    assert not alto.validate(broken)


def test_the_two_columns_are_two_blocks_read_left_then_right(exported):
    from lxml import etree

    _, rows, outs = exported
    tree = etree.parse(str(outs["alto"] / "columns.alto.xml"))
    blocks = tree.findall(".//{*}TextBlock")
    lefts = [int(b.get("HPOS")) for b in blocks]
    assert len(blocks) >= 2 and lefts[0] < lefts[-1]
    half = rows["columns"].word_positions().width / 2
    xs = [int(s.get("HPOS")) for s in tree.findall(".//{*}String")]
    # every word of the left column comes before every word of the right one
    first_right = next(i for i, x in enumerate(xs) if x > half)
    assert all(x > half for x in xs[first_right:])


def test_hocr_is_read_by_ocrmypdfs_parser(exported):
    from ocrmypdf.hocrtransform import HocrParser

    inputs, rows, outs = exported
    for doc in DOCS:
        page = HocrParser(outs["hocr"] / f"{doc}.hocr").parse()
        pos = rows[doc].word_positions()
        # The page is the input's own image, as stored: a PDF's embedded scan (on its side in
        # rotated.pdf, whose /Rotate shows it upright), an image file's pixels.
        with Image.open(EN if doc == "scan" else EN2 if doc in ("typescript", "rotated")
                        else inputs / f"{doc}.png") as im:
            own = im.size[::-1] if doc == "rotated" else im.size
        assert (page.bbox.right, page.bbox.bottom) == own, doc
        words = [w for line in page.lines for w in line.children]
        # (the parser folds compatibility forms: NFKC, ſ → s)
        assert [w.text for w in words] == [unicodedata.normalize("NFKC", w[5]) for w in pos.words()]
        assert all(w.confidence is not None for w in words)


def pdf_words(pdf: Path) -> list[tuple[str, float, float, float, float]]:
    """(word, xMin, yMin, xMax, yMax in points) of page 1, as pdftotext finds them."""
    html = subprocess.run(["pdftotext", "-bbox", "-f", "1", "-l", "1", str(pdf), "-"], capture_output=True,
                          text=True, check=True).stdout
    return [(m[5], float(m[1]), float(m[2]), float(m[3]), float(m[4]))
            for m in re.findall(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>',
                                html)
            for m in [(None, *m)]]


def test_the_searchable_pdf_gives_the_reading_back_over_the_untouched_scan(exported):
    import html as html_mod

    import pikepdf

    inputs, rows, outs = exported
    for doc in DOCS:
        pdf = outs["pdf"] / f"{doc}.pdf"
        # -raw: the text as the PDF holds it (the layer's order); without it pdftotext re-flows
        # the page by its own layout guess, which splits a typescript's spaced words into columns.
        text = subprocess.run(["pdftotext", "-raw", str(pdf), "-"], capture_output=True, text=True,
                              check=True).stdout
        reading = " ".join(w[5] for w in rows[doc].word_positions().words())
        assert 1 - cer(words_text(text), words_text(reading)) >= 0.98, (doc, text[:300])
        with pikepdf.open(pdf) as written:  # PDF/A-2b declared, and pikepdf's check passed on writing
            assert written.open_metadata().pdfa_status == "2B", doc
    # The PDF input's page image is the input's, byte for byte.
    with pikepdf.open(inputs / "scan.pdf") as src, pikepdf.open(outs["pdf"] / "scan.pdf") as out:
        def images(p):
            return [x.read_raw_bytes() for x in p.pages[0].get_images().values()]
        assert images(src) == images(out) and len(images(src)) == 1
    # A word's box in the PDF holds that word's ink on the page image (a sample, by cropping).
    pos = rows["typescript"].word_positions()
    with Image.open(inputs / "typescript.tiff") as im:
        scan = np.asarray(im.convert("L"))
    found = pdf_words(outs["pdf"] / "typescript.pdf")
    width_pt = float(subprocess.run(["pdfinfo", str(outs["pdf"] / "typescript.pdf")], capture_output=True,
                                    text=True).stdout.split("Page size:")[1].split()[0])
    scale = scan.shape[1] / width_pt
    sample = [w for w in found if len(html_mod.unescape(w[0])) >= 4][::5]
    assert len(sample) >= 15
    inked = 0
    for _, x0, y0, x1, y1 in sample:
        crop = scan[int(y0 * scale):int(y1 * scale) + 1, int(x0 * scale):int(x1 * scale) + 1]
        inked += crop.size > 0 and (crop < 128).mean() > 0.03
    assert inked >= 0.95 * len(sample), (inked, len(sample))
    assert (scan.shape[1], scan.shape[0]) == (pos.width, pos.height)


def test_evaluate_reads_the_alto_and_pagexml_back_as_the_reading(exported):
    _, rows, outs = exported
    for doc in DOCS:
        reading = words_text(" ".join(w[5] for w in rows[doc].word_positions().words()))
        for path in (outs["alto"] / f"{doc}.alto.xml", outs["pagexml"] / doc / "p0001.xml"):
            layout, text, _ = xml_truth(path)
            assert words_text(text) == reading, (doc, layout)
        # and the record's text is that reading (same CER against any truth)
        assert cer(reading, words_text(rows[doc].text)) < 0.01


def test_a_born_digital_pdf_keeps_its_own_text_and_is_not_called_pdfa_when_it_cannot_be(tmp_path):
    import pikepdf

    from support.documents import make_text_pdf

    need(shutil.which("pdftotext") is not None, "pdftotext", "poppler-utils")
    inputs = tmp_path / "in"
    inputs.mkdir()
    make_text_pdf(inputs / "letter.pdf", [["Dear Sir, thank you for the books which arrived."]])
    run = tmp_path / "run"
    assert run_cli("run", str(inputs), "--out", str(run), "--workers", "1").returncode == 0
    out = tmp_path / "pdf"
    res = run_cli("export", str(run), "--format", "pdf", "--out", str(out))
    assert res.returncode == 0, res.stderr
    text = subprocess.run(["pdftotext", "-raw", str(out / "letter.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert text.count("thank you for the books") == 1  # no second layer over its own text
    # Its font is not embedded: it cannot pass as PDF/A, so it is a plain PDF, and the note says so.
    assert "letter.pdf: a plain PDF, not PDF/A-2b" in res.stderr, res.stderr
    with pikepdf.open(out / "letter.pdf") as written:
        assert written.open_metadata().pdfa_status == ""


def test_evaluate_scores_the_exported_alto_and_pagexml_as_it_scores_the_run(exported, tmp_path):
    # Point 5: ALTO and PAGE-XML written by vlmocr are readings `evaluate` accepts (and truth, as
    # above): the same pages, the same CER as the records' text.
    import json

    _, _, outs = exported
    truth = tmp_path / "truth"
    truth.mkdir()
    for doc, page in (("scan", EN), ("typescript", EN2), ("fraktur", FRAKTUR)):
        shutil.copy(page.with_suffix(".txt"), truth / f"{doc}.txt")
    run = outs["alto"].parent / "run"

    def cers(reading: Path) -> dict[str, float]:
        res = run_cli("evaluate", str(reading), "--truth", str(truth), "--json", "--bootstrap", "0")
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        return {p["doc_id"]: p["cer"] for p in data["pages"] if p.get("cer") is not None}

    from_run = cers(run)
    assert set(from_run) == {"scan", "typescript", "fraktur"}
    for fmt in ("alto", "pagexml"):
        got = cers(outs[fmt])
        assert set(got) == set(from_run), fmt
        for doc, value in from_run.items():
            assert abs(got[doc] - value) < 0.003, (fmt, doc, got[doc], value)


def test_a_document_no_pdf_can_be_made_for_is_said_and_the_others_are_written(tmp_path):
    # A 16-bit master TIFF, which img2pdf cannot embed as it is, is re-encoded without loss (its
    # pixels as the engines saw them), and said; a document whose input is gone gets no PDF, said,
    # while the others are written.
    import pikepdf

    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    need(shutil.which("pdftotext") is not None, "pdftotext", "poppler-utils")
    inputs = tmp_path / "in"
    inputs.mkdir()
    with Image.open(EN) as im:
        grey = np.asarray(im.convert("L")).astype(np.uint16) * 257
        Image.fromarray(grey).save(inputs / "master.tif")  # I;16
        im.convert("L").save(inputs / "gone.png")
    run = tmp_path / "run"
    assert run_cli("run", str(inputs), "--out", str(run), "--engine", "tesseract", "--workers", "1").returncode == 0
    (inputs / "gone.png").unlink()
    out = tmp_path / "pdf"
    res = run_cli("export", str(run), "--format", "pdf", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "master.tif: its image re-encoded for the PDF" in res.stderr, res.stderr
    assert "gone: no PDF: its input gone.png is not found here" in res.stderr, res.stderr
    assert sorted(p.name for p in out.glob("*.pdf")) == ["master.pdf"]
    with pikepdf.open(out / "master.pdf") as pdf:
        assert len(pdf.pages) == 1
    text = subprocess.run(["pdftotext", "-raw", str(out / "master.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "facts approached these families" in " ".join(text.split())
