"""Turn a model's raw answer into clean text, layout blocks and page fields, per its profile.

Blocks are ``{"type", "bbox": [x1, y1, x2, y2] | None, "text"}`` in reading order. Their
coordinates are as the model's format defines them: 0-999/1000 for grounding tags and
Chandra, 0-1000 for DocTags (rescaled from its 0-500 grid) and LightOnOCR-3's boxes, pixels of
the image sent for dots.ocr (its JSON carries no scale).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..runfolder.record import JsonObject

Block = JsonObject

# Block types that hold a figure, not text (grounded answers: deepseek-ocr, dots.ocr, docling).
FIGURE_TYPES = frozenset({"image", "figure", "chart", "picture"})


GroundingFormat = Literal["tags", "dots-json", "doctags", "chandra-html", "lightonocr"]


class PostprocessSpec(BaseModel):
    """How a raw answer becomes clean text (+ layout blocks, + fields).

    grounding_format: ``tags`` = DeepSeek-OCR / Unlimited-OCR ``<|ref|>…<|det|>[[…]]<|/det|>``,
    ``dots-json`` = dots.ocr's JSON list of {bbox, category, text}, ``doctags`` = Docling
    DocTags, ``chandra-html`` = Chandra's ``<div data-bbox data-label>`` blocks, ``lightonocr`` =
    LightOnOCR-3's ``![label](x1,y1,x2,y2)`` before each block (0-1000)."""

    model_config = ConfigDict(extra="forbid")  # a profile's typo fails loudly (as profiles' _Strict)

    strip_tokens: list[str] = Field(default_factory=list)
    strip_fences: bool = True
    strip_grounding: bool = True
    keep_grounding_as_blocks: bool = False
    grounding_format: GroundingFormat = "tags"
    front_matter: Literal["", "yaml"] = ""


class _Multipage(Protocol):
    @property
    def page_separator(self) -> str: ...


class Postprocessed(Protocol):
    """What a model's answer is post-processed by: a profile (profiles.Profile), seen only as
    its postprocess and multipage specs, so text/ stands below the profiles."""

    @property
    def postprocess(self) -> PostprocessSpec: ...

    @property
    def multipage(self) -> _Multipage: ...


def is_figure_block(block: Any) -> bool:
    return isinstance(block, dict) and str(block.get("type") or "").strip().lower() in FIGURE_TYPES


_BLANK_LINES = re.compile(r"\n{3,}")
_FENCE_LINE = re.compile(r"^\s*```[\w+.-]*\s*$")


def postprocess(profile: Postprocessed, text: str) -> tuple[str, list[Block] | None, JsonObject | None]:
    """(clean text, blocks or None, fields or None) for one page's raw answer.

    For a multi-page answer, ``split_pages`` first, then this per page. Runs of blank lines
    are collapsed to one and the text is stripped (the tags removed leave gaps behind)."""
    spec = profile.postprocess
    for token in spec.strip_tokens:
        text = text.replace(token, "")
    if spec.strip_fences:
        text = strip_fences(text)
    fields: JsonObject | None = None
    if spec.front_matter == "yaml":
        text, fields = parse_front_matter(text)
    blocks: list[Block] | None = None
    if spec.strip_grounding or spec.keep_grounding_as_blocks:
        parsed = _LAYOUT_PARSERS[spec.grounding_format](text)
        if parsed is not None:
            clean, found = parsed
            if spec.keep_grounding_as_blocks:
                blocks = found
            if spec.strip_grounding:
                text = clean
    return _tidy(text), blocks, fields


def split_pages(profile: Postprocessed, text: str, n: int) -> list[str] | None:
    """The answer to an ``n``-page request split into pages; None when the count is off
    (the caller then re-reads those pages one by one)."""
    separator = profile.multipage.page_separator
    if n == 1:
        return [text.replace(separator, "").strip()] if separator else [text.strip()]
    if not separator:
        return None
    parts = [p.strip() for p in text.split(separator)]
    # Models put the separator before every page, or after every page, or between pages.
    if len(parts) == n + 1 and parts[0] == "":
        parts = parts[1:]
    elif len(parts) == n + 1 and parts[-1] == "":
        parts = parts[:-1]
    return parts if len(parts) == n else None


def _tidy(text: str) -> str:
    return _BLANK_LINES.sub("\n\n", text).strip()


def strip_fences(text: str) -> str:
    """Remove a Markdown code fence wrapping the whole answer (```markdown … ```), keeping
    fences inside it. An opening fence whose close was cut off by truncation goes too."""
    lines = text.strip().split("\n")
    if not lines or not _FENCE_LINE.match(lines[0]):
        return text
    inner = lines[1:]
    if inner and inner[-1].strip() == "```":
        inner_fences = sum(1 for line in inner[:-1] if _FENCE_LINE.match(line))
        if inner_fences % 2 == 0:
            return "\n".join(inner[:-1])
        return text
    if not any(_FENCE_LINE.match(line) for line in inner):
        return "\n".join(inner)
    return text


# --- YAML front matter (olmOCR) --------------------------------------------------------

_FRONT_MATTER = re.compile(r"\A\s*---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
# olmOCR's keys, renamed to what a page record calls them; other keys are kept as they are.
_FIELD_NAMES = {
    "primary_language": "language",
    "is_rotation_valid": "rotation_valid",
    "rotation_correction": "rotation",
    "is_table": "is_table",
    "is_diagram": "is_diagram",
}


def _scalar(raw: str) -> Any:
    # A flat YAML subset is all olmOCR emits; parsing it here avoids a YAML dependency.
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    lowered = value.lower()
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    if lowered in ("null", "none", "~", ""):
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def rotation_asked(fields: JsonObject | None) -> int:
    """The turn (degrees counter-clockwise: 90, 180 or 270) a model says its page needs — olmOCR's
    `is_rotation_valid: false` with `rotation_correction: N` — else 0."""
    if not isinstance(fields, dict) or fields.get("rotation_valid") is not False:
        return 0
    turn = fields.get("rotation")
    return turn if isinstance(turn, int) and not isinstance(turn, bool) and turn in (90, 180, 270) else 0


def parse_front_matter(text: str) -> tuple[str, JsonObject | None]:
    """(body, fields) from ``---\\nkey: value\\n---\\nbody``; (text, None) without one."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return text, None
    fields: JsonObject = {}
    for line in match.group(1).split("\n"):
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[_FIELD_NAMES.get(key.strip(), key.strip())] = _scalar(value)
    return text[match.end() :], fields


# --- grounding tags (DeepSeek-OCR, Unlimited-OCR): the one parser, for post-processing and cleaning

# <|ref|>LABEL<|/ref|><|det|>[[x1, y1, x2, y2]]<|/det|>  (DeepSeek-OCR)
# <|det|>LABEL [[x1, y1, x2, y2], …]<|/det|> or <|det|>LABEL [x1, y1, x2, y2]<|/det|>  (Unlimited-OCR)
# The captures may not contain "<|", so a lone <|ref|>…<|/ref|> cannot swallow the next tag.
_NO_TAG = r"(?:(?!<\|).)*?"
_TAG = re.compile(rf"(?:<\|ref\|>(?P<ref>{_NO_TAG})<\|/ref\|>\s*)?<\|det\|>(?P<det>{_NO_TAG})<\|/det\|>", re.DOTALL)
_REF = re.compile(rf"<\|ref\|>(?P<ref>{_NO_TAG})<\|/ref\|>", re.DOTALL)
_LONE_REF = re.compile(r"<\|/?ref\|>")
_SPECIAL = re.compile(r"<\|/?[A-Za-z_][\w.-]{0,40}\|>")
_LOC = re.compile(r"<loc_\d+>")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

# The layout labels grounding models put in <|ref|>, the figure kinds `figures.find` crops
# among them. Anything else there is page text: word-level grounding puts the words themselves
# in <|ref|>, and a single word ("CHATEAU", "Hello") taken for a label would be lost.
LAYOUT_LABELS = frozenset(
    "text title sub_title subtitle image image_caption figure figure_caption caption table table_caption "
    "table_footnote footnote equation formula header footer page_header page_footer page_number list "
    "list_item section_header paragraph code abstract reference author date signature stamp chart picture".split()
)


def is_layout_label(ref: str) -> bool:
    return ref.strip().lower() in LAYOUT_LABELS


def _bbox(numbers: list[float]) -> list[float] | None:
    """One box, or the union of several (a block whose text spans columns)."""
    if not numbers or len(numbers) % 4:
        return None
    boxes = [numbers[i : i + 4] for i in range(0, len(numbers), 4)]
    box = [min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)]
    return [int(v) if float(v).is_integer() else v for v in box]


def _unref(text: str) -> str:
    """Text outside the tags: a <|ref|> without its <|det|> keeps its words unless they are a label."""
    text = _REF.sub(lambda m: "" if is_layout_label(m.group("ref")) else m.group("ref"), text)
    return _LONE_REF.sub("", text)


def parse_tags(text: str) -> tuple[str, list[Block]] | None:
    """(the text without tags, one block per <|det|> tag) for grounded output; None without tags.

    Each block's text runs to the next tag; the texts are joined by blank lines."""
    matches = list(_TAG.finditer(text))
    if not matches:
        return None
    pieces = [_unref(text[: matches[0].start()]).strip()]
    blocks: list[Block] = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = _unref(text[match.end() : end]).strip()
        det = match.group("det").strip()
        bracket = det.find("[")
        det_label = (det[:bracket] if bracket >= 0 else det).strip()
        coords = [float(n) for n in _NUMBER.findall(det[bracket:])] if bracket >= 0 else []
        ref = (match.group("ref") or "").strip()
        label = ref or det_label or "text"
        if ref and not is_layout_label(ref):
            label, body = "text", "\n".join(p for p in (ref, body) if p)
        blocks.append({"type": label, "bbox": _bbox(coords), "text": body})
        pieces.append(body)
    return "\n\n".join(p for p in pieces if p), blocks


def strip_grounding(text: str) -> str:
    """Grounded output as page text, the way `postprocess` makes it (`parse_tags`), with the marks
    the tags leave aside gone too: other special tokens (<|grounding|>) and DocTags locations."""
    if "<|" not in text and "<loc_" not in text:
        return text
    parsed = parse_tags(text)
    text = parsed[0] if parsed is not None else _unref(text)
    return _LOC.sub("", _SPECIAL.sub("", text))


# --- dots.ocr JSON layout -----------------------------------------------------------------


def _json_items(text: str) -> list[Any] | None:
    stripped = text.strip()
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        data = [data]
    if isinstance(data, list):
        return data
    # A truncated answer: keep every complete {…} element of the list.
    start = stripped.find("[")
    if start < 0:
        return None
    decoder, pos, items = json.JSONDecoder(), start + 1, []
    while True:
        while pos < len(stripped) and stripped[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(stripped) or stripped[pos] != "{":
            break
        try:
            item, pos = decoder.raw_decode(stripped, pos)
        except json.JSONDecodeError:
            break
        items.append(item)
    return items or None


def _parse_dots_json(text: str) -> tuple[str, list[Block]] | None:
    items = _json_items(text)
    if items is None:
        return None
    blocks: list[Block] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        raw_box = item.get("bbox")
        numbers = [float(v) for v in raw_box] if isinstance(raw_box, list) and all(isinstance(v, int | float) for v in raw_box) else []
        blocks.append({"type": str(item.get("category", "Text")), "bbox": _bbox(numbers), "text": str(item.get("text") or "").strip()})
    return "\n\n".join(str(b["text"]) for b in blocks if b["text"]), blocks


# --- DocTags (Granite-Docling) --------------------------------------------------------------

_DOCTAG_ELEMENT = re.compile(r"<(?P<tag>[a-z][a-z0-9_]*)>(?P<locs>(?:<loc_\d+>){4})?(?P<body>.*?)</(?P=tag)>", re.DOTALL)
_LOC = re.compile(r"<loc_(\d+)>")
_OTSL_CELL = re.compile(r"<(?:fcel|ecel|lcel|ucel|xcel|ched|rhed|srow)>")
_ANY_TAG = re.compile(r"</?[a-z][a-z0-9_]*>|<loc_\d+>")
_HEADING = re.compile(r"^section_header_level_(\d)$")


def _doctag_text(tag: str, body: str) -> str:
    if tag == "otsl":
        rows = []
        for row in body.split("<nl>"):
            cells = [_ANY_TAG.sub("", c).strip() for c in _OTSL_CELL.split(row)[1:]]
            if cells:
                rows.append(" | ".join(cells))
        return "\n".join(rows)
    text = _ANY_TAG.sub("", body.replace("<br>", "\n")).strip()
    heading = _HEADING.match(tag)
    if text and (heading or tag == "title"):
        return "#" * (int(heading.group(1)) + 1 if heading else 1) + " " + text
    return text


def _parse_doctags(text: str) -> tuple[str, list[Block]] | None:
    inner = re.sub(r"</?doctag>", "", text)
    matches = list(_DOCTAG_ELEMENT.finditer(inner))
    if not matches:
        return None
    blocks: list[Block] = []
    for match in matches:
        tag = match.group("tag")
        # DocTags locations are on a 0-500 grid; doubled to share the 0-1000 convention.
        locs = [int(v) * 2 for v in _LOC.findall(match.group("locs") or "")]
        blocks.append({"type": tag, "bbox": locs or None, "text": _doctag_text(tag, match.group("body"))})
    return "\n\n".join(str(b["text"]) for b in blocks if b["text"]), blocks


# --- Chandra HTML layout blocks ---------------------------------------------------------------


class _ChandraBlocks(HTMLParser):
    """Top-level ``<div data-bbox data-label>`` blocks, their HTML reduced to readable text."""

    _BREAK_AFTER = frozenset({"p", "div", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "caption", "pre", "table"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self._depth = 0
        self._parts: list[str] = []
        self._cells = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div" and self._depth == 0:
            a = dict(attrs)
            self.blocks.append({"type": a.get("data-label") or "block", "bbox": self._box(a.get("data-bbox")), "text": ""})
            self._parts = []
            self._depth = 1
            return
        if tag == "div":
            self._depth += 1
        if tag in ("br", "hr"):
            self._parts.append("\n")
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self._parts.append("#" * int(tag[1]) + " ")
        elif tag == "tr":
            self._cells = 0
        elif tag in ("td", "th"):
            if self._cells:
                self._parts.append(" | ")
            self._cells += 1
        elif tag == "math":
            self._parts.append("$")
        elif tag == "li":
            self._parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "math":
            self._parts.append("$")
        if tag == "div":
            self._depth -= 1
            if self._depth == 0 and self.blocks:
                self.blocks[-1]["text"] = _tidy(re.sub(r"[ \t]*\n[ \t]*", "\n", "".join(self._parts)))
                return
        if tag in self._BREAK_AFTER:
            self._parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._depth:
            self._parts.append(data)

    @staticmethod
    def _box(raw: str | None) -> list[float] | None:
        return _bbox([float(n) for n in _NUMBER.findall(raw or "")])


def _parse_chandra_html(text: str) -> tuple[str, list[Block]] | None:
    if "data-bbox" not in text and "data-label" not in text:
        return None
    parser = _ChandraBlocks()
    parser.feed(text)
    parser.close()
    if parser._depth and parser.blocks:  # a truncated last block still has its text
        parser.blocks[-1]["text"] = _tidy("".join(parser._parts))
    if not parser.blocks:
        return None
    return "\n\n".join(str(b["text"]) for b in parser.blocks if b["text"]), parser.blocks


# --- LightOnOCR-3 grounding: ![label](x1,y1,x2,y2) before every block ------------------------

# A box is four integers on 0-1000; a label ending in "+" continues the block before it (a
# paragraph running into the next column). An "image" block holds the model's description of a
# figure, not text on the page: kept in its block, left out of the page text (a chart's data,
# given as a table, stays).
_LIGHTON_MARK = re.compile(r"!\[(?P<label>[A-Za-z_][\w-]*?)(?P<cont>\+?)\]\(\s*(?P<box>\d+\s*,\s*\d+\s*,\s*\d+\s*,\s*\d+)\s*\)[ \t]*")


def _parse_lightonocr(text: str) -> tuple[str, list[Block]] | None:
    marks = list(_LIGHTON_MARK.finditer(text))
    if not marks:
        return None
    pieces = [text[: marks[0].start()].strip()]
    blocks: list[Block] = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[mark.end() : end].strip()
        label = mark.group("label") + mark.group("cont")
        blocks.append({"type": label, "bbox": _bbox([float(n) for n in _NUMBER.findall(mark.group("box"))]), "text": body})
        if mark.group("label").lower() == "image":
            pieces.append("")
        elif mark.group("cont") and body and pieces[-1]:
            pieces[-1] = f"{pieces[-1]} {body}"
        else:
            pieces.append(body)
    return "\n\n".join(p for p in pieces if p), blocks


_LAYOUT_PARSERS: dict[str, Callable[[str], tuple[str, list[Block]] | None]] = {
    "tags": parse_tags,
    "dots-json": _parse_dots_json,
    "doctags": _parse_doctags,
    "chandra-html": _parse_chandra_html,
    "lightonocr": _parse_lightonocr,
}

__all__ = ["LAYOUT_LABELS", "is_layout_label", "parse_front_matter", "parse_tags", "postprocess", "split_pages",
           "strip_fences", "strip_grounding"]
