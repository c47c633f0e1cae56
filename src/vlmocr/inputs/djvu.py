"""DjVu documents through DjVuLibre's own tools (Debian package djvulibre-bin): `djvused` counts
the pages and reads a page's size and resolution from its INFO chunk; `ddjvu` renders one page,
at the size asked, into a temporary TIFF that Pillow reads. DjVu decodes at any reduced size
directly, so a page is never drawn larger than the size the renderer's rules allow, and a page
declaring a huge size is refused from its header before anything is drawn (render.check_frame).

Every failure is a `BadInput` naming the file (and the Debian package when the tools are missing):
the scheduler turns it into a `bad_input` record and goes on."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from ..exceptions import BadInput
from .sources import printable

PACKAGE = "djvulibre-bin"
# A page renders in well under a second; a file that takes longer is stuck (or hostile).
TIMEOUT_S = 120.0
# djvused's dump of a page: "INFO [10]  DjVu 2550x3300, v24, 300 dpi, gamma=2.2"
_INFO = re.compile(r"INFO \[\d+\]\s+DjVu (\d+)x(\d+), v\d+, (\d+) dpi")


@dataclass(frozen=True)
class PageInfo:
    width: int  # pixels at full resolution, as the page's INFO chunk declares them
    height: int
    dpi: float | None


def missing_tools() -> str | None:
    """Why DjVu cannot be read here (one line naming the package), or None."""
    absent = [t for t in ("djvused", "ddjvu") if shutil.which(t) is None]
    if absent:
        return (f"reading DjVu needs DjVuLibre's {' and '.join(absent)} "
                f"(Debian/Ubuntu: apt-get install {PACKAGE})")
    return None


def _shown(path: Path) -> str:
    return printable(path.name)


def _run(cmd: list[str], path: Path, what: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    why = missing_tools()
    if why is not None:
        raise BadInput(f"{why}: {_shown(path)}")
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, errors="replace", check=False,
                              timeout=TIMEOUT_S, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise BadInput(f"DjVu {what} took longer than {TIMEOUT_S:.0f} s: {_shown(path)}") from None
    except OSError as exc:
        raise BadInput(f"cannot run {cmd[0]} ({exc.strerror}): {_shown(path)}") from None
    if proc.returncode != 0:
        raise BadInput(f"corrupt or not a DjVu file ({cmd[0]}: {_reason(proc.stderr)}): {_shown(path)}")
    return proc


def _reason(text: str) -> str:
    """The message in DjVuLibre's error output, without its source locations and prefixes:
    "*** [1-12311] Failed to open document …" → "Failed to open document …"."""
    for line in text.splitlines():
        line = re.sub(r"^(\*+|ddjvu:|djvused:)\s*", "", line.strip())
        line = re.sub(r"^\[[\d-]+\]\s*", "", line)
        if line and line[0] not in "('" and not line.startswith("You may use option"):
            return line[:200]
    return "failed"


def page_count(path: Path) -> int:
    """The number of pages (`djvused -e n`)."""
    out = _run(["djvused", "-e", "n", str(path)], path, "page count").stdout.strip()
    try:
        n = int(out.splitlines()[-1])
    except (ValueError, IndexError):
        raise BadInput(f"corrupt DjVu file (no page count): {_shown(path)}") from None
    if n < 1:
        raise BadInput(f"DjVu file has no pages: {_shown(path)}")
    return n


def page_infos(path: Path, pages: list[int]) -> dict[int, PageInfo | None]:
    """Size and resolution of the given 1-based pages from their INFO chunks, one djvused
    process for all of them (None for a page without one: not a DjVu page)."""
    script = "".join(f"select {p}; dump\n" for p in pages)
    dump = _run(["djvused", str(path)], path, "page sizes", stdin=script).stdout
    # Each page's dump starts with its FORM:DJVU line, in the order asked.
    blocks = re.split(r"^\s*FORM:DJVU\b", dump, flags=re.MULTILINE)[1:]
    out: dict[int, PageInfo | None] = {p: None for p in pages}
    for p, block in zip(pages, blocks):
        m = _INFO.search(block)
        if m:
            dpi = int(m.group(3))
            out[p] = PageInfo(int(m.group(1)), int(m.group(2)), float(dpi) if dpi > 1 else None)
    return out


def page_info(path: Path, page: int) -> PageInfo:
    info = page_infos(path, [page]).get(page)
    if info is None:
        raise BadInput(f"corrupt DjVu page {page} (no INFO chunk): {_shown(path)}")
    return info


def render(path: Path, page: int, size: tuple[int, int]) -> Image.Image:
    """Page `page` drawn to fit `size` (the aspect kept), as a loaded Pillow image whose
    info['dpi'] is the resolution it was drawn at."""
    with tempfile.TemporaryDirectory(prefix="vlmocr-djvu-") as tmp:
        out = os.path.join(tmp, "page.tif")
        _run(["ddjvu", "-format=tiff", f"-page={page}", f"-size={size[0]}x{size[1]}", str(path), out],
             path, f"page {page}")
        try:
            with Image.open(out) as img:
                img.load()
                frame = img.copy()
                frame.info = dict(img.info)
        except (OSError, ValueError) as exc:
            raise BadInput(f"ddjvu drew no image for page {page} ({exc}): {_shown(path)}") from None
    return frame
