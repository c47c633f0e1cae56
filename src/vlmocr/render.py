"""Pages → images (pypdfium2 for PDF, Pillow for PNG/JPEG/TIFF/WebP frames), and text layers.

Every failure to open or render becomes `BadInput` with a reason a person understands; the
scheduler turns that into a `bad_input` record and goes on with the other pages."""

from __future__ import annotations

import io
import re
import threading
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image, ImageOps

from .exceptions import BadInput
from .sources import IMAGE_EXTS, PDF_EXTS

DEFAULT_DPI = 200.0
DEFAULT_MAX_PIXELS = 25_000_000  # ≈ A3 at 300 dpi; an A0 poster is scaled down to this
HARD_MAX_IMAGE_PIXELS = 400_000_000  # larger image files are refused instead of decoded

# We enforce our own limits; Pillow's bomb check would turn a big scan into an exception.
Image.MAX_IMAGE_PIXELS = HARD_MAX_IMAGE_PIXELS
warnings.simplefilter("ignore", Image.DecompressionBombWarning)


@dataclass(frozen=True)
class Sizing:
    """How large a page image should be. `longest_side` wins over `dpi` when both are set."""

    dpi: float | None = DEFAULT_DPI
    longest_side: int | None = None
    max_pixels: int = DEFAULT_MAX_PIXELS

    def as_dict(self) -> dict:
        return {"dpi": self.dpi, "longest_side": self.longest_side, "max_pixels": self.max_pixels}


@dataclass
class Rendered:
    image: Image.Image
    dpi: float | None
    flags: list[str] = field(default_factory=list)
    # The file itself shows exactly this image (a single-frame image file, not resized or
    # turned): an engine with its own decoder may read the file instead of a re-encoded copy.
    same_as_file: Path | None = None


# ---------------------------------------------------------------- opening documents

_lock = threading.Lock()  # pdfium is not thread-safe; workers are processes, but be safe


def _pdf_error(path: Path, exc: Exception) -> BadInput:
    """Name the reason from the file itself: pdfium's error code is process-global and can
    be stale (a zero-page PDF reports 'Success', or the previous file's 'password')."""
    msg = str(exc)
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(1024)
            fh.seek(max(0, size - 2_000_000))
            tail = fh.read()
    except OSError as err:
        return BadInput(f"cannot read {path.name}: {err.strerror}")
    if not head.lstrip().startswith(b"%PDF"):
        return BadInput(f"corrupt or not a PDF (no %PDF header): {path.name}")
    if b"/Encrypt" in tail:
        return BadInput(f"encrypted PDF (a password is required): {path.name}")
    if re.search(rb"/Type\s*/Pages\b", tail) and re.search(rb"/Count\s+0\b", tail) and not re.search(rb"/Count\s+[1-9]", tail):
        return BadInput(f"PDF has no pages: {path.name}")
    return BadInput(f"corrupt PDF ({msg.replace('Failed to load document ', '')}): {path.name}")


@lru_cache(maxsize=2)
def _open_pdf_cached(path: str, mtime_ns: int, size: int) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        raise _pdf_error(Path(path), exc) from None


def open_pdf(path: Path) -> pdfium.PdfDocument:
    """Open (or reuse the worker's open copy of) a PDF; the cache key includes size and mtime
    so a file replaced between runs is never read from a stale handle."""
    st = _stat(path)
    return _open_pdf_cached(str(path), st.st_mtime_ns, st.st_size)


def _stat(path: Path):
    try:
        st = path.stat()
    except FileNotFoundError:
        raise BadInput(f"file not found: {path}") from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    if not path.is_file():
        raise BadInput(f"not a regular file: {path}")
    return st


def kind_of(path: Path) -> str:
    ext = path.suffix.lower()
    if ext in PDF_EXTS:
        return "pdf"
    if ext in IMAGE_EXTS:
        return "image"
    return "unsupported"


def _open_image(path: Path) -> Image.Image:
    _stat(path)
    try:
        img = Image.open(path)
    except Image.DecompressionBombError:
        raise BadInput(f"image larger than {HARD_MAX_IMAGE_PIXELS // 1_000_000} MP: {path.name}") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise BadInput(f"unreadable image ({exc}): {path.name}") from None
    w, h = img.size
    if w * h > HARD_MAX_IMAGE_PIXELS:
        raise BadInput(f"image of {w}x{h} px exceeds the {HARD_MAX_IMAGE_PIXELS // 1_000_000} MP limit: {path.name}")
    return img


def count_pages(path: Path) -> int:
    """Pages in a document; raises BadInput for anything unreadable (never returns 0 silently)."""
    kind = kind_of(path)
    if kind == "unsupported":
        _stat(path)
        raise BadInput(f"unsupported file type {path.suffix or '(none)'!r}: {path.name}")
    if kind == "pdf":
        with _lock:
            pdf = open_pdf(path)
            n = len(pdf)
        if n == 0:
            raise BadInput(f"PDF has no pages: {path.name}")
        return n
    img = _open_image(path)
    try:
        return int(getattr(img, "n_frames", 1) or 1)
    finally:
        img.close()


# ---------------------------------------------------------------- rendering

def _scale_for(w_pt: float, h_pt: float, sizing: Sizing) -> tuple[float, list[str]]:
    if sizing.longest_side:
        scale = sizing.longest_side / max(w_pt, h_pt)
    else:
        scale = (sizing.dpi or DEFAULT_DPI) / 72.0
    flags: list[str] = []
    pixels = (w_pt * scale) * (h_pt * scale)
    if pixels > sizing.max_pixels:
        scale *= (sizing.max_pixels / pixels) ** 0.5
        flags.append("downscaled")
    return scale, flags


def render_page(path: Path, page: int, sizing: Sizing) -> Rendered:
    """Render 1-based `page` of a PDF or image file to an RGB or L image within the pixel cap."""
    kind = kind_of(path)
    if kind == "pdf":
        with _lock:
            pdf = open_pdf(path)
            if not 1 <= page <= len(pdf):
                raise BadInput(f"page {page} does not exist (the PDF has {len(pdf)} pages): {path.name}")
            try:
                pg = pdf[page - 1]
                w_pt, h_pt = pg.get_size()
                if w_pt <= 0 or h_pt <= 0:
                    raise BadInput(f"page {page} has no size: {path.name}")
                scale, flags = _scale_for(w_pt, h_pt, sizing)
                bitmap = pg.render(scale=scale, rotation=0, may_draw_forms=True)
                img = bitmap.to_pil()
                if img.mode not in ("RGB", "L"):
                    img = img.convert("RGB")
            except pdfium.PdfiumError as exc:
                raise BadInput(f"cannot render page {page} ({exc}): {path.name}") from None
        return Rendered(img, round(scale * 72.0, 2), flags)
    if kind == "image":
        return _render_image(path, page, sizing)
    raise BadInput(f"unsupported file type {path.suffix or '(none)'!r}: {path.name}")


def _render_image(path: Path, page: int, sizing: Sizing) -> Rendered:
    img = _open_image(path)
    try:
        n = int(getattr(img, "n_frames", 1) or 1)
        if not 1 <= page <= n:
            raise BadInput(f"page {page} does not exist (the image has {n} frames): {path.name}")
        try:
            img.seek(page - 1)
            img.load()
            frame = ImageOps.exif_transpose(img)
            turned = frame is not img and img.getexif().get(0x0112, 1) not in (0, 1)
        except (OSError, ValueError, SyntaxError) as exc:
            raise BadInput(f"truncated or corrupt image ({exc}): {path.name} frame {page}") from None
        src_dpi = image_dpi(img)
        frame = frame.convert("L") if frame.mode in ("1", "L", "I;16", "I", "F", "LA") else frame.convert("RGB")
    finally:
        img.close()
    flags: list[str] = []
    w, h = frame.size
    target = 1.0
    if sizing.longest_side:
        target = sizing.longest_side / max(w, h)
    if w * h * target * target > sizing.max_pixels:
        target = (sizing.max_pixels / (w * h)) ** 0.5
        flags.append("downscaled")
    if abs(target - 1.0) > 1e-3:
        frame = frame.resize((max(1, round(w * target)), max(1, round(h * target))), Image.Resampling.LANCZOS)
    dpi = round(src_dpi * target, 2) if src_dpi else None
    untouched = n == 1 and abs(target - 1.0) <= 1e-3 and not turned
    return Rendered(frame, dpi, flags, same_as_file=path if untouched else None)


def image_dpi(img: Image.Image) -> float | None:
    """The scan resolution an image file declares (None when absent or nonsense)."""
    dpi = img.info.get("dpi")
    try:
        if dpi and float(dpi[0]) > 1:
            return float(dpi[0])
    except (TypeError, ValueError, IndexError):
        pass
    return None


# ---------------------------------------------------------------- text layer

def text_layer(path: Path, page: int) -> str:
    """The PDF text layer of a page ('' for images and pages without one)."""
    if kind_of(path) != "pdf":
        return ""
    with _lock:
        pdf = open_pdf(path)
        if not 1 <= page <= len(pdf):
            raise BadInput(f"page {page} does not exist (the PDF has {len(pdf)} pages): {path.name}")
        try:
            tp = pdf[page - 1].get_textpage()
            text = tp.get_text_bounded()
        except pdfium.PdfiumError as exc:
            raise BadInput(f"cannot read the text layer of page {page} ({exc}): {path.name}") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


MIN_TEXT_CHARS = 40
_WORDISH = re.compile(r"\w")


def usable_text_layer(text: str) -> tuple[bool, str]:
    """Is this text layer worth trusting instead of OCR? Returns (verdict, reason).

    A page counts when it has enough characters and they are mostly letters/digits, not the
    replacement characters and private-use glyphs that broken font encodings produce."""
    stripped = "".join(text.split())
    if len(stripped) < MIN_TEXT_CHARS:
        return False, f"only {len(stripped)} characters"
    bad = sum(1 for c in stripped if c == "\ufffd" or "\ue000" <= c <= "\uf8ff" or ord(c) < 32)
    if bad / len(stripped) > 0.05:
        return False, "broken font encoding"
    wordish = len(_WORDISH.findall(stripped))
    if wordish / len(stripped) < 0.5:
        return False, "mostly symbols"
    return True, f"{len(stripped)} characters"


# ---------------------------------------------------------------- image facts

def is_blank(img: Image.Image) -> bool:
    """A page with (almost) no ink: an empty reading of it is correct, not a failure.

    Counted at full resolution: a thumbnail averages thin type into grey and calls a page
    with three short lines blank. Scanner specks make a blank page look inked, which errs
    on the safe side (an empty reading then goes to review instead of passing as ok)."""
    hist = (img if img.mode == "L" else img.convert("L")).histogram()  # one C pass
    total = sum(hist)
    if total == 0:
        return True
    mean = sum(i * n for i, n in enumerate(hist)) / total
    var = sum((i - mean) ** 2 * n for i, n in enumerate(hist)) / total
    if var < 4.0:
        return True
    half, seen, background = total / 2, 0, 255
    for i, n in enumerate(hist):
        seen += n
        if seen >= half:
            background = i
            break
    dark = sum(hist[: max(0, min(128, background - 60))])
    return dark / total < 0.0003


def grey_if_neutral(img: Image.Image) -> Image.Image:
    """An RGB image whose three bands are equal everywhere, as that one band (mode L).

    pdfium renders every page as RGB, grey scans included (43 of 80 real scans here): sent as
    8-bit grey, the same pixels encode in half the time and bytes (BENCHMARKS.md). A model's
    processor converts to RGB on its side, so it sees exactly the image it would have."""
    if img.mode != "RGB":
        return img
    from PIL import ImageChops

    r, g, b = img.split()
    if ImageChops.difference(r, g).getbbox() is None and ImageChops.difference(r, b).getbbox() is None:
        return r
    return img


def encode(img: Image.Image, fmt: str = "png", quality: int = 90) -> bytes:
    """Encode for an HTTP engine. PNG uses a fast compression level: the server decodes it
    anyway, and the client's CPU is what feeds the GPU."""
    buf = io.BytesIO()
    if fmt.lower() in ("jpg", "jpeg"):
        img.convert("RGB").save(buf, format="JPEG", quality=quality)
    else:
        img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()
