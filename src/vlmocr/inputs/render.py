"""Pages → images (pypdfium2 for PDF; Pillow for PNG, JPEG, TIFF and WebP frames, JPEG 2000, BMP,
GIF and PNM; DjVuLibre's tools for DjVu: djvu.py), and text layers.

Every failure to open or render becomes `BadInput` with a reason a person understands; the
scheduler turns that into a `bad_input` record and goes on with the other pages."""

from __future__ import annotations

import io
import math
import os
import re
import tempfile
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import pypdfium2 as pdfium
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

from ..envvars import MAX_DOC_PAGES, env_int
from ..exceptions import BadInput
from ..runfolder.flags import Flag
from ..runfolder.record import DEFAULT_DPI, DEFAULT_MAX_PIXELS, Sizing  # noqa: F401  (the renderer's settings)
from .master import Master, image_file_master, pdf_page_master
from .pixels import dark_on_light, engine_mode
from .sources import DJVU_EXTS, IMAGE_EXTS, PDF_EXTS, printable

HARD_MAX_IMAGE_PIXELS = 400_000_000  # larger image frames are refused instead of decoded
# A page longer than this many times its width (a 0.001 × 14400 pt PDF page, a 1 × 40000 px
# strip) is no document page: OCR engines fail on it every time (RapidOCR scales its short
# side to 0 px beyond ~1:125; Qwen-VL processors refuse beyond 1:200).
MAX_ASPECT = 100
# Pages a document may have (env VLMOCR_MAX_DOC_PAGES): a damaged or hostile page tree that
# claims a million pages must not become a million records. Real volumes stay far below.
DEFAULT_MAX_DOC_PAGES = 50_000
# A frame whose decoded pixels take more than this waits for the other workers' large frames:
# PNG and TIFF cannot be decoded at a reduced size, so each worker decoding a 400 MP scan at
# once would multiply 1.6 GB by the number of workers.
LARGE_DECODE_BYTES = 256 << 20
# A multi-frame file stays open between pages (so page k does not re-walk k frames) with its
# last frame decoded: only while that frame is small.
KEEP_DECODED_BYTES = 64 << 20
# Downscaling first averages blocks of pixels (Image.reduce), then resamples with LANCZOS from
# at most this many times the target size: Pillow's documented point where the result is
# indistinguishable from LANCZOS alone, at a fraction of the memory and time.
REDUCING_GAP = 3.0
# The formats an engine with its own decoder may read from the file itself (Rendered.same_as_file):
# those Tesseract's Leptonica reads in every build. JPEG 2000, GIF, BMP and PNM go as PNG copies.
ENGINE_READABLE_FORMATS = frozenset({"PNG", "JPEG", "TIFF", "WEBP"})

# We enforce our own limits; Pillow's bomb check would turn a big scan into an exception.
Image.MAX_IMAGE_PIXELS = HARD_MAX_IMAGE_PIXELS
warnings.simplefilter("ignore", Image.DecompressionBombWarning)


@dataclass
class Rendered:
    image: Image.Image
    dpi: float | None
    flags: list[str] = field(default_factory=list)
    # The file itself shows exactly this image (a single-frame image file, not resized or
    # turned): an engine with its own decoder may read the file instead of a re-encoded copy.
    same_as_file: Path | None = None
    # The image a repository keeps for the page, and how this rendering maps onto it (master.py):
    # the coordinates ALTO, hOCR and PAGE-XML give are in its pixels.
    master: Master | None = None


# ---------------------------------------------------------------- opening documents

pdfium_lock = threading.Lock()  # pdfium is not thread-safe; workers are processes, but be safe


def shown(path: Path) -> str:
    """A file's name as reasons spell it (valid Unicode whatever bytes the name has)."""
    return printable(path.name)


def max_doc_pages() -> int:
    """The page cap per document: VLMOCR_MAX_DOC_PAGES, else DEFAULT_MAX_DOC_PAGES."""
    return env_int(MAX_DOC_PAGES, DEFAULT_MAX_DOC_PAGES, minimum=1)


def _check_page_count(n: int, what: str, path: Path) -> int:
    cap = max_doc_pages()
    if n > cap:
        raise BadInput(f"too many pages: the {what} claims {n:,} pages, over the cap of {cap:,} per document "
                       f"(VLMOCR_MAX_DOC_PAGES raises it): {shown(path)}")
    return n


def _check_shape(w: float, h: float, what: str, path: Path) -> None:
    """Refuse a page no engine can read: so thin that it is no page at all."""
    if min(w, h) <= 0:
        raise BadInput(f"{what} has no size: {shown(path)}")
    if max(w, h) / min(w, h) > MAX_ASPECT:
        raise BadInput(f"{what} is {max(w, h) / min(w, h):,.0f} times as long as wide, too thin to read "
                       f"(at most 1:{MAX_ASPECT}): {shown(path)}")


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
        return BadInput(f"cannot read {shown(path)}: {err.strerror}")
    if not head.lstrip().startswith(b"%PDF"):
        return BadInput(f"corrupt or not a PDF (no %PDF header): {shown(path)}")
    if b"/Encrypt" in tail:
        return BadInput(f"encrypted PDF (a password is required): {shown(path)}")
    if re.search(rb"/Type\s*/Pages\b", tail) and re.search(rb"/Count\s+0\b", tail) and not re.search(rb"/Count\s+[1-9]", tail):
        return BadInput(f"PDF has no pages: {shown(path)}")
    return BadInput(f"corrupt PDF ({msg.replace('Failed to load document ', '')}): {shown(path)}")


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
        raise BadInput(f"file not found: {printable(str(path))}") from None
    except OSError as exc:
        raise BadInput(f"cannot read {printable(str(path))}: {exc.strerror}") from None
    if not path.is_file():
        raise BadInput(f"not a regular file: {printable(str(path))}")
    return st


def kind_of(path: Path) -> str:
    ext = path.suffix.lower()
    if ext in PDF_EXTS:
        return "pdf"
    if ext in IMAGE_EXTS:
        return "image"
    return "unsupported"


def _open_image(path: Path) -> Image.Image:
    """Open an image file (headers only). Frame sizes are checked frame by frame, when read."""
    _stat(path)
    try:
        return Image.open(path)
    except Image.DecompressionBombError:  # Pillow refuses a first frame over 2 × the limit
        raise BadInput(f"image larger than {2 * HARD_MAX_IMAGE_PIXELS // 1_000_000} MP: {shown(path)}") from None
    except MemoryError:
        raise
    except Exception as exc:  # Pillow's plugins raise many types on a hostile header
        raise BadInput(f"unreadable image ({type(exc).__name__}: {exc}): {shown(path)}") from None


_image_lock = threading.Lock()
# The multi-frame image file this process read last, kept open: a TIFF's frames are a chain,
# and a fresh open walks the chain from the start for every page (10,000 frames: 5.5 h).
_frame_files: dict[tuple[str, int, int], Image.Image] = {}


def _image_file(path: Path) -> tuple[Image.Image, bool]:
    """The open image file and whether it is kept open for the next page (multi-frame files)."""
    st = _stat(path)
    key = (str(path), st.st_mtime_ns, st.st_size)
    img = _frame_files.get(key)
    if img is not None:
        return img, True
    img = _open_image(path)
    if not getattr(img, "is_animated", False):
        return img, False
    _forget_frame_files()
    _frame_files[key] = img
    return img, True


def _forget_frame_files() -> None:
    for img in _frame_files.values():
        img.close()
    _frame_files.clear()


def count_pages(path: Path) -> int:
    """Pages in a document; raises BadInput for anything unreadable (never returns 0 silently)
    and for more pages than the cap (`max_doc_pages`)."""
    kind = kind_of(path)
    if kind == "unsupported":
        _stat(path)
        raise BadInput(f"unsupported file type {printable(path.suffix) or '(none)'!r}: {shown(path)}")
    if kind == "pdf":
        with pdfium_lock:
            pdf = open_pdf(path)
            n = len(pdf)
        if n == 0:
            raise BadInput(f"PDF has no pages: {shown(path)}")
        return _check_page_count(n, "PDF", path)
    if is_djvu(path):
        from . import djvu

        _stat(path)
        return _check_page_count(djvu.page_count(path), "DjVu file", path)
    with _image_lock:
        img, kept = _image_file(path)
        try:
            n = _frame_count(img)
        except MemoryError:
            raise
        except Exception as exc:  # a broken frame chain
            _forget_frame_files()
            raise BadInput(f"cannot count the frames ({type(exc).__name__}: {exc}): {shown(path)}") from None
        finally:
            if not kept:
                img.close()
    return _check_page_count(n, "image file", path)


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
        flags.append(Flag.downscaled.of())
    return scale, flags


def is_djvu(path: Path) -> bool:
    return path.suffix.lower() in DJVU_EXTS


def _frame_count(img: Image.Image) -> int:
    """The pages of an open image file: every frame of a TIFF (or WebP) is a page; a GIF is one
    page whatever its frames (an animation's frames are no pages: the first is read, flagged
    `animated`), and its frames are never counted (a hostile GIF may claim millions)."""
    if img.format == "GIF":
        return 1
    return int(getattr(img, "n_frames", 1) or 1)


def _target(w: int, h: int, sizing: Sizing) -> tuple[tuple[int, int], float, list[str]]:
    """The size an image frame of w × h px is given: its own, else fitted to the longest side
    asked for, and within the pixel cap ('downscaled'); with the factor and the flags."""
    flags: list[str] = []
    target = 1.0
    if sizing.longest_side:
        target = sizing.longest_side / max(w, h)
    if w * h * target * target > sizing.max_pixels:
        target = (sizing.max_pixels / (w * h)) ** 0.5
        flags.append(Flag.downscaled.of())
    return (max(1, round(w * target)), max(1, round(h * target))), target, flags


def page_pixel_size(path: Path, page: int, sizing: Sizing) -> tuple[int, int]:
    """The size `render_page` gives a page, measured without drawing a PDF page (estimates)."""
    if kind_of(path) == "pdf":
        with pdfium_lock:
            pdf = open_pdf(path)
            if not 1 <= page <= len(pdf):
                raise BadInput(f"page {page} does not exist: {shown(path)}")
            w_pt, h_pt = pdf[page - 1].get_size()
        scale, _ = _scale_for(w_pt, h_pt, sizing)
        # pypdfium2 sizes the bitmap this way.
        return max(1, math.ceil(w_pt * scale)), max(1, math.ceil(h_pt * scale))
    img = render_page(path, page, sizing).image
    return img.width, img.height


def render_page(path: Path, page: int, sizing: Sizing) -> Rendered:
    """Render 1-based `page` of a PDF or image file to an RGB or L image within the pixel cap,
    dark marks on a light ground (pixels.py: a negative is inverted, and named in the flags)."""
    rendered = _render(path, page, sizing)
    image, flags = dark_on_light(rendered.image)
    if not flags:
        return rendered
    # no longer the file's own pixels (same_as_file), on the same master
    return Rendered(image, rendered.dpi, rendered.flags + flags, master=rendered.master)


def _render(path: Path, page: int, sizing: Sizing) -> Rendered:
    kind = kind_of(path)
    if kind == "pdf":
        with pdfium_lock:
            pdf = open_pdf(path)
            if not 1 <= page <= len(pdf):
                raise BadInput(f"page {page} does not exist (the PDF has {len(pdf)} pages): {shown(path)}")
            try:
                pg = pdf[page - 1]
                w_pt, h_pt = pg.get_size()
                _check_shape(w_pt, h_pt, f"page {page} ({w_pt:g} x {h_pt:g} pt)", path)
                scale, flags = _scale_for(w_pt, h_pt, sizing)
                bitmap = pg.render(scale=scale, rotation=0, may_draw_forms=True)
                img = bitmap.to_pil()
                if img.mode not in ("RGB", "L"):
                    img = img.convert("RGB")
            except pdfium.PdfiumError as exc:
                raise BadInput(f"cannot render page {page} ({exc}): {shown(path)}") from None
            try:
                master = pdf_page_master(pg)
            except pdfium.PdfiumError:
                master = None  # coordinates stay those of the page as rendered
        return Rendered(img, round(scale * 72.0, 2), flags, master=master)
    if kind == "image":
        return _render_djvu(path, page, sizing) if is_djvu(path) else _render_image(path, page, sizing)
    raise BadInput(f"unsupported file type {printable(path.suffix) or '(none)'!r}: {shown(path)}")


def _render_djvu(path: Path, page: int, sizing: Sizing) -> Rendered:
    """A DjVu page: its size checked from its INFO chunk, then drawn by ddjvu at the target size
    (never larger), so the renderer's rules hold as for any image frame."""
    from . import djvu

    _stat(path)
    n = djvu.page_count(path)
    if not 1 <= page <= n:
        raise BadInput(f"page {page} does not exist (the DjVu file has {n} pages): {shown(path)}")
    info = djvu.page_info(path, page)
    check_frame(info.width, info.height, page, path)
    size, target, flags = _target(info.width, info.height, sizing)
    with _large_decode(size[0] * size[1] * 4):
        img = djvu.render(path, page, size)
    src_dpi = image_dpi(img) or (info.dpi * target if info.dpi else None)
    frame, changed = _shrink(img, img.size)
    # ddjvu draws the page as its INFO turns it: the master is the page at full size, so turned.
    across, down = (info.width, info.height) if (img.width >= img.height) == (info.width >= info.height) else (
        info.height, info.width)
    return Rendered(frame, round(src_dpi, 2) if src_dpi else None, flags + changed,
                    master=image_file_master(across, down, info.dpi or None))


def _render_image(path: Path, page: int, sizing: Sizing) -> Rendered:
    with _image_lock:
        img, kept = _image_file(path)
        try:
            rendered = _render_frame(img, path, page, sizing)
        except BadInput as exc:
            if kept and isinstance(exc, _UndecodableFrame):
                _forget_frame_files()  # a failed decode leaves the file object half-read
            raise  # a frame refused from its header: the file object serves the next one as before
        except BaseException:
            if kept:
                _forget_frame_files()
            raise
        finally:
            if not kept:
                img.close()
        if kept and _decoded_bytes(img) > KEEP_DECODED_BYTES:
            _forget_frame_files()
    return rendered


def check_frame(w: int, h: int, page: int, path: Path) -> None:
    """Refuse an image frame too large to decode or too thin to read, from its header. Every
    frame is checked: a small first frame says nothing of the second."""
    if w * h > HARD_MAX_IMAGE_PIXELS:
        raise BadInput(f"frame {page} of {w}x{h} px exceeds the {HARD_MAX_IMAGE_PIXELS // 1_000_000} MP "
                       f"limit: {shown(path)}")
    _check_shape(w, h, f"frame {page} ({w}x{h} px)", path)


def _decoded_bytes(img: Image.Image) -> int:
    """What Pillow holds for the decoded frame: 1 byte a pixel for 1/L/P, else 4."""
    return img.width * img.height * (1 if img.mode in ("1", "L", "P") else 4)


@contextmanager
def _large_decode(nbytes: int) -> Iterator[None]:
    """Around a decode of `nbytes`: a large one waits until no other vlmocr process of this
    user on this machine decodes a large one (an flock, released by the kernel even when a
    process dies), so memory is one large frame plus small ones, whatever the worker count."""
    if nbytes <= LARGE_DECODE_BYTES:
        yield
        return
    import fcntl

    try:
        fd = os.open(os.path.join(tempfile.gettempdir(), f"vlmocr-{os.getuid()}-large-decode.lock"),
                     os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # no writable temp folder: decode unguarded rather than not at all
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class _UndecodableFrame(BadInput):
    """A frame whose data failed to decode (after its header passed the checks)."""


def _render_frame(img: Image.Image, path: Path, page: int, sizing: Sizing) -> Rendered:
    """Decode frame `page` of the open `img` within the limits, as a new image of its own."""
    try:
        # Counted first: a TIFF seek past its last frame leaves Pillow's count wrong. Counting
        # walks the frame chain once; the file then stays open (_image_file).
        n = _frame_count(img)
        if not 1 <= page <= n:
            raise BadInput(f"page {page} does not exist (the image has {n} frames): {shown(path)}")
        img.seek(page - 1)
    except (BadInput, MemoryError):
        raise
    except Exception as exc:
        raise BadInput(f"cannot read frame {page} ({type(exc).__name__}: {exc}): {shown(path)}") from None
    w, h = img.size
    check_frame(w, h, page, path)
    size, target, flags = _target(w, h, sizing)
    if img.format == "GIF" and getattr(img, "is_animated", False):
        flags.append(Flag.animated.of())  # frame 1 of an animation: its other frames are no pages
    if target < 1 and img.format == "JPEG":
        img.draft(None, size)  # JPEG decodes at 1/2, 1/4 or 1/8 of its size: never more than needed
    cost = _decoded_bytes(img)
    if img.format == "JPEG2000":
        k = _jp2_reduce(img, w, h, page, path, target)
        # OpenJPEG decodes into 4 bytes a sample, then Pillow copies (64 MP grey: 370 MB at full size)
        cost = (w >> k) * (h >> k) * (4 * len(img.getbands()) + _decoded_bytes(img) // (w * h))
    try:
        with _large_decode(cost):
            img.load()
            orientation = img.getexif().get(ExifTags.Base.Orientation, 1)  # after load: PNG keeps EXIF late
            frame, changed = _shrink(img, size)
    except MemoryError:
        raise
    except Exception as exc:  # truncated data, a hostile header: the same on every attempt
        raise _UndecodableFrame(f"truncated or corrupt image ({type(exc).__name__}: {exc}): {shown(path)} "
                       f"frame {page}") from None
    turned = orientation not in (0, 1)
    if turned:
        frame.getexif()[ExifTags.Base.Orientation] = orientation
        ImageOps.exif_transpose(frame, in_place=True)  # turned after shrinking: a quarter of the work
    src_dpi = image_dpi(img)
    dpi = round(src_dpi * target, 2) if src_dpi else None
    untouched = (not getattr(img, "is_animated", False) and size == (w, h) and not turned and not changed
                 and img.format in ENGINE_READABLE_FORMATS)
    across, down = (h, w) if orientation in (5, 6, 7, 8) else (w, h)  # as a viewer shows it (EXIF)
    return Rendered(frame, dpi, flags + changed, same_as_file=path if untouched else None,
                    master=image_file_master(across, down, src_dpi))


def _jp2_reduce(img: Image.Image, w: int, h: int, page: int, path: Path, target: float) -> int:
    """Check a JPEG 2000 frame's codestream and decode it at 1/2, 1/4… of its size when the
    target is that small: a wavelet codestream holds every such resolution, so a 400 MP master
    never takes 1.6 GB to shrink. Returns k: the frame is decoded at 1/2**k of each side."""
    from .jpeg2000 import codestream

    cs = codestream(path)
    if cs is None:
        raise BadInput(f"corrupt JPEG 2000 (no codestream header): {shown(path)}")
    check_frame(cs.width, cs.height, page, path)  # what OpenJPEG will decode, whatever the box says
    if (cs.width, cs.height) != (w, h):
        raise BadInput(f"corrupt JPEG 2000: its header says {w}x{h} px, its codestream {cs.width}x{cs.height}: "
                       f"{shown(path)}")
    k = 0
    while k < cs.levels and target * (1 << (k + 1)) <= 1.0:  # OpenJPEG refuses more than the levels
        k += 1
    if k:
        img.reduce = k  # type: ignore[assignment,method-assign]  # Pillow's JPEG 2000 property
    return k


def _shrink(img: Image.Image, size: tuple[int, int]) -> tuple[Image.Image, list[str]]:
    """The loaded `img` at `size` as L or RGB, always a new image (`img` may stay open for the
    file's next frame), and what its conversion changed (pixels.engine_mode: 16-bit stretched,
    alpha on white). L and RGB are resized before anything else, so no second full-size copy is
    made; palette, 1-bit, 16-bit and alpha images are converted first."""
    out, changed = engine_mode(img)
    if out.size != size:
        out = out.resize(size, Image.Resampling.LANCZOS, reducing_gap=REDUCING_GAP)
    return (out.copy() if out is img else out), changed


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
    with pdfium_lock:
        pdf = open_pdf(path)
        if not 1 <= page <= len(pdf):
            raise BadInput(f"page {page} does not exist (the PDF has {len(pdf)} pages): {shown(path)}")
        try:
            tp = pdf[page - 1].get_textpage()
            text = tp.get_text_bounded()
        except pdfium.PdfiumError as exc:
            raise BadInput(f"cannot read the text layer of page {page} ({exc}): {shown(path)}") from None
    # PDFium marks a hyphen that ends a line as the control character 0x02 and drops the line
    # break after it (FPDFText_IsHyphen): put back what was printed, a hyphen and a new line, so
    # the record holds no control character and cleaning decides about the break as for OCR text.
    text = _PDFIUM_HYPHEN.sub("-\n", text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def text_layer_lines(path: Path, page: int) -> tuple[tuple[float, float], int, list[tuple[tuple[float, float, float, float], str]]]:
    """Where a PDF page's text layer lies: (the page's size in points as stored, unrotated; its
    /Rotate in degrees clockwise; its text rectangles — PDFium's runs of text on one line, in its
    reading order — as (x0, y0, x1, y1) in points from the top left of the unrotated page, with
    their text). A few rectangles a page: no character is looked at one by one."""
    with pdfium_lock:
        pdf = open_pdf(path)
        p = pdf[page - 1]
        x0, y0, x1, y1 = p.get_cropbox()
        rotation = p.get_rotation()
        tp = p.get_textpage()
        out = []
        for i in range(tp.count_rects()):
            left, bottom, right, top = tp.get_rect(i)
            text = _PDFIUM_HYPHEN.sub("-", tp.get_text_bounded(left, bottom, right, top))
            if text.strip():
                out.append(((left - x0, y1 - top, right - x0, y1 - bottom), text))
    return (x1 - x0, y1 - y0), rotation, out


_PDFIUM_HYPHEN = re.compile("\x02(?:\r?\n)?")
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
    return blank_and_ink(img)[0]


def ink_share(img: Image.Image) -> float:
    """The share of the page's pixels that are ink: darker than the background (the median
    grey) by a clear margin, as `is_blank` counts it."""
    return blank_and_ink(img)[1]


def blank_and_ink(img: Image.Image) -> tuple[bool, float]:
    """(`is_blank`, `ink_share`) from one histogram of the page (one C pass over the pixels)."""
    hist = (img if img.mode == "L" else img.convert("L")).histogram()
    total = sum(hist)
    if total == 0:
        return True, 0.0
    mean = sum(i * n for i, n in enumerate(hist)) / total
    var = sum((i - mean) ** 2 * n for i, n in enumerate(hist)) / total
    ink, light = _ink_of(hist, total)
    # Blank means uniform: marks lighter than the ground count as much as darker ones (a negative
    # that reached here, light text on a dark ground, is not an empty page).
    return var < 4.0 or (ink < 0.0003 and light < 0.0003), ink


def _ink_of(hist: list[int], total: int) -> tuple[float, float]:
    """(share darker than the ground by a clear margin, share lighter than it by one)."""
    half, seen, background = total / 2, 0, 255
    for i, n in enumerate(hist):
        seen += n
        if seen >= half:
            background = i
            break
    return (sum(hist[: max(0, min(128, background - 60))]) / total,
            sum(hist[max(128, background + 60) + 1:]) / total if background + 60 < 255 else 0.0)


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


# ---------------------------------------------------------------- a page's master image (master.py)

def pdf_master(path: Path, page: int) -> Master | None:
    """The master of 1-based `page` of the PDF at `path` (None: none, or the PDF cannot say)."""
    with pdfium_lock:
        try:
            pg = open_pdf(path)[page - 1]
        except (BadInput, pdfium.PdfiumError, IndexError):
            return None
        try:
            return pdf_page_master(pg)
        except pdfium.PdfiumError:
            return None
        finally:
            pg.close()


def file_master(path: Path, page: int) -> Master | None:
    """The master of 1-based `page` of an input file, read from the file (headers only for an
    image file): for a record written before vlmocr kept one. None: none, or not readable."""
    kind = kind_of(path)
    if kind == "pdf":
        return pdf_master(path, page)
    if kind != "image" or is_djvu(path):
        return None
    try:
        with Image.open(path) as img:
            img.seek(page - 1)
            w, h = img.size
            turned = img.getexif().get(ExifTags.Base.Orientation, 1) in (5, 6, 7, 8)
            return image_file_master(h if turned else w, w if turned else h, image_dpi(img))
    except (OSError, EOFError, ValueError, UnidentifiedImageError):
        return None
