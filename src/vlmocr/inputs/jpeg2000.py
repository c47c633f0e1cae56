"""The main header of a JPEG 2000 codestream, read without decoding anything: its image size
(SIZ) and its wavelet decomposition levels (COD).

Why the renderer needs it: Pillow takes a .jp2 file's size from its `ihdr` box, but OpenJPEG
decodes what the codestream's SIZ segment declares. A file whose box says 100 × 100 and whose
codestream says 60000 × 60000 would pass every check made on Pillow's size and then be decoded at
3.6 GP; the renderer checks the codestream's own size too. The levels say how far the codestream
can be decoded at a reduced size (1/2, 1/4, … of each side): asking OpenJPEG for more is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SOC_SIZ = b"\xff\x4f\xff\x51"  # start of codestream, then the image and tile size segment
JP2_SIGNATURE = b"\x00\x00\x00\x0cjP  \r\n\x87\n"
MAIN_HEADER_BYTES = 1 << 16  # SIZ and COD come first in the main header, within a few hundred bytes
MAX_BOXES = 10_000  # a file of millions of empty boxes is no image worth walking


@dataclass(frozen=True)
class Codestream:
    width: int  # Xsiz − XOsiz: the image area's size on the reference grid
    height: int
    levels: int  # decomposition levels of the default coding style (COD); 0 when absent


def codestream(path: Path) -> Codestream | None:
    """The codestream header of a bare codestream (.j2k/.j2c/.jpc) or of the `jp2c` box of a JP2
    family file (.jp2/.jpf/.jpx), None when there is none to read."""
    try:
        with path.open("rb") as fh:
            offset = _codestream_offset(fh)
            if offset is None:
                return None
            fh.seek(offset)
            head = fh.read(MAIN_HEADER_BYTES)
    except OSError:
        return None
    return _main_header(head)


def _codestream_offset(fh) -> int | None:  # type: ignore[no-untyped-def]
    start = fh.read(12)
    if start[:4] == SOC_SIZ:
        return 0
    if start != JP2_SIGNATURE:
        return None
    pos = 12
    for _ in range(MAX_BOXES):
        fh.seek(pos)
        hdr = fh.read(8)
        if len(hdr) < 8:
            return None
        length, kind, header = int.from_bytes(hdr[:4], "big"), hdr[4:], 8
        if length == 1:  # a 64-bit length follows
            ext = fh.read(8)
            if len(ext) < 8:
                return None
            length, header = int.from_bytes(ext, "big"), 16
        if kind == b"jp2c":
            return pos + header
        if length < header:  # 0: the last box runs to the end of the file, and it is no codestream
            return None
        pos += length
    return None


def _main_header(head: bytes) -> Codestream | None:
    if not head.startswith(SOC_SIZ) or len(head) < 2 + 2 + 2 + 2 + 16:
        return None
    # SIZ: marker, Lsiz, Rsiz, then Xsiz Ysiz XOsiz YOsiz (4 bytes each)
    x, y, xo, yo = (int.from_bytes(head[8 + 4 * i:12 + 4 * i], "big") for i in range(4))
    if x <= xo or y <= yo:
        return None
    levels = 0
    pos = 2
    while pos + 4 <= len(head):
        marker, length = head[pos:pos + 2], int.from_bytes(head[pos + 2:pos + 4], "big")
        if marker == b"\xff\x52":  # COD: Lcod, Scod, SGcod (4 bytes), then the levels
            levels = head[pos + 9] if pos + 9 < len(head) else 0
            break
        if marker[:1] != b"\xff" or marker == b"\xff\x90" or length < 2:  # SOT: the main header is over
            break
        pos += 2 + length
    return Codestream(x - xo, y - yo, levels)
