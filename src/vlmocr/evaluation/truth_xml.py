"""Ground truth in the XML most historical GT sets ship (OCR-D, Transkribus, eScriptorium, library
digitisation): PAGE-XML and ALTO, read with the standard XML parser.

PAGE-XML: the text of each TextLine's TextEquiv/Unicode (the first TextEquiv: index 0 or the only
one), lines in document order, regions separated by a blank line; a region with no line text gives
its own TextEquiv. ALTO: each TextLine's String CONTENT joined by spaces (a HYP's content ends the
line), lines in document order, blocks separated by a blank line. Namespaces of every version are
accepted (matched by local name)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ..exceptions import UsageError


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _children(el: ET.Element, name: str) -> list[ET.Element]:
    return [c for c in el if _local(c.tag) == name]


def _first_unicode(el: ET.Element) -> str | None:
    equivs = _children(el, "TextEquiv")
    if not equivs:
        return None
    chosen = next((e for e in equivs if e.get("index") in (None, "0", "1")), equivs[0])
    uni = next((u for u in chosen.iter() if _local(u.tag) == "Unicode"), None)
    return (uni.text or "") if uni is not None else None


def _page_xml(root: ET.Element) -> str:
    blocks: list[str] = []
    for region in (e for e in root.iter() if _local(e.tag) == "TextRegion"):
        lines = [t for line in _children(region, "TextLine") if (t := _first_unicode(line)) is not None]
        if not lines:
            own = _first_unicode(region)
            lines = [own] if own else []
        if lines:
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _alto_blocks(within: ET.Element) -> str:
    blocks: list[str] = []
    for block in (e for e in within.iter() if _local(e.tag) == "TextBlock"):
        lines = []
        for line in (e for e in block.iter() if _local(e.tag) == "TextLine"):
            words = [s.get("CONTENT", "") for s in line if _local(s.tag) == "String"]
            hyp = next((s.get("CONTENT", "-") for s in line if _local(s.tag) == "HYP"), "")
            lines.append(" ".join(w for w in words if w) + hyp)
        if lines:
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _alto(root: ET.Element) -> str:
    # A file of several Pages (a document, as `vlmocr export --format alto` writes one) gives its
    # pages separated by form feeds, as a document's plain-text truth does.
    pages = [e for e in root.iter() if _local(e.tag) == "Page"]
    if len(pages) > 1:
        return "\f".join(_alto_blocks(page) for page in pages)
    return _alto_blocks(root)


def xml_truth(path: Path) -> tuple[str, str, str | None] | None:
    """(layout name, text, the page image the file names) of a PAGE-XML or ALTO file; None for
    any other XML. A file that is no XML at all is a usage error naming it."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise UsageError(f"cannot read truth {path}: {exc}") from None
    kind = _local(root.tag)
    if kind == "PcGts":
        page = next((e for e in root.iter() if _local(e.tag) == "Page"), None)
        return "PAGE-XML", _page_xml(root), page.get("imageFilename") if page is not None else None
    if kind.lower() == "alto":
        src = next((e for e in root.iter() if _local(e.tag) == "fileName"), None)
        return "ALTO", _alto(root), (src.text or "").strip() or None if src is not None else None
    return None
