"""Characters a document's text may not carry onwards: decided once, here.

A page's text comes from places vlmocr does not control — a PDF's text layer, a VLM's answer, a
file name — and can hold what no XML 1.0 document may contain (the C0 controls but tab, line feed
and carriage return; U+FFFE and U+FFFF; a UTF-16 surrogate standing alone), which ALTO, hOCR and
PAGE-XML then cannot be written with, and which a terminal obeys instead of showing (ESC starts a
command sequence, OSC 52 writes the clipboard on some terminals, a bidi override reorders what
follows).

* `xml_safe`: what a page record stores (`record_made_safe`, when the record is written, so the
  run's lines, docs/, txt, search and every export agree). A form feed or vertical tab becomes a
  line break (a page's own FF would otherwise split it in two where FF separates pages); the other
  C0 controls carry no text and are dropped; U+FFFE, U+FFFF and lone surrogates become U+FFFD, the
  replacement character, so that something stands where something was. The record keeps the count
  in its flags (`chars_made_safe:N`).
* `shown`: a line printed to a terminal from a document's text: controls (C0 but tab, DEL, C1) and
  the bidi controls written as visible escapes (``\\x1b``, ``\\u202e``) — never obeyed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .flags import Flag

# XML 1.0's Char production leaves out #x0-#x8, #xB, #xC, #xE-#x1F, #xFFFE, #xFFFF and the surrogates.
_XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_LINE_BREAKS = frozenset("\x0b\x0c")
_REPLACED = frozenset("\ufffe\uffff")

MADE_SAFE_FLAG = Flag.chars_made_safe.name


def _safe_char(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _LINE_BREAKS:
        return "\n"
    if ch in _REPLACED or "\ud800" <= ch <= "\udfff":
        return "\ufffd"
    return ""


def xml_safe(text: str) -> tuple[str, int]:
    """(the text with every character XML 1.0 cannot carry made safe, how many there were)."""
    if not _XML_UNSAFE.search(text):
        return text, 0
    return _XML_UNSAFE.subn(_safe_char, text)


def safe_str(text: str) -> str:
    """`xml_safe`'s text alone (a file name, a title)."""
    return xml_safe(text)[0]


def record_made_safe(data: dict[str, Any]) -> dict[str, Any]:
    """A page or figure record as a JSON object, made safe in place: its text or a figure's
    description (the characters made safe counted in the flag `chars_made_safe:N`), its blocks' and
    words' texts, its error and anchor strings. Returns `data`."""
    made = 0
    for key in ("text", "description"):
        value = data.get(key)
        if isinstance(value, str):
            data[key], n = xml_safe(value)
            made += n
    # The blocks' and words' texts are the page's text again (not counted twice).
    for block in data.get("blocks") or ():
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            block["text"] = safe_str(block["text"])
    positions = data.get("positions")
    if isinstance(positions, dict):
        for line in positions.get("lines") or ():
            words = line.get("words") if isinstance(line, dict) else None
            for word in words or ():
                if isinstance(word, list) and word and isinstance(word[-1], str) and _XML_UNSAFE.search(word[-1]):
                    word[-1] = safe_str(word[-1])
    if isinstance(data.get("error"), str):
        data["error"] = safe_str(data["error"])
    anchor = data.get("anchor")
    if isinstance(anchor, dict):
        data["anchor"] = {k: safe_str(v) if isinstance(v, str) else v for k, v in anchor.items()}
    if made:
        data["flags"] = [*(f for f in data.get("flags") or () if not str(f).startswith(MADE_SAFE_FLAG + ":")),
                         Flag.chars_made_safe.of(count=made)]
    return data


def needs_making_safe(data: Mapping[str, Any]) -> bool:
    """Does a stored record hold text `record_made_safe` would change? (Records written before the
    rule; checked without copying the record.)"""
    texts = [data.get("text"), data.get("description"), data.get("error")]
    texts += [b.get("text") for b in data.get("blocks") or () if isinstance(b, Mapping)]
    positions = data.get("positions")
    if isinstance(positions, Mapping):
        texts += [w[-1] for line in positions.get("lines") or () if isinstance(line, Mapping)
                  for w in line.get("words") or () if isinstance(w, (list, tuple)) and w]
    return any(isinstance(t, str) and _XML_UNSAFE.search(t) for t in texts)


def made_safe_count(flags: Any) -> int:
    """The characters a record's flags say were made safe (0: none)."""
    for flag in flags or ():
        name, _, n = str(flag).partition(":")
        if name == MADE_SAFE_FLAG and n.isdigit():
            return int(n)
    return 0


# C0 controls but tab and line feed, DEL, the C1 controls; the bidi embeddings, overrides, isolates
# and marks (U+061C, U+200E-F, U+202A-E, U+2066-9).
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """Text as a terminal may be shown it: controls and bidi controls written as escapes."""
    return _TERMINAL_UNSAFE.sub(_escape, text) if _TERMINAL_UNSAFE.search(text) else text


def json_shown(text: str) -> str:
    """A JSON document (json.dumps with ensure_ascii=False) as a terminal may be shown it: what
    `shown` escapes, written as JSON's own \\uXXXX escapes (json.dumps has escaped the C0 controls),
    so the document reads back the same."""
    return _TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _TERMINAL_UNSAFE.search(text) else text
