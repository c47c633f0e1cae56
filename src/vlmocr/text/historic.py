"""Historical letter forms folded to their modern ones, the way transcriptions normalise them.

Fraktur data (Tesseract's ``frk``, most VLMs) writes what is printed: long s ``ſ``, r rotunda
``ꝛ``, superscript-e umlauts ``aͤ``, ligatures ``ﬁ``. Many transcriptions do not: OCR-D's
ground-truth guidelines define three levels (https://ocr-d.de/en/gt-guidelines/trans/), and a
collection transcribed at level 1 or 2 scores every one of those letters as an error. On the
Fraktur development pages (no ``ſ`` in the truth) the long s alone is half of Tesseract's
error (BENCHMARKS.md, "Long s").

Each fold is opt-in and names the level that writes the modern form:

* ``long_s`` — ``ſ`` → ``s``: level 1 ("s-Graphemes, Level 1": long s is transcribed as round s;
  levels 2 and 3 keep it).
* ``r_rotunda`` — ``ꝛ Ꝛ`` → ``r R``: level 1 ("r-Graphemes, Level 1"; levels 2 and 3 keep it).
* ``superscript_e`` — ``aͤ oͤ uͤ`` (a vowel + U+0364) → ``ä ö ü``: levels 1 and 2 ("Umlauts":
  only level 3 keeps the superscript e apart).
* ``ligatures`` — ``ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ`` → their letters: levels 1 and 2 split the consonant
  ligatures ("Ligatures"); the vowel ligatures ``æ œ`` are letters at every level and stay.

``ocrd2`` is the level-2 set (ligatures, superscript_e), ``ocrd1`` adds long_s and r_rotunda.
The same tables serve the clean rules (`text/clean.py`, ``[fold]``) and `vlmocr evaluate --fold`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

_SUPERSCRIPT_E = "\u0364"  # COMBINING LATIN SMALL LETTER E

TABLES: dict[str, dict[str, str]] = {
    "ligatures": {"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "ſt", "ﬆ": "st"},
    "superscript_e": {v + _SUPERSCRIPT_E: unicodedata.normalize("NFC", v + "\u0308") for v in "aouAOU"},
    "r_rotunda": {"ꝛ": "r", "Ꝛ": "R"},
    "long_s": {"ſ": "s"},
}
# The order folds apply in: ligatures first, so that ﬅ becomes ſt and then, with long_s, st.
FOLDS = tuple(TABLES)
LEVELS: dict[str, tuple[str, ...]] = {
    "ocrd2": ("ligatures", "superscript_e"),
    "ocrd1": ("ligatures", "superscript_e", "r_rotunda", "long_s"),
}


def expand(names: Iterable[str]) -> list[str]:
    """Fold names with the level names replaced by their folds, in application order; names
    that are neither are kept (the caller's own folds, e.g. evaluate's `case`)."""
    out: list[str] = []
    for name in names:
        for one in LEVELS.get(name, (name,)):
            if one not in out:
                out.append(one)
    ours = [f for f in FOLDS if f in out]
    return ours + [f for f in out if f not in TABLES]


def fold(text: str, names: Iterable[str]) -> str:
    """`text` with the historical folds in `names` applied (others are ignored)."""
    wanted = set(names)
    for name in FOLDS:
        if name in wanted:
            for old, new in TABLES[name].items():
                if old in text:
                    text = text.replace(old, new)
    return text
