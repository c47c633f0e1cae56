
import pypdfium2 as pdfium
import pytest
from PIL import Image

from support.documents import make_scan_pdf, make_text_pdf, text_image
from vlmocr.exceptions import BadInput
from vlmocr.inputs.render import Sizing, count_pages, is_blank, render_page, text_layer, usable_text_layer


def test_pdf_render_at_dpi_and_longest_side(tmp_path):
    pdf = make_text_pdf(tmp_path / "a.pdf", [["hello"]])  # A4: 595 x 842 pt
    r = render_page(pdf, 1, Sizing(dpi=72))
    assert r.image.size in ((595, 842), (596, 842)) and r.dpi == 72 and r.flags == []
    r = render_page(pdf, 1, Sizing(dpi=None, longest_side=1000))
    assert max(r.image.size) == 1000


def test_pixel_cap_downscales_and_flags(tmp_path):
    from reportlab.pdfgen import canvas

    p = tmp_path / "poster.pdf"
    c = canvas.Canvas(str(p), pagesize=(2384 * 1.41, 3370 * 1.41))  # bigger than A0
    c.drawString(100, 100, "poster")
    c.showPage()
    c.save()
    r = render_page(p, 1, Sizing(dpi=300, max_pixels=4_000_000))
    w, h = r.image.size
    assert w * h <= 4_000_000 * 1.01 and "downscaled" in r.flags
    assert r.dpi < 300


def test_text_layer_and_usability(tmp_path):
    pdf = make_text_pdf(tmp_path / "a.pdf", [["A line of real born-digital text, long enough to count."]])
    text = text_layer(pdf, 1)
    assert text == "A line of real born-digital text, long enough to count."
    assert usable_text_layer(text)[0]
    assert not usable_text_layer("  x  ")[0]
    assert not usable_text_layer("\ufffd" * 100)[0]
    scan = make_scan_pdf(tmp_path / "s.pdf", [["no text layer here"]])
    assert text_layer(scan, 1) == ""


def test_text_layer_keeps_a_line_end_hyphen_as_printed(tmp_path):
    """PDFium hands a hyphen that ends a line back as the control character 0x02, with the line
    break gone ("Haupts\x02mann"): the record gets the hyphen and the break as printed."""
    pdf = make_text_pdf(tmp_path / "h.pdf", [["Der Haupts-", "mann befahl den Abmarsch", "der well-", "known man"]])
    text = text_layer(pdf, 1)
    assert "\x02" not in text
    assert text == "Der Haupts-\nmann befahl den Abmarsch\nder well-\nknown man"


def test_tiff_frames_are_pages(tmp_path):
    frames = [text_image([f"frame {i}"], (300, 400)) for i in range(3)]
    p = tmp_path / "t.tif"
    frames[0].save(p, save_all=True, append_images=frames[1:])
    assert count_pages(p) == 3
    r = render_page(p, 3, Sizing())
    assert r.image.size == (300, 400)
    with pytest.raises(BadInput, match="page 4 does not exist"):
        render_page(p, 4, Sizing())


def test_webp_and_png(tmp_path):
    img = text_image(["webp"], (200, 100))
    img.save(tmp_path / "a.webp")
    img.save(tmp_path / "a.png")
    assert count_pages(tmp_path / "a.webp") == 1
    assert render_page(tmp_path / "a.png", 1, Sizing(longest_side=100)).image.size == (100, 50)


@pytest.mark.parametrize(
    "name,content,reason",
    [
        ("c.pdf", b"%PDF-1.4 garbage", "corrupt PDF"), ("h.pdf", b"<html>", "not a PDF"),
        ("t.png", None, "truncated or corrupt image"),
        ("u.docx", b"PK", "unsupported file type"),
        ("missing.pdf", "absent", "file not found"),
    ],
)
def test_bad_inputs_raise_with_reasons(tmp_path, name, content, reason):
    p = tmp_path / name
    if content is None:
        text_image(["x"], (400, 400)).save(p)
        p.write_bytes(p.read_bytes()[: 300])
        with pytest.raises(BadInput, match=reason):
            count_pages(p)
            render_page(p, 1, Sizing())
        return
    if content != "absent":
        p.write_bytes(content)
    with pytest.raises(BadInput, match=reason):
        count_pages(p)


def test_encrypted_and_empty_pdfs(tmp_path):
    from reportlab.pdfgen import canvas

    enc = tmp_path / "enc.pdf"
    c = canvas.Canvas(str(enc), encrypt="secret")
    c.drawString(72, 720, "secret")
    c.showPage()
    c.save()
    with pytest.raises(BadInput, match="encrypted PDF"):
        count_pages(enc)
    empty = tmp_path / "empty.pdf"
    pdfium.PdfDocument.new().save(empty)
    with pytest.raises(BadInput, match="no pages"):
        count_pages(empty)


def test_blank_detection():
    assert is_blank(Image.new("L", (500, 700), 255))
    assert not is_blank(text_image(["ink on the page"]))


def test_a_few_short_lines_are_not_blank():
    from PIL import ImageDraw, ImageFont

    img = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=34)
    for i, line in enumerate(["Page 3", "see overleaf", "end"]):
        draw.text((200, 300 + 60 * i), line, fill=0, font=font)
    assert not is_blank(img)
    speck = Image.new("L", (1700, 2200), 250)
    speck.putpixel((10, 10), 0)
    assert is_blank(speck)
