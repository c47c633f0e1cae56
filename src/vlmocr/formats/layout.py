"""A document's pages as the formats write them: lines of words with their boxes in the pixels of
the page as rendered, in reading order, and the page's master image (inputs/master.py) the XML
formats place them on (`frame_*`, `placed`). A page whose reading knows no positions (a VLM's plain
answer not aligned, a text layer) keeps its lines and words without boxes: ALTO and hOCR then
carry its text without coordinates, PAGE-XML as one region over the page, and the searchable PDF
spreads its lines over the page (its text is searchable, its highlights are not placed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..exceptions import UsageError
from ..inputs.master import Master
from ..inputs.render import file_master
from ..runfolder.record import Line, Row


@dataclass(frozen=True)
class LaidPage:
    page: int  # 1-based, in the document
    width: int  # pixels of the page as scanned (0: unknown)
    height: int
    dpi: float | None
    lines: list[Line]
    positioned: bool  # the boxes are real (else all zero)
    source: str  # whose boxes: tesseract, rapidocr, aligned:tesseract; "" without
    status: str
    engine: str
    master: Master | None = None  # the image the XML formats' coordinates refer to (None: this rendering)

    def blocks(self) -> list[tuple[int, list[Line]]]:
        return by_block(self.lines)

    def frame_size(self) -> tuple[int, int]:
        """The size of the image the coordinates refer to: the master's, else the page as rendered."""
        return (self.master.width, self.master.height) if self.master is not None else (self.width, self.height)

    def placed(self, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """A box of the page as rendered, in the pixels of the image the coordinates refer to."""
        if self.master is None or not (self.width and self.height):
            return box
        return self.master.box(box, self.width, self.height)

    def frame_dpi(self) -> tuple[float, float] | None:
        if self.master is not None:
            return self.master.dpi
        return (self.dpi, self.dpi) if self.dpi else None

    def frame_said(self) -> str:
        """Which image the coordinates are in, in words (the files say it)."""
        w, h = self.frame_size()
        dpi = self.frame_dpi()
        at = f", {_dpi_said(dpi)} dpi" if dpi else ", resolution unknown"
        if self.master is None:
            return f"the page as rendered, {w} x {h} px{at}"
        if self.master.of == "pdf image":
            return f"the PDF page's embedded image, {w} x {h} px{at}"
        return f"the image file's page, {w} x {h} px{at}"


def _dpi_said(dpi: tuple[float, float]) -> str:
    x, y = (round(v) for v in dpi)
    return f"{x}" if x == y else f"{x} x {y}"


def by_block(lines: list[Line]) -> list[tuple[int, list[Line]]]:
    """Lines grouped by block, in reading order (a block's lines stay together)."""
    out: list[tuple[int, list[Line]]] = []
    for line in lines:
        if out and out[-1][0] == line.block:
            out[-1][1].append(line)
        else:
            out.append((line.block, [line]))
    return out


def _unplaced(text: str) -> list[Line]:
    lines = []
    for row in text.splitlines():
        words = row.split()
        if words:
            lines.append(Line(box=(0, 0, 0, 0), words=[(0, 0, 0, 0, None, w) for w in words]))
    return lines


def laid_page(row: Row, file: Path | None = None) -> LaidPage:
    """A page as the formats write it; its master from the record, else (a record from before
    vlmocr kept one) from the input `file` when it is at hand."""
    master = Master.from_json(row.master) if row.master is not None else None
    pos = row.word_positions()
    if master is None and file is not None and (pos is not None or row.width):
        master = file_master(file, row.page)
    if pos is not None:
        return LaidPage(row.page, pos.width, pos.height, row.dpi, pos.lines, True, pos.source, row.status.value,
                        row.engine, master)
    width, height = row.width or 0, row.height or 0
    if row.rotation in (90, 270):  # the record's size is of the page as read (turned)
        width, height = height, width
    return LaidPage(row.page, width, height, row.dpi, _unplaced(row.text), False, "", row.status.value, row.engine,
                    master)


def laid_pages(records: list[Row], layer: str, file: Path | None = None) -> list[LaidPage]:
    """The pages of a document, in page order. Only the raw layer: the cleaned text's words are not
    the words whose boxes the engine gave."""
    if layer != "raw":
        raise UsageError("ALTO, hOCR, PAGE-XML and the searchable PDF place the words the engine read: "
                         "export them from the raw layer (--layer raw)")
    return [laid_page(r, file) for r in sorted(records, key=lambda r: r.page) if r.page >= 1]


def union(boxes: list[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    real = [b for b in boxes if b[2] > b[0] or b[3] > b[1]]
    if not real:
        return 0, 0, 0, 0
    return min(b[0] for b in real), min(b[1] for b in real), max(b[2] for b in real), max(b[3] for b in real)
