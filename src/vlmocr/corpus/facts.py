"""What triage learns about each page without rendering it at full size (page sizes from the page
tree, text layers, image objects, scan resolution, rotation, spreads) and the language and script
of a document's text."""

from __future__ import annotations

import math
import statistics
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from ..exceptions import BadInput
from ..inputs.render import check_frame, image_dpi, is_djvu, open_pdf, pdfium_lock, text_layer, usable_text_layer
from ..languages import canonical_name
from ..text.textquality import WORD_RE, guess_language

LANG_SAMPLE_CHARS = 6_000  # a few hundred words settle a stopword vote
MIN_IMAGE_SHARE = 0.3  # an image covering this share of the page makes a scan page
SPREAD_WIDTH = 1.6  # × the document's median portrait width, at a similar height


# ---------------------------------------------------------------- per page


# The resolutions image software writes when it knows none (Photoshop and EXIF: 72; Windows: 96):
# a file declaring one says nothing about its scan, so triage shows the value as assumed.
SOFTWARE_DEFAULT_DPIS = (72, 96)


def assumed_dpi(dpi: float | None) -> bool:
    return dpi is not None and round(dpi) in SOFTWARE_DEFAULT_DPIS


@dataclass
class PageFacts:
    """What is known of one page. Sizes are in points as displayed (page rotation applied)."""

    page: int
    width: float | None = None
    height: float | None = None
    checked: bool = False
    kind: str = ""  # text | image | blank | other | bad (checked pages only)
    rotation: int = 0  # /Rotate of a PDF page, EXIF rotation of an image frame
    px: tuple[int, int] | None = None  # the dominant image's pixel size
    dpi: float | None = None
    dpi_assumed: bool = False  # an image file's declared dpi is a software default (assumed_dpi)
    text_reason: str = ""
    error: str = ""
    shape: str = ""  # "" | landscape | spread (filled in once the document's pages are known)

    def flags(self) -> list[str]:
        out = []
        if self.kind == "text":
            out.append("text layer")
        elif self.kind in ("blank", "bad"):
            out.append(self.kind)
        elif self.kind == "other":
            out.append("unusable text" if self.text_reason else "no text")
        if self.rotation:
            out.append(f"rot{self.rotation}")
        if self.shape == "landscape":
            out.append("rotated?")
        elif self.shape == "spread":
            out.append("spread?")
        return out


def pages_to_check(n: int, cap: int) -> list[int]:
    """1-based pages, at most `cap` of them (0 = all), spread evenly, always first and last."""
    if cap <= 0 or n <= cap:
        return list(range(1, n + 1))
    if cap == 1:
        return [1]
    return sorted({1 + round(i * (n - 1) / (cap - 1)) for i in range(cap)})


def _pdf_page(pdf: pdfium.PdfDocument, path: Path, facts: PageFacts, text: str) -> None:
    """Classify a checked PDF page whose text layer is `text`."""
    ok, reason = usable_text_layer(text)
    facts.text_reason = "" if ok or not text.strip() else reason
    with pdfium_lock:
        page = pdf[facts.page - 1]
        try:
            facts.rotation = page.get_rotation() % 360
            if ok:
                facts.kind = "text"
                return
            if pdfium_c.FPDFPage_CountObjects(page.raw) == 0:
                facts.kind = "blank"
                return
            area = (facts.width or 0) * (facts.height or 0)
            best: tuple[float, tuple[int, int], float] | None = None
            for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2):
                px = obj.get_px_size()
                a, b, c, d, _, _ = obj.get_matrix().get()
                w_pt, h_pt = math.hypot(a, b), math.hypot(c, d)  # the image's size on the page
                if not (px[0] and px[1] and w_pt > 0 and h_pt > 0):
                    continue
                shown = w_pt * h_pt
                if best is None or shown > best[0]:
                    dpi = (px[0] * 72 / w_pt + px[1] * 72 / h_pt) / 2
                    best = (shown, (int(px[0]), int(px[1])), dpi)
            if best is not None and area > 0 and best[0] >= MIN_IMAGE_SHARE * area:
                facts.kind = "image"
                facts.px = best[1]
                facts.dpi = best[2]
            else:
                facts.kind = "other"
        finally:
            page.close()


def pdf_facts(path: Path, n: int, check: list[int], sample: list[str]) -> tuple[list[PageFacts], str]:
    """Facts for every page of a PDF; returns them and the encryption note. The text of text
    pages goes to `sample` (up to LANG_SAMPLE_CHARS) for the language guess."""
    pdf = open_pdf(path)
    with pdfium_lock:
        encrypted = "permissions-only" if pdfium_c.FPDF_GetSecurityHandlerRevision(pdf.raw) >= 0 else ""
        facts = []
        for i in range(n):
            f = PageFacts(i + 1)
            try:
                f.width, f.height = pdf.get_page_size(i)
            except pdfium.PdfiumError:
                pass
            facts.append(f)
    for p in check:
        f = facts[p - 1]
        f.checked = True
        try:
            text = text_layer(path, p)
            _pdf_page(pdf, path, f, text)
            if f.kind == "text" and sum(map(len, sample)) < LANG_SAMPLE_CHARS:
                sample.append(text)
        except BadInput as exc:
            f.kind, f.error = "bad", exc.reason
        except pdfium.PdfiumError as exc:
            f.kind, f.error = "bad", f"cannot load page {p} ({exc})"
    return facts, encrypted


_EXIF_ROTATION = {3: 180, 6: 90, 8: 270, 5: 90, 7: 270}


def image_facts(path: Path, n: int, check: list[int]) -> tuple[list[PageFacts], float | None]:
    """Facts for every frame of an image file (headers only: nothing is decoded)."""
    if is_djvu(path):
        return djvu_facts(path, n, check)
    facts: list[PageFacts] = []
    dpi: float | None = None
    with Image.open(path) as img:
        orientation = 1
        # A PNG's EXIF may follow the image data: Pillow would decode the whole image to find it.
        if img.format != "PNG" or "exif" in img.info:
            try:
                orientation = int(img.getexif().get(0x0112, 1) or 1)
            except Exception:
                orientation = 1
        wanted = set(check)
        for i in range(n):
            f = PageFacts(i + 1, checked=(i + 1) in wanted)
            try:
                img.seek(i)
            except (EOFError, OSError, ValueError) as exc:
                f.kind, f.error, f.checked = "bad", f"cannot read frame {i + 1} ({exc})", True
                facts.append(f)
                continue
            w, h = img.size
            try:
                check_frame(w, h, i + 1, path)  # what `vlmocr run` will refuse, from the header
            except BadInput as exc:
                f.kind, f.error, f.checked = "bad", exc.reason, True
            rotation = _EXIF_ROTATION.get(orientation, 0) if i == 0 else 0
            if rotation in (90, 270):
                w, h = h, w
            frame_dpi = image_dpi(img)
            dpi = dpi or frame_dpi
            f.px = (w, h)
            f.rotation = rotation
            f.dpi = frame_dpi
            f.dpi_assumed = assumed_dpi(frame_dpi)
            if frame_dpi:
                f.width, f.height = w * 72 / frame_dpi, h * 72 / frame_dpi
            if f.checked and not f.kind:
                f.kind = "image"
            facts.append(f)
    return facts, dpi


def djvu_facts(path: Path, n: int, check: list[int]) -> tuple[list[PageFacts], float | None]:
    """Facts for every page of a DjVu file, from the pages' INFO chunks (one djvused process)."""
    from ..inputs.djvu import page_infos

    infos = page_infos(path, list(range(1, n + 1)))
    wanted = set(check)
    facts: list[PageFacts] = []
    for page in range(1, n + 1):
        f = PageFacts(page, checked=page in wanted)
        info = infos.get(page)
        if info is None:
            f.kind, f.error, f.checked = "bad", f"corrupt DjVu page {page} (no INFO chunk)", True
            facts.append(f)
            continue
        try:
            check_frame(info.width, info.height, page, path)
        except BadInput as exc:
            f.kind, f.error, f.checked = "bad", exc.reason, True
        f.px, f.dpi = (info.width, info.height), info.dpi
        f.dpi_assumed = assumed_dpi(info.dpi)
        if info.dpi:
            f.width, f.height = info.width * 72 / info.dpi, info.height * 72 / info.dpi
        if f.checked and not f.kind:
            f.kind = "image"
        facts.append(f)
    return facts, next((f.dpi for f in facts if f.dpi), None)


def mark_shapes(facts: list[PageFacts]) -> None:
    """Mark wide pages: a spread is about twice as wide as the document's portrait pages at a
    similar height; any other page wider than tall is landscape (rotated, or a wide plate)."""
    sized = [f for f in facts if f.width and f.height]
    if not sized and all(f.px for f in facts):
        sized = facts  # image files without DPI: compare pixel sizes instead
    def wh(f: PageFacts) -> tuple[float, float]:
        if f.width and f.height:
            return f.width, f.height
        assert f.px
        return float(f.px[0]), float(f.px[1])
    portrait = [wh(f) for f in sized if wh(f)[0] <= wh(f)[1]]
    med_w = statistics.median(w for w, _ in portrait) if portrait else None
    med_h = statistics.median(h for _, h in portrait) if portrait else None
    for f in sized:
        w, h = wh(f)
        if w <= h:
            continue
        if med_w and med_h and w >= SPREAD_WIDTH * med_w and abs(h - med_h) <= 0.15 * med_h:
            f.shape = "spread"
        else:
            f.shape = "landscape"


# ---------------------------------------------------------------- language


# Unicode character-name prefixes → ISO 15924: the script of a text layer's letters.
_SCRIPTS = (("LATIN", "Latn"), ("GREEK", "Grek"), ("CYRILLIC", "Cyrl"), ("HEBREW", "Hebr"), ("ARABIC", "Arab"),
            ("CJK", "Hani"), ("HIRAGANA", "Jpan"), ("KATAKANA", "Jpan"), ("HANGUL", "Kore"),
            ("DEVANAGARI", "Deva"), ("THAI", "Thai"), ("GEORGIAN", "Geor"), ("ARMENIAN", "Armn"))
MIN_SCRIPT_LETTERS = 50


def text_script(text: str) -> str:
    """ISO 15924 code of the script most of the text's letters are in; '' for fewer than
    MIN_SCRIPT_LETTERS letters. A text layer spells Fraktur with Latin letters: it says Latn."""
    counts: Counter[str] = Counter()
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            for prefix, code in _SCRIPTS:
                if name.startswith(prefix):
                    counts[code] += 1
                    break
    if sum(counts.values()) < MIN_SCRIPT_LETTERS:
        return ""
    return counts.most_common(1)[0][0]


def greek_language(text: str) -> str:
    """'grc' for polytonic Greek (letters of the Greek Extended block: breathings, the iota
    subscript), else 'ell'. Triage's step for a Greek-script text the guesser names no Greek for
    (too few stopwords, or a Latin apparatus outvoting them): its letters still tell which data
    reads it."""
    return "grc" if any("\u1f00" <= ch <= "\u1fff" for ch in text) else "ell"


def text_language(text: str) -> str:
    """Triage's `lang` column: the language textquality.guess_language finds — the one guesser, the
    one the quality signal and cleaning judge pages with — as the Tesseract name `--lang` takes
    ('de' → 'deu', 'grc' stays); 'und' when it finds none (too few words, no stopword list);
    '' when the text has no words at all."""
    if not WORD_RE.search(text):
        return ""
    code = guess_language(text)
    return canonical_name(code) if code else "und"
