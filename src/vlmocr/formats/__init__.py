"""The formats a digital library ingests: ALTO 4, hOCR, PAGE-XML (2019) and a
searchable PDF — each a document's pages with their words where they lie (record.Positions),
written from the raw reading (`layout.laid_pages`)."""

from __future__ import annotations

from pathlib import Path

from ..exceptions import UsageError
from .layout import LaidPage

FORMATS = ("alto", "hocr", "pagexml", "pdf")


def write_document(fmt: str, name: str, pages: list[LaidPage], source_name: str, file: Path | None,
                   folder: Path, notes: list[str] | None = None) -> list[Path]:
    """Write one document in `fmt` into `folder`: NAME.alto.xml, NAME.hocr, NAME/p0001.xml
    (PAGE-XML: a file a page) or NAME.pdf (needs the input `file`; PDF/A-2b where the input
    allows, else a plain PDF and a line in `notes` saying why)."""
    from .xml import alto, hocr, pagexml

    if fmt == "alto":
        path = folder / f"{name}.alto.xml"
        path.write_bytes(alto(pages, source_name))
        return [path]
    if fmt == "hocr":
        path = folder / f"{name}.hocr"
        path.write_bytes(hocr(pages, source_name))
        return [path]
    if fmt == "pagexml":
        sub = folder / name
        sub.mkdir(parents=True, exist_ok=True)
        written = []
        for page in pages:
            path = sub / f"p{page.page:04d}.xml"  # DOC/p0001.xml: a layout evaluate reads back
            path.write_bytes(pagexml(page, f"{source_name}#page={page.page}" if len(pages) > 1 else source_name))
            written.append(path)
        return written
    if fmt == "pdf":
        from .pdf import searchable_pdf

        if file is None:
            # One document without its input must not cost the others theirs: said, and skipped.
            if notes is not None:
                notes.append(f"{name}: no PDF: its input {source_name} is not found here, and a searchable PDF "
                             "is made over it (--source-root names where the inputs are)")
            return []
        path = folder / f"{name}.pdf"
        try:
            made = searchable_pdf(pages, file, path, notes)
        except UsageError as exc:  # an input no PDF can be made over (DjVu…): said, and skipped
            path.unlink(missing_ok=True)
            if notes is not None:
                notes.append(f"{name}: no PDF: {exc}")
            return []
        if not made.pdfa and notes is not None:
            notes.append(f"{name}.pdf: a plain PDF, not PDF/A-2b ({made.why_not})")
        return [path]
    raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
