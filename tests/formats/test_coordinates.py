"""Coordinates a repository can use: ALTO, hOCR and PAGE-XML of a scan PDF give their boxes in the
pixels of each page's embedded image — the master image `pdfimages` extracts — and say which image
and at what resolution, however the PDF shows it (not at 200 dpi, on a larger sheet, turned by
/Rotate, inside a Form XObject), and an image file's boxes are in its own pixels when the page was
read scaled down. Checked as a repository would: the images extracted with poppler's `pdfimages`,
the boxes laid over them, the ink inside them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from lxml import etree
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.documents import make_placed_scan_pdf

TYPESCRIPT = GT / "ehri_en" / "EHRI-DR-19390519-US_03.jpg"  # 1437 x 2400 px, 290 dpi
XSD = Path(__file__).resolve().parent.parent / "data" / "xsd"
# (dpi the scan is shown at, margin in pt, /Rotate, in a Form XObject, stored on its side)
PAGES = ((300, 24, 0, False, False), (150, 0, 90, False, True), (240, 6, 0, True, False))
INK = 110  # grey levels below this are ink on these typescript scans
MAX_PIXELS = "2500000"  # the TIFF (3.4 MP) is read scaled down


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    need(shutil.which("pdfimages") is not None, "pdfimages", "poppler-utils")
    root = tmp_path_factory.mktemp("coordinates")
    inputs = root / "in"
    inputs.mkdir()
    with Image.open(TYPESCRIPT) as im:
        page = im.convert("L")
    make_placed_scan_pdf(inputs / "scan.pdf", [
        {"image": page.transpose(Image.Transpose.ROTATE_90) if side else page, "dpi": dpi, "margin": margin,
         "rotate": rotate, "form": form}
        for dpi, margin, rotate, form, side in PAGES])
    page.save(inputs / "typescript.tiff", compression="tiff_lzw", dpi=(290, 290))
    run = root / "run"
    res = run_cli("run", str(inputs / "scan.pdf"), str(inputs / "typescript.tiff"), "--out", str(run),
                  "--engine", "tesseract", "--lang", "eng", "--workers", "2", "--max-pixels", MAX_PIXELS)
    assert res.returncode in (0, 2), res.stderr
    outs = {}
    for fmt in ("alto", "hocr", "pagexml"):
        outs[fmt] = root / f"out-{fmt}"
        res = run_cli("export", str(run), "--format", fmt, "--out", str(outs[fmt]))
        assert res.returncode == 0, res.stderr
    masters = root / "masters"
    masters.mkdir()
    subprocess.run(["pdfimages", "-png", str(inputs / "scan.pdf"), str(masters / "scan")], check=True)
    images = sorted(masters.glob("scan-*.png"))
    assert len(images) == len(PAGES)
    return inputs, outs, images


def ink_inside(image: Path, boxes: list[tuple[int, int, int, int]]) -> tuple[float, float]:
    """(share of the image's ink inside the boxes, share of the boxes' area that is ink)."""
    with Image.open(image) as im:
        ink = np.asarray(im.convert("L")) < INK
    inside = np.zeros_like(ink)
    for x0, y0, x1, y1 in boxes:
        inside[max(0, y0 - 2):y1 + 2, max(0, x0 - 2):x1 + 2] = True
    return float((ink & inside).sum() / ink.sum()), float((ink & inside).sum() / inside.sum())


def alto_pages(path: Path) -> list[tuple[etree._Element, list[tuple[int, int, int, int]]]]:
    tree = etree.parse(str(path))
    assert etree.XMLSchema(etree.parse(str(XSD / "alto-4-2.xsd"))).validate(tree)
    out = []
    for page in tree.findall(".//{*}Page"):
        boxes = [(int(s.get("HPOS")), int(s.get("VPOS")), int(s.get("HPOS")) + int(s.get("WIDTH")),
                  int(s.get("VPOS")) + int(s.get("HEIGHT"))) for s in page.iter("{*}String")]
        out.append((page, boxes))
    return out


def test_alto_boxes_lie_on_the_ink_of_the_images_pdfimages_extracts(exported):
    _, outs, images = exported
    pages = alto_pages(outs["alto"] / "scan.alto.xml")
    assert len(pages) == len(PAGES)
    for (page, boxes), image in zip(pages, images):
        with Image.open(image) as im:
            assert (int(page.get("WIDTH")), int(page.get("HEIGHT"))) == im.size, image.name
        assert len(boxes) > 100
        covered, density = ink_inside(image, boxes)
        # Nearly all the typescript's ink lies in the word boxes, and the boxes are mostly ink's
        # neighbourhood (here 0.999 and 0.25; boxes 0.7 times too small lie off the lines: 0.11, 0.05).
        assert covered > 0.95 and density > 0.15, (image.name, covered, density)


def test_each_file_says_which_image_and_at_what_resolution(exported):
    _, outs, images = exported
    settings = etree.parse(str(outs["alto"] / "scan.alto.xml")).find(".//{*}processingStepSettings").text
    hocr = (outs["hocr"] / "scan.hocr").read_text()
    for n, ((dpi, *_), image) in enumerate(zip(PAGES, images), 1):
        with Image.open(image) as im:
            w, h = im.size
        assert f"page {n}: the PDF page's embedded image, {w} x {h} px, {dpi} dpi" in settings
        assert re.search(rf'id="page_{n}" title="image "scan.pdf"; bbox 0 0 {w} {h}; ppageno {n - 1}; '
                         rf'scan_res {dpi} {dpi}"', hocr.replace("&quot;", '"')), n
        page = etree.parse(str(outs["pagexml"] / "scan" / f"p{n:04d}.xml")).find("{*}Page")
        assert (page.get("imageWidth"), page.get("imageHeight")) == (str(w), str(h))
        assert (float(page.get("imageXResolution")), page.get("imageResolutionUnit")) == (dpi, "PPI")


def test_hocr_and_pagexml_boxes_are_altos(exported):
    _, outs, images = exported
    alto = [boxes for _, boxes in alto_pages(outs["alto"] / "scan.alto.xml")]
    hocr = (outs["hocr"] / "scan.hocr").read_text()
    for n in range(1, len(PAGES) + 1):
        words = re.findall(rf'id="page_{n}_b\d+_l\d+_w\d+" title="bbox (\d+) (\d+) (\d+) (\d+)', hocr)
        assert [tuple(map(int, w)) for w in words] == alto[n - 1]
        tree = etree.parse(str(outs["pagexml"] / "scan" / f"p{n:04d}.xml"))
        points = [w.find("{*}Coords").get("points") for w in tree.iter("{*}Word")]
        assert [(int(p.split()[0].split(",")[0]), int(p.split()[0].split(",")[1]),
                 int(p.split()[2].split(",")[0]), int(p.split()[2].split(",")[1])) for p in points] == alto[n - 1]


def test_an_image_read_scaled_down_has_its_boxes_in_its_own_pixels(exported):
    inputs, outs, _ = exported
    [(page, boxes)] = alto_pages(outs["alto"] / "typescript.alto.xml")
    with Image.open(inputs / "typescript.tiff") as im:
        assert (int(page.get("WIDTH")), int(page.get("HEIGHT"))) == im.size
    covered, density = ink_inside(inputs / "typescript.tiff", boxes)
    assert covered > 0.95 and density > 0.15, (covered, density)
    settings = etree.parse(str(outs["alto"] / "typescript.alto.xml")).find(".//{*}processingStepSettings").text
    assert "page 1: the image file's page, 1437 x 2400 px, 290 dpi" in settings


def test_search_gives_the_rarest_words_box_as_alto_places_it(exported, tmp_path):
    import json
    from collections import Counter

    inputs, outs, _ = exported
    run, lib = inputs.parent / "run", tmp_path / "lib"
    assert run_cli("publish", str(run), "--library", str(lib)).returncode == 0
    page = etree.parse(str(outs["alto"] / "scan.alto.xml")).find(".//{*}Page")
    strings = list(page.iter("{*}String"))
    words = [s.get("CONTENT") for s in strings]
    counts = Counter(w.lower() for w in words)
    assert counts["the"] >= 3
    # a word once on the page, never right after "the": the query's rarest word
    k = next(k for k, w in enumerate(words) if len(w) >= 7 and w.isalpha() and counts[w.lower()] == 1
             and words[k - 1].lower() != "the" and words[(k + 1) % len(words)].lower() != "the")
    res = run_cli("search", str(lib), f"the {words[k]}", "--json")
    assert res.returncode == 0, res.stderr
    hit = next(h for h in json.loads(res.stdout) if h["doc_id"] == "scan" and h["page"] == 1)
    s = strings[k]
    x, y = int(s.get("HPOS")), int(s.get("VPOS"))
    assert hit["region"]["words"] == [words[k]] and hit["region"]["image"] == "pdf image"
    assert hit["region"]["box"] == [x, y, x + int(s.get("WIDTH")), y + int(s.get("HEIGHT"))]
    assert (hit["region"]["width"], hit["region"]["height"]) == (int(page.get("WIDTH")), int(page.get("HEIGHT")))


def test_a_record_from_before_masters_is_placed_from_its_input_when_found(tmp_path):
    from vlmocr.formats.layout import laid_page
    from vlmocr.runfolder.record import Row

    with Image.open(TYPESCRIPT) as im:
        pdf = make_placed_scan_pdf(tmp_path / "old.pdf", [{"image": im.convert("L"), "dpi": 300, "margin": 24}])
    # as vlmocr read it at 200 dpi: (344.9 + 48) x (576 + 48) pt → 1092 x 1734 px; one word's box
    line = {"box": [100, 200, 300, 240], "words": [[100, 200, 300, 240, 0.9, "word"]], "block": 0}
    old = Row.of({"doc_id": "old", "page": 1, "status": "ok", "text": "word", "dpi": 200.0,
                  "positions": {"width": 1092, "height": 1734, "source": "tesseract", "lines": [line]}})
    assert laid_page(old).master is None and laid_page(old).placed((100, 200, 300, 240)) == (100, 200, 300, 240)
    page = laid_page(old, pdf)
    assert page.frame_size() == (1437, 2400) and page.frame_dpi() == pytest.approx((300, 300))
    # 200 → 300 dpi, less the 24 pt margin (100 px at 300 dpi)
    assert page.placed((100, 200, 300, 240)) == pytest.approx((50, 200, 350, 260), abs=2)
