"""ALTO 4.2, hOCR 1.2 and PAGE-XML 2019 of a document's laid pages, built with lxml. Checked
against the official schemas (ALTO, PAGE) in tests/library/test_formats.py; hOCR is read back by
OCRmyPDF's parser. Identifiers are the page number, block, line and word (p3_b1_l4_w2).

Coordinates are pixels of each page's master image (inputs/master.py: a scan PDF page's embedded
image, an image file's page at its own size), else of the page as rendered; each file says which
and at what resolution (ALTO: processingStepSettings; hOCR: scan_res; PAGE: imageXResolution)."""

from __future__ import annotations

from datetime import datetime, timezone

from lxml import etree

from .. import __version__
from ..runfolder.safe import safe_str
from .layout import LaidPage, union

ALTO_NS = "http://www.loc.gov/standards/alto/ns-v4#"
ALTO_SCHEMA = "http://www.loc.gov/standards/alto/v4/alto-4-2.xsd"
PAGE_NS = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"
PAGE_SCHEMA = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15/pagecontent.xsd"
XSI = "http://www.w3.org/2001/XMLSchema-instance"


def _geometry(box: tuple[int, int, int, int]) -> dict[str, str]:
    x0, y0, x1, y1 = box
    return {"HPOS": str(x0), "VPOS": str(y0), "WIDTH": str(x1 - x0), "HEIGHT": str(y1 - y0)}


def alto(pages: list[LaidPage], source: str) -> bytes:
    """One ALTO file of a document: a Page a page, pixels as the unit, word confidences (WC)
    where the engine gave them; a page without positions has its strings without coordinates."""
    source = safe_str(source)  # a file name may hold what XML cannot (the texts were made safe in their records)
    A = f"{{{ALTO_NS}}}"
    root = etree.Element(A + "alto", nsmap={None: ALTO_NS, "xsi": XSI}, SCHEMAVERSION="4.2")
    root.set(f"{{{XSI}}}schemaLocation", f"{ALTO_NS} {ALTO_SCHEMA}")
    desc = etree.SubElement(root, A + "Description")
    etree.SubElement(desc, A + "MeasurementUnit").text = "pixel"
    info = etree.SubElement(desc, A + "sourceImageInformation")
    etree.SubElement(info, A + "fileName").text = source
    step = etree.SubElement(desc, A + "Processing", ID="vlmocr")
    etree.SubElement(step, A + "processingDateTime").text = datetime.now(timezone.utc).isoformat(timespec="seconds")
    engines = sorted({p.source or p.engine for p in pages if p.source or p.engine})
    etree.SubElement(step, A + "processingStepDescription").text = "read by " + (", ".join(engines) or "nothing")
    # ALTO has no element for an image's resolution: which image each Page's pixels are, said here.
    etree.SubElement(step, A + "processingStepSettings").text = "coordinates in pixels of\n" + "\n".join(
        f"page {p.page}: {p.frame_said()}" for p in pages)
    software = etree.SubElement(step, A + "processingSoftware")
    etree.SubElement(software, A + "softwareName").text = "vlmocr"
    etree.SubElement(software, A + "softwareVersion").text = __version__
    layout = etree.SubElement(root, A + "Layout")
    for page in pages:
        pid = f"p{page.page}"
        el = etree.SubElement(layout, A + "Page", ID=pid, PHYSICAL_IMG_NR=str(page.page))
        width, height = page.frame_size()
        if width and height:
            el.set("WIDTH", str(width))
            el.set("HEIGHT", str(height))
        space = etree.SubElement(el, A + "PrintSpace")
        if width and height:
            space.attrib.update(_geometry((0, 0, width, height)))
        for b, (_, lines) in enumerate(page.blocks(), 1):
            block = etree.SubElement(space, A + "TextBlock", ID=f"{pid}_b{b}")
            if page.positioned:
                block.attrib.update(_geometry(page.placed(union([ln.box for ln in lines]))))
            for n, line in enumerate(lines, 1):
                lid = f"{pid}_b{b}_l{n}"
                tl = etree.SubElement(block, A + "TextLine", ID=lid)
                if page.positioned:
                    tl.attrib.update(_geometry(page.placed(line.box)))
                for k, (x0, y0, x1, y1, conf, text) in enumerate(line.words, 1):
                    if k > 1:
                        etree.SubElement(tl, A + "SP")
                    s = etree.SubElement(tl, A + "String", ID=f"{lid}_w{k}", CONTENT=text)
                    if page.positioned:
                        s.attrib.update(_geometry(page.placed((x0, y0, x1, y1))))
                    if conf is not None:
                        s.set("WC", f"{conf:.3f}")
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


def _bbox(box: tuple[int, int, int, int]) -> str:
    return "bbox {} {} {} {}".format(*box)


def hocr(pages: list[LaidPage], source: str, language: str | None = None) -> bytes:
    """One hOCR file of a document: an ocr_page a page (image, bbox, ppageno, scan_res), its
    blocks (ocr_carea), lines and words (x_wconf 0–100)."""
    source = safe_str(source)
    H = "{http://www.w3.org/1999/xhtml}"
    html = etree.Element(H + "html", nsmap={None: "http://www.w3.org/1999/xhtml"})
    if language:
        html.set("lang", language)
    head = etree.SubElement(html, H + "head")
    etree.SubElement(head, H + "title").text = source
    etree.SubElement(head, H + "meta", attrib={"http-equiv": "Content-Type", "content": "text/html;charset=utf-8"})
    etree.SubElement(head, H + "meta", name="ocr-system", content=f"vlmocr {__version__}")
    etree.SubElement(head, H + "meta", name="ocr-capabilities", content="ocr_page ocr_carea ocr_par ocr_line ocrx_word")
    body = etree.SubElement(html, H + "body")
    for page in pages:
        pid = f"page_{page.page}"
        title = f'image "{source}"; ' + _bbox((0, 0, *page.frame_size())) + f"; ppageno {page.page - 1}"
        dpi = page.frame_dpi()
        if dpi:
            title += f"; scan_res {round(dpi[0])} {round(dpi[1])}"
        div = etree.SubElement(body, H + "div", attrib={"class": "ocr_page", "id": pid, "title": title})
        for b, (_, lines) in enumerate(page.blocks(), 1):
            area = etree.SubElement(div, H + "div", attrib={"class": "ocr_carea", "id": f"{pid}_b{b}"})
            par = etree.SubElement(area, H + "p", attrib={"class": "ocr_par", "id": f"{pid}_b{b}_p"})
            if page.positioned:
                box = _bbox(page.placed(union([ln.box for ln in lines])))
                area.set("title", box)
                par.set("title", box)
            for n, line in enumerate(lines, 1):
                lid = f"{pid}_b{b}_l{n}"
                span = etree.SubElement(par, H + "span", attrib={"class": "ocr_line", "id": lid})
                if page.positioned:
                    span.set("title", _bbox(page.placed(line.box)))
                for k, (x0, y0, x1, y1, conf, text) in enumerate(line.words, 1):
                    word = etree.SubElement(span, H + "span", attrib={"class": "ocrx_word", "id": f"{lid}_w{k}"})
                    parts = [_bbox(page.placed((x0, y0, x1, y1)))] if page.positioned else []
                    if conf is not None:
                        parts.append(f"x_wconf {round(conf * 100)}")
                    if parts:
                        word.set("title", "; ".join(parts))
                    word.text = text
                    word.tail = " "
                span.tail = "\n"
    return b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n' + etree.tostring(
        html, encoding="UTF-8", pretty_print=True)


def _points(box: tuple[int, int, int, int]) -> str:
    x0, y0, x1, y1 = box
    return f"{x0},{y0} {x1},{y0} {x1},{y1} {x0},{y1}"


def pagexml(page: LaidPage, image: str) -> bytes:
    """PAGE-XML (2019-07-15) of one page: a TextRegion a block in the reading order, its lines
    and words with their boxes and text (TextEquiv at every level, word confidences where given);
    a page without positions is one region over the page holding its text."""
    image = safe_str(image)
    P = f"{{{PAGE_NS}}}"
    root = etree.Element(P + "PcGts", nsmap={None: PAGE_NS, "xsi": XSI})
    root.set(f"{{{XSI}}}schemaLocation", f"{PAGE_NS} {PAGE_SCHEMA}")
    meta = etree.SubElement(root, P + "Metadata")
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    etree.SubElement(meta, P + "Creator").text = f"vlmocr {__version__}"
    etree.SubElement(meta, P + "Created").text = now
    etree.SubElement(meta, P + "LastChange").text = now
    width, height = page.frame_size()
    el = etree.SubElement(root, P + "Page", imageFilename=image, imageWidth=str(width), imageHeight=str(height))
    dpi = page.frame_dpi()
    if dpi:
        el.set("imageXResolution", f"{dpi[0]:g}")
        el.set("imageYResolution", f"{dpi[1]:g}")
        el.set("imageResolutionUnit", "PPI")
    blocks = page.blocks() if page.positioned else [(0, page.lines)]
    order = etree.SubElement(etree.SubElement(el, P + "ReadingOrder"), P + "OrderedGroup", id="ro")
    for b in range(len(blocks)):
        etree.SubElement(order, P + "RegionRefIndexed", index=str(b), regionRef=f"r{b}")
    for b, (_, lines) in enumerate(blocks):
        region = etree.SubElement(el, P + "TextRegion", id=f"r{b}", type="paragraph")
        box = page.placed(union([ln.box for ln in lines])) if page.positioned else (0, 0, width, height)
        etree.SubElement(region, P + "Coords", points=_points(box))
        texts = []
        for n, line in enumerate(lines):
            text = " ".join(w[5] for w in line.words)
            texts.append(text)
            if not page.positioned:
                continue
            tl = etree.SubElement(region, P + "TextLine", id=f"r{b}_l{n}")
            etree.SubElement(tl, P + "Coords", points=_points(page.placed(line.box)))
            for k, (x0, y0, x1, y1, conf, word) in enumerate(line.words):
                w = etree.SubElement(tl, P + "Word", id=f"r{b}_l{n}_w{k}")
                etree.SubElement(w, P + "Coords", points=_points(page.placed((x0, y0, x1, y1))))
                equiv = etree.SubElement(w, P + "TextEquiv")
                if conf is not None:
                    equiv.set("conf", f"{conf:.3f}")
                etree.SubElement(equiv, P + "Unicode").text = word
            etree.SubElement(etree.SubElement(tl, P + "TextEquiv"), P + "Unicode").text = text
        etree.SubElement(etree.SubElement(region, P + "TextEquiv"), P + "Unicode").text = "\n".join(texts)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)
