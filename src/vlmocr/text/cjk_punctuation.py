"""CJK punctuation in text of another script: what RapidOCR's recogniser (trained on Chinese and
Latin print alike) writes now and then for a Latin full stop or comma — `。` for `.`, `，` for `,`
— on pages that hold no Chinese. On a page read as Latin, Fraktur, Greek or Cyrillic such marks are
implausible characters (text/textquality.py), and the reading is folded back to the marks the page
holds, with a flag (`cjk_punctuation_folded:N`) saying how many (reading/worker.read_judged).
"""

from __future__ import annotations

import unicodedata

# The CJK marks with an everyday Latin counterpart. The fullwidth forms of ASCII (U+FF01-U+FF5E:
# `，` `：` `（`) fold by their compatibility decomposition (NFKC) to the ASCII mark itself.
_FOLD = {"。": ".", "｡": ".", "、": ",", "､": ",", "「": "\"", "」": "\"", "『": "\"", "』": "\"", "《": "\"",
         "》": "\"", "〈": "<", "〉": ">", "【": "[", "】": "]", "〔": "(", "〕": ")", "・": "·", "･": "·",
         "〜": "~", "\u3000": " "}


def is_cjk_punctuation(ch: str) -> bool:
    """A mark of the CJK Symbols and Punctuation block, or a fullwidth or halfwidth form of one."""
    code = ord(ch)
    if 0x3000 <= code <= 0x303F:
        return True
    return 0xFF00 <= code <= 0xFFEF and not unicodedata.category(ch).startswith(("L", "N"))


def fold(text: str) -> tuple[str, int]:
    """(the text with CJK punctuation folded to its Latin counterpart, how many marks were)."""
    if text.isascii():
        return text, 0
    out: list[str] = []
    n = 0
    for ch in text:
        if is_cjk_punctuation(ch):
            folded = _FOLD.get(ch) or unicodedata.normalize("NFKC", ch)
            if folded != ch:
                out.append(folded)
                n += 1
                continue
        out.append(ch)
    return "".join(out), n
