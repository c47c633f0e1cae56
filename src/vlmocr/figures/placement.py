"""Figure descriptions in Markdown and exports: each described figure as ``![description](link)``
where the figure sits in the page text."""


from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..runfolder.assemble import write_document
from ..runfolder.record import FigureRecord, JsonObject, Row, Status
from ..runfolder.rundir import FIGURES_FILE, RunDir
from ..runfolder.store import final_records, iter_figures
from .find import MIN_ANCHOR_CHARS, Figure, page_figures, pixel_grounding, same_box

# ============================================================================================
# Descriptions in Markdown and exports
# ============================================================================================


@dataclass(frozen=True)
class FigureRef:
    """A described figure, ready to be put into a page's text."""

    doc_id: str
    page: int
    figure: int
    crop: str  # relative to the run directory
    description: str
    bbox: tuple[float, ...] | None = None
    anchor: Mapping[str, str] = field(default_factory=dict)
    type: str = ""
    model: str | None = None
    prompt_id: str | None = None
    crop_sha256: str | None = None

    def markdown(self, link_prefix: str = "../") -> str:
        return f"![{alt_text(self.description)}]({link_prefix}{self.crop})"

    def as_dict(self) -> JsonObject:
        """For structured exports (JSON/JSONL): one entry per figure of a page."""
        return {"figure": self.figure, "type": self.type, "bbox": list(self.bbox) if self.bbox else None,
                "crop": self.crop, "description": self.description, "model": self.model,
                "prompt_id": self.prompt_id, "crop_sha256": self.crop_sha256}


_ALT_ESCAPE = re.compile(r"([\\\[\]])")


def alt_text(description: str) -> str:
    """A description as Markdown alt text: one line, brackets and backslashes escaped."""
    return _ALT_ESCAPE.sub(r"\\\1", " ".join((description or "").split()))


def figures_by_page(run_dir: str | Path) -> dict[tuple[str, int], list[FigureRef]]:
    """The described figures of a run, by (doc_id, page), in figure order: for each figure the
    latest ``ok`` record (any describe key: a later failed attempt with other settings does
    not hide a good description). Empty when the run has no figures.jsonl."""
    path = Path(run_dir) / FIGURES_FILE
    latest: dict[tuple[str, int, int], FigureRecord] = {}
    for rec in iter_figures(path):
        if rec.status is Status.ok and rec.description and rec.crop:
            latest[(rec.doc_id, rec.page, rec.figure)] = rec
    out: dict[tuple[str, int], list[FigureRef]] = {}
    for (doc_id, page, number), rec in sorted(latest.items()):
        out.setdefault((doc_id, page), []).append(FigureRef(
            doc_id=doc_id, page=page, figure=number, crop=str(rec.crop), description=rec.description,
            bbox=tuple(rec.bbox) if rec.bbox else None, anchor=dict(rec.anchor),
            type=rec.type, model=rec.model, prompt_id=rec.prompt_id, crop_sha256=rec.crop_sha256,
        ))
    return out


def figure_markdown(run_dir: str | Path, link_prefix: str = "../") -> dict[tuple[str, int], list[str]]:
    """``![description](figures/<doc>/p<page>-f<n>.png)`` per described figure, by page."""
    return {k: [f.markdown(link_prefix) for f in v] for k, v in figures_by_page(run_dir).items()}


# Figure placeholders a model may leave in the page text: Markdown images and HTML <img>.
_PLACEHOLDER = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)|<img\b[^>\n]*>", re.IGNORECASE)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _find(text: str, needle: str, start: int) -> int:
    if len(needle) < MIN_ANCHOR_CHARS:
        return -1
    i = text.find(needle, start)
    return i if i >= 0 else text.find(needle)


def _position(text: str, fig: FigureRef, cursor: int) -> int | None:
    """Where the figure goes in ``text``: before its own text (a caption the block carried),
    after the line before it, or before the line after it; None when no anchor is found."""
    anchor = fig.anchor or {}
    own = anchor.get("text") or ""
    if (i := _find(text, own, cursor)) >= 0:
        return _line_start(text, i)
    before = anchor.get("before") or ""
    if (i := _find(text, before, cursor)) >= 0:
        return _line_end(text, i + len(before))
    after = anchor.get("after") or ""
    if (i := _find(text, after, cursor)) >= 0:
        return _line_start(text, i)
    return None


def apply_descriptions(text: str, figures: Iterable[FigureRef], link_prefix: str = "../") -> str:
    """The page text with each described figure as ``![description](link)``.

    A figure placeholder the model left in the text (``![…](…)`` or ``<img …>``; the n-th
    one stands for figure n) is replaced; otherwise the image goes where the figure block sat
    among the page's blocks (found by the neighbouring blocks' text), or at the page end when
    that cannot be found. Idempotent: a figure whose link is already in the text is left alone."""
    figs = sorted((f for f in figures if f.description), key=lambda f: f.figure)
    figs = [f for f in figs if f"]({link_prefix}{f.crop})" not in text]
    if not figs:
        return text
    # Images already put in by an earlier call keep their places in the count.
    placeholders = list(_PLACEHOLDER.finditer(text))
    replaced: dict[int, FigureRef] = {}
    rest: list[FigureRef] = []
    for f in figs:
        if f.figure - 1 < len(placeholders):
            replaced[f.figure - 1] = f
        else:
            rest.append(f)
    if replaced:
        out, last = [], 0
        for i, m in enumerate(placeholders):
            if i in replaced:
                out += [text[last:m.start()], replaced[i].markdown(link_prefix)]
                last = m.end()
        text = "".join(out) + text[last:]
    if not rest:
        return text
    inserts: list[tuple[int, int, str]] = []
    cursor = 0
    for f in rest:
        pos = _position(text, f, cursor)
        if pos is None:
            pos = len(text)
        else:
            cursor = pos
        inserts.append((pos, f.figure, f.markdown(link_prefix)))
    inserts.sort()
    pieces: list[str] = []
    last = 0
    for pos, _, md in inserts:
        pieces.append(text[last:pos])
        pieces.append("\x00" + md + "\x00")  # paragraph breaks are settled below
        last = pos
    pieces.append(text[last:])
    joined = "".join(pieces)
    # Each image is its own paragraph: one blank line before and after, none at the edges.
    joined = re.sub(r"\n*\x00\n*", "\x00", joined)
    joined = joined.replace("\x00\x00", "\n\n")
    joined = joined.strip("\x00").replace("\x00", "\n\n")
    return joined


def _current(fig: FigureRef, current: list[Figure] | None) -> bool:
    """Is the described figure still on the page as it was read last? (A page re-read by a
    grounded model may have moved or dropped it; a page without blocks keeps it.)"""
    if current is None:
        return True
    match = next((c for c in current if c.figure == fig.figure), None)
    return match is not None and fig.bbox is not None and same_box(list(fig.bbox), match.bbox)


def with_figures(records: Iterable[Row], figures: Mapping[tuple[str, int], list[FigureRef]],
                 link_prefix: str = "../", pixel_grounding: bool = False) -> list[Row]:
    """Copies of page records whose text carries their figures' descriptions (records without
    described figures are returned as they are)."""
    out = []
    for rec in records:
        figs = figures.get(rec.page_id)
        if figs:
            current = page_figures(rec, pixel_grounding) if rec.blocks else None
            figs = [f for f in figs if _current(f, current)]
        if figs:
            rec = rec.amended(text=apply_descriptions(rec.text, figs, link_prefix))
        out.append(rec)
    return out


def add_figures(run_dir: str | Path, records: Iterable[Row], link_prefix: str = "../") -> list[Row]:
    """The integration point for assembled documents: ``records`` (final page records of one
    or more documents of ``run_dir``) with their figures' descriptions in the text. Returns the
    records unchanged (as a list) when the run has no described figures."""
    run_dir = Path(run_dir)
    records = list(records)
    if not (run_dir / FIGURES_FILE).is_file():
        return records
    figures = figures_by_page(run_dir)
    if not figures:
        return records
    return with_figures(records, figures, link_prefix, pixel_grounding(run_dir))



def page_figure_fields(run_dir: str | Path) -> dict[tuple[str, int], list[JsonObject]]:
    """For structured exports: the described figures of each page as JSON-ready dicts
    (figure, type, bbox, crop, description, model, prompt_id, crop_sha256)."""
    return {k: [f.as_dict() for f in v] for k, v in figures_by_page(run_dir).items()}


# ============================================================================================
# Documents assembled with their figures
# ============================================================================================


def rebuild_documents(run_dir: Path, wanted: dict[str, str] | None = None, docs: set[str] | None = None) -> int:
    """Re-assemble documents from pages.jsonl, figure descriptions (vlmocr describe) in place
    as alt text beside their figures. `wanted` maps doc_id → settings key; None assembles every
    document (or those in `docs`) with the key of its latest record."""
    finals = final_records(
        RunDir(run_dir).pages,
        keys=set(wanted.values()) if wanted else None,
        docs=set(wanted) if wanted else docs,
    )
    by_doc: dict[str, list[Row]] = {}
    for (doc_id, _page), rec in finals.items():
        if wanted and rec.key != wanted.get(doc_id):
            continue
        by_doc.setdefault(doc_id, []).append(rec)
    for doc_id, recs in by_doc.items():
        pages = [r for r in recs if r.page > 0]
        # A document-level failure (page 0) is shown only while no page of it was read.
        write_document(run_dir, doc_id, add_figures(run_dir, pages or recs))
    return len(by_doc)


def rebuild_with_figures(run_dir: str | Path) -> int:
    """Re-assemble every document with described figures (after `vlmocr describe`)."""
    run_dir = Path(run_dir)
    docs = {doc for doc, _ in figures_by_page(run_dir)}
    return rebuild_documents(run_dir, docs=docs) if docs else 0
