"""Hostile documents that are tiny on disk but expensive or absurd once opened: TIFFs whose
later frames claim huge sizes or that hold thousands of frames, PDFs that claim a million pages
or have a page a thousandth of a point wide, huge white PNGs written row by row.

Written by hand (struct + zlib) where Pillow would need the decoded image in memory to write
it. Used by tests and by benchmarks/bench_bad_input.py."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

# TIFF field types
_SHORT, _LONG, _RATIONAL = 3, 4, 5
_DEFLATE = 8


def _strip(width: int, rows: int, samples: int, value: int) -> bytes:
    """One deflate-compressed strip of `rows` rows of a constant grey/colour."""
    comp = zlib.compressobj(9)
    row = bytes([value]) * (width * samples)
    return b"".join([*(comp.compress(row) for _ in range(rows)), comp.flush()])


def write_tiff(path: Path, frames: list[tuple[int, int]], samples: int = 1, value: int = 255,
               rows_per_strip: int = 512, dpi: int = 300) -> Path:
    """A multi-frame TIFF, one IFD per (width, height), 8 bits per sample, deflate strips.

    Strips of equal shape share one copy of their compressed bytes, so a frame that decodes to
    gigabytes of uniform colour takes a few kilobytes on disk."""
    out = bytearray(b"II*\0\0\0\0\0")
    strips: dict[tuple[int, int], int] = {}  # (width, rows) → offset of the shared strip
    last_strip: dict[tuple[int, int], int] = {}
    ifd_offsets: list[int] = []
    pending_next: int | None = 4  # where the offset of the next IFD goes

    def put(data: bytes) -> int:
        if len(out) % 2:
            out.append(0)
        at = len(out)
        out.extend(data)
        return at

    for width, height in frames:
        rps = min(rows_per_strip, height)
        n_strips = -(-height // rps)
        key = (width, rps)
        if key not in strips:
            data = _strip(width, rps, samples, value)
            strips[key] = put(data)
            last_strip[key] = len(data)
        tail_rows = height - (n_strips - 1) * rps
        offsets = [strips[key]] * n_strips
        counts = [last_strip[key]] * n_strips
        if tail_rows != rps:
            tail = _strip(width, tail_rows, samples, value)
            offsets[-1], counts[-1] = put(tail), len(tail)
        entries: list[tuple[int, int, int, bytes]] = []  # tag, type, count, value bytes

        def arr(tag: int, kind: int, values: list[int]) -> None:
            fmt = "<H" if kind == _SHORT else "<I"
            entries.append((tag, kind, len(values), b"".join(struct.pack(fmt, v) for v in values)))

        arr(256, _LONG, [width])
        arr(257, _LONG, [height])
        arr(258, _SHORT, [8] * samples)
        arr(259, _SHORT, [_DEFLATE])
        arr(262, _SHORT, [2 if samples == 3 else 1])
        arr(273, _LONG, offsets)
        arr(277, _SHORT, [samples])
        arr(278, _LONG, [rps])
        arr(279, _LONG, counts)
        entries.append((282, _RATIONAL, 1, struct.pack("<II", dpi, 1)))
        entries.append((283, _RATIONAL, 1, struct.pack("<II", dpi, 1)))
        arr(284, _SHORT, [1])
        arr(296, _SHORT, [2])
        # values longer than 4 bytes live outside the IFD
        fixed: list[bytes] = []
        for tag, kind, count, data in entries:
            if len(data) > 4:
                data = struct.pack("<I", put(data))
            fixed.append(struct.pack("<HHI", tag, kind, count) + data.ljust(4, b"\0"))
        ifd = struct.pack("<H", len(fixed)) + b"".join(fixed) + b"\0\0\0\0"
        at = put(ifd)
        ifd_offsets.append(at)
        assert pending_next is not None
        out[pending_next:pending_next + 4] = struct.pack("<I", at)
        pending_next = at + 2 + 12 * len(fixed)
    path.write_bytes(bytes(out))
    return path


def write_png(path: Path, width: int, height: int, value: int = 255) -> Path:
    """A uniform 8-bit grey PNG written row by row (Pillow would need width×height bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    comp = zlib.compressobj(9)
    row = b"\0" + bytes([value]) * width
    body = b"".join([*(comp.compress(row) for _ in range(height)), comp.flush()])
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


def write_pdf(path: Path, page_sizes: list[tuple[float, float]], claimed_pages: int | None = None,
              text: str = "Hostile input, a page with a short line of real text on it.") -> Path:
    """A PDF with one text line on each page of the given sizes (points). `claimed_pages` puts
    a different /Count in the page tree, as a damaged or hostile file does."""
    objs: list[bytes] = []
    n = len(page_sizes)
    font_id = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {claimed_pages if claimed_pages is not None else n} >>".encode())
    for i, (w, h) in enumerate(page_sizes):
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {w} {h}] /Contents {4 + 2 * i} 0 R "
                    f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode())
        stream = f"BT /F1 10 Tf 1 1 Td ({text}) Tj ET".encode()
        objs.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))
    return path
