"""A corpus of every kind of document triage must tell apart, made on the fly (tests of triage,
plan and manifest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image

from support.documents import make_scan_pdf, make_text_pdf, page_lines, text_image

ENG = ["The history of the town is told in the records of the council and the church,",
       "which were kept by the clerk for more than two hundred years and are now in the archive."]
DEU = ["Die Geschichte der Stadt ist in den Akten des Rates und der Kirche überliefert, die von dem",
       "Schreiber über mehr als zweihundert Jahre geführt wurden und sich nun im Archiv befinden."]
FRA = ["L'histoire de la ville est racontée dans les registres du conseil et de l'église, qui ont",
       "été tenus par le greffier pendant plus de deux cents ans et qui sont maintenant aux archives."]


def build_corpus(d: Path) -> Path:
    """Every kind of document triage must tell apart. Returns `d`."""
    from reportlab.lib import pdfencrypt
    from reportlab.lib.pagesizes import A4, landscape
    from reportlab.pdfgen import canvas

    d.mkdir(parents=True, exist_ok=True)
    make_text_pdf(d / "born.pdf", [ENG * 3, ENG * 3])  # born-digital, 2 pages A4
    make_text_pdf(d / "deutsch.pdf", [DEU * 3])
    make_text_pdf(d / "francais.pdf", [FRA * 3])
    make_scan_pdf(d / "scan.pdf", [page_lines(1, p) for p in (1, 2, 3)], size=(850, 1100))  # 100 dpi letter
    # mixed: text, a scanned page, a blank page, a landscape page, a /Rotate 90 page
    c = canvas.Canvas(str(d / "parts.pdf"), pagesize=A4)
    for i, line in enumerate(ENG * 3):
        c.drawString(72, 700 - 18 * i, line)
    c.showPage()
    c.showPage()  # blank: a page without any content
    c.setPageSize(landscape(A4))
    c.drawString(72, 400, " ".join(ENG))
    c.showPage()
    c.setPageSize(A4)
    c.drawString(72, 700, " ".join(ENG))
    c.showPage()
    c.save()
    mixed, scan = pdfium.PdfDocument(str(d / "parts.pdf")), pdfium.PdfDocument(str(d / "scan.pdf"))
    mixed.import_pages(scan, [0], index=1)
    mixed[4].set_rotation(90)
    mixed.save(str(d / "mixed.pdf"))
    mixed.close()
    scan.close()
    (d / "parts.pdf").unlink()
    # a scanned book at 150 dpi: a page, a two-page spread, an empty page of white paper
    book = [text_image(page_lines(4, 1), (600, 900)), text_image(page_lines(4, 2), (1200, 900)),
            Image.new("L", (600, 900), 255)]
    book[0].save(d / "book.pdf", save_all=True, append_images=book[1:], resolution=150)
    locked = canvas.Canvas(str(d / "locked.pdf"), encrypt=pdfencrypt.StandardEncryption("secret", ownerPassword="o"))
    locked.drawString(72, 700, "a secret")
    locked.showPage()
    locked.save()
    perm = canvas.Canvas(str(d / "perm.pdf"), encrypt=pdfencrypt.StandardEncryption("", ownerPassword="o", canPrint=0))
    for i, line in enumerate(ENG * 2):
        perm.drawString(72, 700 - 18 * i, line)
    perm.showPage()
    perm.save()
    sym = canvas.Canvas(str(d / "symbols.pdf"), pagesize=A4)
    sym.drawString(72, 700, "#### ---- **** ++++ //// ==== %%%% ~~~~ :::: ;;;; " * 2)
    sym.showPage()
    sym.save()
    (d / "corrupt.pdf").write_bytes(b"this is not a pdf at all\n" * 10)
    data = (d / "born.pdf").read_bytes()
    (d / "truncated.pdf").write_bytes(data[: len(data) // 2])
    doc = pdfium.PdfDocument.new()
    doc.save(str(d / "empty.pdf"))
    doc.close()
    shutil.copy(d / "born.pdf", d / "copy_of_born.pdf")  # byte-identical, sorted after born.pdf
    text_image(page_lines(2, 1), (1240, 1754)).save(d / "photo.png", dpi=(150, 150))
    frames = [text_image(page_lines(3, p), (1700, 2200)) for p in (1, 2)]
    frames[0].save(d / "multi.tif", save_all=True, append_images=frames[1:], dpi=(200, 200))
    return d
