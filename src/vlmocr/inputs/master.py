"""The image a repository keeps for a page — its master — and how the page as rendered maps onto it.

A library that lays ALTO, hOCR or PAGE-XML over its page images needs the coordinates in those
images' own pixels, not in the pixels of the copy vlmocr rendered to read (a PDF page drawn at
200 dpi, an image frame scaled within the pixel cap). A page's master is:

- for a PDF page that shows one image over (nearly) all of it — a scan wrapped in a PDF — that
  image at its own size and resolution (what `pdfimages` extracts), however the PDF places,
  scales, crops or turns it (`/Rotate`, the image's matrix, Form XObjects around it);
- for an image file, its frame at its own size (turned as its EXIF orientation says: as any
  viewer shows it).

A PDF page drawn from several images (strips), vector text, or an image over only part of it has
no master: its coordinates stay those of the page rendered at the stated dpi.

`Master.map` is an affine map (a, b, c, d, e, f) — x' = a·u + c·v + e, y' = b·u + d·v + f —
from a point of the rendered page as fractions (u = x / width, v = y / height) to the master's
pixels, so it holds whatever dpi the page was rendered at."""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

# The one image must show over this share of the page (a scan placed on a larger sheet counts), and no other image over OTHER_IMAGE_SHARE
# (a library stamp or a colour chart beside a scan is allowed; scanned strips are not a master).
MASTER_SHARE = 0.75
OTHER_IMAGE_SHARE = 0.05
MAX_OBJECTS = 20_000  # objects walked looking for the image (a scan page has a handful)
MAX_FORM_DEPTH = 4
_DEVICE = 1_000_000  # the virtual device pdfium maps a page onto (integer pixels: fine enough)

Affine = tuple[float, float, float, float, float, float]


@dataclass(frozen=True)
class Master:
    width: int
    height: int
    dpi: tuple[float, float] | None  # pixels per inch across and down, when known
    of: str  # "pdf image": the PDF page's one image; "image file": the file's frame
    map: Affine

    def to_json(self) -> dict[str, Any]:
        return {"width": self.width, "height": self.height, "of": self.of,
                "dpi": [round(self.dpi[0], 2), round(self.dpi[1], 2)] if self.dpi else None,
                "map": [round(v, 6) for v in self.map]}

    @classmethod
    def from_json(cls, d: Any) -> "Master | None":
        """A record's `master`, None when absent or not one (an older or hand-edited record)."""
        try:
            dpi = d.get("dpi")
            m = tuple(float(v) for v in d["map"])
            if len(m) != 6 or int(d["width"]) < 1 or int(d["height"]) < 1:
                return None
            return cls(int(d["width"]), int(d["height"]),
                       (float(dpi[0]), float(dpi[1])) if dpi else None, str(d.get("of", "")),
                       (m[0], m[1], m[2], m[3], m[4], m[5]))
        except (AttributeError, KeyError, TypeError, ValueError, IndexError):
            return None

    def box(self, box: tuple[int, int, int, int], width: int, height: int) -> tuple[int, int, int, int]:
        """A box in the pixels of the page as rendered (`width` × `height`) → the master's pixels:
        the box around its four corners mapped, within the image."""
        x0, y0, x1, y1 = box
        a, b, c, d, e, f = self.map
        xs, ys = [], []
        for x, y in ((x0, y0), (x1, y0), (x0, y1), (x1, y1)):
            u, v = x / width, y / height
            xs.append(a * u + c * v + e)
            ys.append(b * u + d * v + f)
        return (max(0, min(self.width, math.floor(min(xs)))), max(0, min(self.height, math.floor(min(ys)))),
                max(0, min(self.width, math.ceil(max(xs)))), max(0, min(self.height, math.ceil(max(ys)))))


def _then(m1: Affine, m2: Affine) -> Affine:
    """m1, then m2 (PDF's row-vector convention: p · m1 · m2)."""
    a1, b1, c1, d1, e1, f1 = m1
    a2, b2, c2, d2, e2, f2 = m2
    return (a1 * a2 + b1 * c2, a1 * b2 + b1 * d2, c1 * a2 + d1 * c2, c1 * b2 + d1 * d2,
            e1 * a2 + f1 * c2 + e2, e1 * b2 + f1 * d2 + f2)


def _inverse(m: Affine) -> Affine | None:
    a, b, c, d, e, f = m
    det = a * d - b * c
    if abs(det) < 1e-12:
        return None
    ia, ib, ic, id_ = d / det, -b / det, -c / det, a / det
    return ia, ib, ic, id_, -(e * ia + f * ic), -(e * ib + f * id_)


def image_file_master(width: int, height: int, dpi: float | None) -> Master:
    """An image file's frame (as shown, EXIF turn applied): a page rendered from it at any size
    maps onto it by scale alone."""
    return Master(width, height, (dpi, dpi) if dpi else None, "image file",
                  (float(width), 0.0, 0.0, float(height), 0.0, 0.0))


def _matrix(obj: Any) -> Affine:
    m = pdfium_c.FS_MATRIX()
    if not pdfium_c.FPDFPageObj_GetMatrix(obj, ctypes.byref(m)):
        raise pdfium.PdfiumError("FPDFPageObj_GetMatrix failed")
    return m.a, m.b, m.c, m.d, m.e, m.f


def _images(page: pdfium.PdfPage) -> list[tuple[Any, Affine]] | None:
    """The page's image objects with their matrices into page space, through the Form XObjects
    that hold them; None past MAX_OBJECTS (a page of vector drawing is no scan: not walked on)."""
    found: list[tuple[Any, Affine]] = []
    seen = 0
    stack: list[tuple[Any, Affine | None, int]] = [(None, None, 0)]  # (form, its matrix, depth)
    while stack:
        form, outer, depth = stack.pop()
        n = pdfium_c.FPDFFormObj_CountObjects(form) if form is not None else pdfium_c.FPDFPage_CountObjects(page.raw)
        seen += max(n, 0)
        if seen > MAX_OBJECTS:
            return None
        for i in range(max(n, 0)):
            obj = pdfium_c.FPDFFormObj_GetObject(form, i) if form is not None else pdfium_c.FPDFPage_GetObject(page.raw, i)
            if not obj:
                continue
            kind = pdfium_c.FPDFPageObj_GetType(obj)
            if kind not in (pdfium_c.FPDF_PAGEOBJ_IMAGE, pdfium_c.FPDF_PAGEOBJ_FORM):
                continue
            m = _matrix(obj)
            if outer is not None:
                m = _then(m, outer)
            if kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
                found.append((obj, m))
            elif depth < MAX_FORM_DEPTH:
                stack.append((obj, m, depth + 1))
    return found


def _page_from_fraction(page: pdfium.PdfPage) -> Affine:
    """(u, v) fractions of the page as pdfium renders it (its /Rotate and crop box applied) →
    PDF user space, from pdfium's own device mapping."""
    out = []
    for dx, dy in ((0, 0), (_DEVICE, 0), (0, _DEVICE)):
        px, py = ctypes.c_double(), ctypes.c_double()
        if not pdfium_c.FPDF_DeviceToPage(page.raw, 0, 0, _DEVICE, _DEVICE, 0, dx, dy,
                                          ctypes.byref(px), ctypes.byref(py)):
            raise pdfium.PdfiumError("FPDF_DeviceToPage failed")
        out.append((px.value, py.value))
    (x0, y0), (xu, yu), (xv, yv) = out
    return xu - x0, yu - y0, xv - x0, yv - y0, x0, y0


def pdf_page_master(page: pdfium.PdfPage) -> Master | None:
    """The master of an open PDF page (the caller holds pdfium's lock), None when it has none."""
    w_pt, h_pt = page.get_size()
    area = w_pt * h_pt
    if area <= 0:
        return None
    images = _images(page)
    if not images:
        return None
    shown = sorted(((abs(m[0] * m[3] - m[1] * m[2]), obj, m) for obj, m in images), key=lambda s: -s[0])
    big, obj, m = shown[0]
    if big < MASTER_SHARE * area or any(s[0] >= OTHER_IMAGE_SHARE * area for s in shown[1:]):
        return None
    w_px, h_px = ctypes.c_uint(), ctypes.c_uint()
    if not pdfium_c.FPDFImageObj_GetImagePixelSize(obj, ctypes.byref(w_px), ctypes.byref(h_px)):
        return None
    pw, ph = w_px.value, h_px.value
    inverse = _inverse(m)
    if not (pw and ph) or inverse is None:
        return None
    # The image's unit square → its pixels: row 0 at the top (PDF draws the first row at y = 1).
    to_pixels: Affine = (float(pw), 0.0, 0.0, -float(ph), 0.0, float(ph))
    affine = _then(_then(_page_from_fraction(page), inverse), to_pixels)
    dpi = (pw * 72 / math.hypot(m[0], m[1]), ph * 72 / math.hypot(m[2], m[3]))
    return Master(int(pw), int(ph), dpi, "pdf image", affine)
