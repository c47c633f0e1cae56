"""A searchable PDF of a document: the pages as scanned, untouched, each with an invisible text
layer of its words where they lie, in reading order.

The page images are not re-encoded: a PDF input keeps its own pages (its objects are copied as
stored: pikepdf), an image input is wrapped as it is (img2pdf: JPEG and JPEG 2000 passed through,
PNG and TIFF without loss; a 16-bit master img2pdf cannot take is re-encoded losslessly, and
said). The text layer is drawn by OCRmyPDF's renderer (fpdf2, with OCRmyPDF's fonts: Noto for the
scripts it knows, its glyphless font for the rest) from the page's words, one text-only page a
page, laid over the scan as a form XObject
(pikepdf's add_overlay) scaled to the page: the words' pixel boxes land where they lie whatever
the page's size in points. A page without positions has its lines spread down the page (its text
found by search, not highlighted in place); the export's notes count them."""

from __future__ import annotations

import contextlib
import functools
import io
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..exceptions import UsageError
from .layout import LaidPage, by_block, union

if TYPE_CHECKING:
    from ocrmypdf.font import MultiFontManager
    from ocrmypdf.hocrtransform import OcrElement

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".jp2", ".j2k", ".gif", ".bmp", ".webp"}


def _element_tree(page: LaidPage, width: int, height: int) -> "OcrElement":
    """OCRmyPDF's OcrElement tree of one page: paragraphs (blocks), lines, words."""
    from ocrmypdf.hocrtransform import BoundingBox, OcrClass, OcrElement

    def box(b: tuple[int, int, int, int]) -> BoundingBox:
        return BoundingBox(left=b[0], top=b[1], right=b[2], bottom=b[3])

    lines = page.lines if page.positioned else _spread(page.lines, width, height)
    paragraphs = []
    for _, block_lines in by_block(lines):
        children, boxes = [], []
        for line in block_lines:
            if line.box[3] <= line.box[1] or line.box[2] <= line.box[0]:
                continue
            words = [OcrElement(ocr_class=OcrClass.WORD, bbox=box(w[:4]), text=w[5], confidence=w[4])
                     for w in line.words if w[2] > w[0] and w[3] > w[1]]
            if words:
                children.append(OcrElement(ocr_class=OcrClass.LINE, bbox=box(line.box), children=words))
                boxes.append(line.box)
        if children:
            paragraphs.append(OcrElement(ocr_class=OcrClass.PARAGRAPH, bbox=box(union(boxes)), children=children))
    return OcrElement(ocr_class=OcrClass.PAGE, bbox=BoundingBox(left=0, top=0, right=width, bottom=height),
                      children=paragraphs)


def _spread(lines: list, width: int, height: int) -> list:
    """Lines without positions laid down the page, each word given a share of its line by its
    letters: searchable, not placed."""
    from ..positions.lines import spread
    from ..runfolder.record import Line

    if not lines:
        return []
    pitch = min(height * 0.9 / len(lines), height / 40)
    out = []
    for i, line in enumerate(lines):
        box = (int(width * 0.05), int(height * 0.05 + i * pitch), int(width * 0.95), int(height * 0.05 + (i + 0.8) * pitch))
        out.append(Line(box=box, words=spread(box, " ".join(w[5] for w in line.words)), block=0))
    return out


def _flattened(source: Path) -> list[bytes]:
    """The frames of an image img2pdf cannot embed as they are, as lossless 8-bit PNGs, one a
    page: what its pixels mean (inputs/pixels.engine_mode: 16 bits stretched, alpha on white)."""
    from PIL import Image, ImageSequence

    from ..inputs.pixels import engine_mode

    pages = []
    with Image.open(source) as im:
        for frame in ImageSequence.Iterator(im):
            buf = io.BytesIO()
            engine_mode(frame.copy())[0].save(buf, format="PNG")
            pages.append(buf.getvalue())
    return pages


def _base_pdf(source: Path, notes: list[str]) -> object:
    """The scan as a PDF whose page images are the input's bytes (pikepdf.Pdf)."""
    import pikepdf

    if source.suffix.lower() == ".pdf":
        return pikepdf.open(source)
    if source.suffix.lower() in IMAGE_SUFFIXES:
        import logging

        import img2pdf

        logging.getLogger("img2pdf").setLevel(logging.ERROR)  # its notes (an alpha channel kept as a soft mask) are not ours

        try:
            data = img2pdf.convert(str(source), rotation=img2pdf.Rotation.ifvalid)
        except Exception:  # img2pdf refuses what it cannot embed as it is (an alpha channel, 16 bits…)
            data = img2pdf.convert(_flattened(source))
            notes.append(f"{source.name}: its image re-encoded for the PDF (lossless PNG: alpha flattened on "
                         "white, 8 bits a channel)")
        return pikepdf.open(io.BytesIO(data))
    raise UsageError(f"{source}: a searchable PDF is made from PDF and image inputs only")


@functools.lru_cache(maxsize=1)
def _fonts() -> "MultiFontManager":
    """OCRmyPDF's fonts (Noto for the scripts it knows, its glyphless font for the rest), loaded
    once per process: an export writes many documents."""
    import ocrmypdf
    from ocrmypdf.font import MultiFontManager as Fonts

    return Fonts(Path(ocrmypdf.__file__).parent / "data")


@contextlib.contextmanager
def _font_warnings() -> Iterator[list[str]]:
    """OCRmyPDF's warnings that a word has characters no font of its draws, kept from the log
    (they name no document or page, and point at a web download): the caller says it better."""
    import logging

    warned: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warned.append(record.getMessage())

    # OCRmyPDF's font choice, and fpdf2's "Font … is missing the following glyphs" as it writes.
    loggers = [logging.getLogger(n) for n in ("ocrmypdf.font.multi_font_manager", "fpdf.output")]
    handler, propagate = Keep(logging.WARNING), [lg.propagate for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
    try:
        yield warned
    finally:
        for lg, was in zip(loggers, propagate):
            lg.removeHandler(handler)
            lg.propagate = was


def _undrawable_note(name: str, pages: list[LaidPage]) -> str:
    """The export's note on characters no font here draws: which, and on which pages."""
    fonts = _fonts()
    names = list(fonts.get_all_fonts())

    @functools.lru_cache(maxsize=None)
    def drawn(ch: str) -> bool:
        return ch.isascii() or any(fonts.has_all_glyphs(n, ch) for n in names)

    found: dict[int, set[str]] = {}
    for laid in pages:
        for line in laid.lines:
            for word in line.words:
                missing = {ch for ch in word[5] if not ch.isspace() and not drawn(ch)}
                if missing:
                    found.setdefault(laid.page, set()).update(missing)
    chars = "".join(sorted(set().union(*found.values()))) if found else "?"
    where = ", ".join(str(p) for p in sorted(found)) or "?"
    return (f"{name}: page(s) {where} hold characters no installed font draws ({chars!r}): written as invisible "
            "text, searchable and copyable, blank when highlighted")


@dataclass(frozen=True)
class PdfWritten:
    unplaced: int  # pages without positions: their lines spread, not placed
    pdfa: bool  # declared PDF/A-2b and passed pikepdf's PDF/A check on the bytes written
    why_not: str = ""  # why it is a plain PDF (the check's first finding)


def searchable_pdf(pages: list[LaidPage], source: Path, out: Path, notes: list[str] | None = None) -> PdfWritten:
    """Write `out`: `source`'s pages with their text layers, as PDF/A-2b where the input allows
    (pikepdf.pdfa: output intent, XMP, then the bytes written are checked; an input that cannot
    pass — a transparency group, an LZW stream, a font not embedded — stays a plain PDF, and says
    why)."""
    import pikepdf
    from ocrmypdf.fpdf_renderer import Fpdf2MultiPageRenderer
    from pikepdf.pdfa import Flavour, PdfaError, save

    base = _base_pdf(source, notes if notes is not None else [])
    assert isinstance(base, pikepdf.Pdf)
    unplaced = 0
    with base, tempfile.TemporaryDirectory(prefix="vlmocr-pdf-") as tmp:
        data = []
        targets = []
        for laid in pages:
            if not 1 <= laid.page <= len(base.pages) or laid.engine == "textlayer":
                continue  # (a page read from its own text layer has its text already)
            target = base.pages[laid.page - 1]
            box = target.trimbox if "/TrimBox" in target.obj else target.mediabox
            width_pt = float(box[2]) - float(box[0])
            if int(target.obj.get("/Rotate", 0)) % 180:
                width_pt = float(box[3]) - float(box[1])
            width, height = laid.width, laid.height
            if not width or not height:
                continue
            unplaced += 0 if laid.positioned else 1
            data.append((laid.page, _element_tree(laid, width, height), width * 72.0 / width_pt))
            targets.append(target)
        if data:
            layer = Path(tmp) / "text.pdf"
            with _font_warnings() as warned:
                Fpdf2MultiPageRenderer(data, _fonts(), invisible_text=True).render(layer)
            if warned and notes is not None:
                notes.append(_undrawable_note(out.name, pages))
            with pikepdf.open(layer) as text:
                for target, text_page in zip(targets, text.pages):
                    target.add_overlay(text_page, None)  # None: over the page's trim/crop/media box
        plain = Path(tmp) / "plain.pdf"
        base.save(plain)
        # PDF/A is tried on the plain file reopened: a failed attempt has already declared PDF/A
        # in the document it prepared, and that claim must not reach the plain copy.
        try:
            with pikepdf.open(plain) as pdf:
                save(pdf, out, Flavour.PDFA_2B)
            return PdfWritten(unplaced, True)
        except PdfaError as exc:
            shutil.copyfile(plain, out)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return PdfWritten(unplaced, False, first[:200])
