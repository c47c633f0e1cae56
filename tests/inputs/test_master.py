"""A page's master image (inputs/master.py): the one image a scan PDF page shows, or an image
file's page, and how the page as rendered maps onto it — checked by drawing a mark at known pixels
of the master, rendering the page as vlmocr reads it, finding the mark and mapping its box back."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from PIL import Image, ImageDraw

from support.documents import make_placed_scan_pdf, make_text_pdf
from vlmocr.inputs.master import Master
from vlmocr.inputs.render import Sizing, file_master, pdf_master, render_page

MARK = (300, 520, 380, 610)  # a black square at these pixels of the master (x0, y0, x1, y1)


def marked(size: tuple[int, int] = (1200, 1700)) -> Image.Image:
    img = Image.new("L", size, 255)
    ImageDraw.Draw(img).rectangle((MARK[0], MARK[1], MARK[2] - 1, MARK[3] - 1), fill=0)
    return img


def dark_box(img: Image.Image) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(np.asarray(img.convert("L")) < 128)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


@pytest.mark.parametrize("dpi, margin, rotate, form", [
    (300, 0, 0, False), (150, 30, 0, False), (205, 0, 90, False), (240, 12, 270, True), (96, 0, 180, True)])
@pytest.mark.parametrize("sizing", [Sizing(), Sizing(dpi=None, longest_side=1000), Sizing(max_pixels=600_000)])
def test_a_mark_on_the_rendered_page_maps_back_onto_the_masters_pixels(tmp_path, dpi, margin, rotate, form, sizing):
    pdf = make_placed_scan_pdf(tmp_path / "p.pdf", [{"image": marked(), "dpi": dpi, "margin": margin,
                                                     "rotate": rotate, "form": form}])
    rendered = render_page(pdf, 1, sizing)
    master = rendered.master
    assert master is not None and (master.width, master.height, master.of) == (1200, 1700, "pdf image")
    assert master.dpi == pytest.approx((dpi, dpi), abs=0.01)
    back = master.box(dark_box(rendered.image), *rendered.image.size)
    # within a rendered pixel's size in the master's pixels (+1 for rounding at either side)
    slack = 1 + max(master.width, master.height) / min(rendered.image.size) * 1.5
    assert all(abs(a - b) <= slack for a, b in zip(back, MARK)), (back, MARK, slack)
    assert pdf_master(pdf, 1) == master == file_master(pdf, 1)


def test_a_master_survives_the_record_and_maps_a_box_within_its_image(tmp_path):
    pdf = make_placed_scan_pdf(tmp_path / "p.pdf", [{"image": marked(), "dpi": 150, "margin": 30}])
    master = pdf_master(pdf, 1)
    again = Master.from_json(master.to_json())
    assert again is not None and again.box((0, 0, 100, 100), 100, 100) == (0, 0, 1200, 1700)
    assert Master.from_json({"width": 5}) is None and Master.from_json("x") is None


def test_pages_of_strips_vector_text_or_a_small_picture_have_no_master(tmp_path):
    import pikepdf

    assert pdf_master(make_text_pdf(tmp_path / "text.pdf", [["born digital"]]), 1) is None
    # one scan in two strips, and a photograph on a third of a page
    pdf = pikepdf.new()
    strip = Image.new("L", (600, 400), 200)

    def image():
        return pikepdf.Stream(pdf, zlib.compress(strip.tobytes()), Type=pikepdf.Name.XObject,
                              Subtype=pikepdf.Name.Image, Width=600, Height=400,
                              ColorSpace=pikepdf.Name.DeviceGray, BitsPerComponent=8, Filter=pikepdf.Name.FlateDecode)
    for draw, names in ((b"q 600 0 0 400 0 400 cm /A Do Q q 600 0 0 400 0 0 cm /B Do Q", ("A", "B")),
                        (b"q 300 0 0 200 100 500 cm /A Do Q", ("A",))):
        xobjects = pikepdf.Dictionary({f"/{n}": image() for n in names})
        pdf.pages.append(pikepdf.Page(pikepdf.Dictionary(
            Type=pikepdf.Name.Page, MediaBox=[0, 0, 600, 800], Resources=pikepdf.Dictionary(XObject=xobjects),
            Contents=pikepdf.Stream(pdf, draw))))
    pdf.save(tmp_path / "parts.pdf")
    assert pdf_master(tmp_path / "parts.pdf", 1) is None and pdf_master(tmp_path / "parts.pdf", 2) is None
    assert render_page(tmp_path / "parts.pdf", 1, Sizing()).master is None


def test_an_image_file_read_scaled_down_maps_onto_its_own_pixels(tmp_path):
    marked().save(tmp_path / "page.tiff", dpi=(300, 300))
    rendered = render_page(tmp_path / "page.tiff", 1, Sizing(max_pixels=500_000))
    assert "downscaled" in rendered.flags and rendered.image.size != (1200, 1700)
    master = rendered.master
    assert (master.width, master.height, master.dpi, master.of) == (1200, 1700, (300, 300), "image file")
    back = master.box(dark_box(rendered.image), *rendered.image.size)
    assert all(abs(a - b) <= 4 for a, b in zip(back, MARK)), back
    assert file_master(tmp_path / "page.tiff", 1) == master


def test_records_keep_the_master_whoever_read_the_page(tmp_path):
    """The CPU engines, the text layer of an earlier OCR over a scan, and a VLM's page alike."""
    import pikepdf

    from support.cli import run_cli
    from support.records import finals
    from vlmocr.testing.openai_server import ServerConfig, serve_in_process
    from vlmocr.testing.pagecode import make_coded_png

    scan = make_placed_scan_pdf(tmp_path / "scan.pdf", [{"image": marked(), "dpi": 150, "margin": 20}])
    with pikepdf.open(scan, allow_overwriting_input=True) as pdf:  # an earlier OCR's invisible text
        page = pdf.pages[0]
        page.Resources.Font = pikepdf.Dictionary(F1=pikepdf.Dictionary(
            Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica))
        page.contents_add(pikepdf.Stream(pdf, b"BT 3 Tr /F1 12 Tf 60 700 Td (The earlier reading of this "
                                              b"scanned page, kept as its invisible text layer.) Tj ET"))
        pdf.save(scan)
    res = run_cli("run", str(scan), "--out", str(tmp_path / "t"), "--engine", "textlayer")
    assert res.returncode == 0, res.stderr
    rec = finals(tmp_path / "t")[("scan", 1)]
    assert rec["engine"] == "textlayer" and rec["positions"] and rec["master"]["of"] == "pdf image"
    assert (rec["master"]["width"], rec["master"]["dpi"]) == (1200, [150.0, 150.0])
    make_coded_png(tmp_path / "coded.png", 3)
    with serve_in_process(ServerConfig()) as srv:
        res = run_cli("run", str(tmp_path / "coded.png"), "--out", str(tmp_path / "v"), "--endpoint", srv.url,
                      "--profile", "generic", env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
        assert res.returncode == 0, res.stderr
    rec = finals(tmp_path / "v")[("coded", 1)]
    with Image.open(tmp_path / "coded.png") as im:
        assert rec["engine"] == "openai" and (rec["master"]["width"], rec["master"]["height"]) == im.size
