"""runfolder/safe.py: every character XML 1.0 cannot hold is made safe, and what it leaves lxml takes;
what a terminal is shown holds no control it would obey."""

from __future__ import annotations

import re

from lxml import etree

from vlmocr.runfolder.safe import MADE_SAFE_FLAG, made_safe_count, record_made_safe, shown, xml_safe

# XML 1.0's Char production (https://www.w3.org/TR/xml/#charsets), to check against.
XML_CHAR = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def test_every_character_xml_refuses_is_made_safe_and_lxml_takes_the_rest():
    refused = [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"] + ["\ufffe", "\uffff"] + \
        [chr(c) for c in range(0xD800, 0xE000, 0x41)]
    for ch in refused:
        assert not XML_CHAR.fullmatch(ch)
        safe, n = xml_safe(f"a{ch}b")
        assert n == 1 and all(XML_CHAR.fullmatch(c) for c in safe), repr(ch)
        etree.SubElement(etree.Element("page"), "word", CONTENT=safe).text = safe  # raises on a refused one
        assert safe == ("a\nb" if ch in "\x0b\x0c" else "a\ufffdb" if ch in "\ufffe\uffff" or "\ud800" <= ch <= "\udfff"
                        else "ab")
    allowed = "tab\there, line\nbreak, \r, Ελληνικά, \x85\x9f, \u202e, \U0001F600, \ufffd"
    assert xml_safe(allowed) == (allowed, 0)


def test_a_record_is_made_safe_once_and_counted():
    data = {"text": "a\x1bb", "blocks": [{"type": "text", "bbox": None, "text": "a\x1bb"}], "error": "x\x00y",
            "positions": {"lines": [{"words": [[0, 0, 1, 1, None, "a\x1bb"]]}]}, "flags": ["f"]}
    out = record_made_safe(data)
    assert out["text"] == "ab" and out["blocks"][0]["text"] == "ab" and out["error"] == "xy"
    assert out["positions"]["lines"][0]["words"][0][5] == "ab"
    assert out["flags"] == ["f", f"{MADE_SAFE_FLAG}:1"] and made_safe_count(out["flags"]) == 1
    assert record_made_safe(dict(out))["flags"] == out["flags"]  # made safe again: the same
    assert made_safe_count(["other"]) == 0


def test_a_terminal_is_shown_controls_never_sent_them():
    text = "".join(chr(c) for c in range(0x100)) + "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    out = shown(text)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", out)
    assert "\t" in out and "\n" in out and "\\x1b" in out and "\\u202e" in out
