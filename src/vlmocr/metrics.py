"""Character and word error rates (rapidfuzz), after NFC and whitespace collapsing."""

from __future__ import annotations

import re
import unicodedata

from rapidfuzz.distance import Levenshtein

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


def char_errors(hyp: str, ref: str) -> tuple[int, int]:
    """(edit distance, reference length) on normalised text."""
    h, r = normalize(hyp), normalize(ref)
    return Levenshtein.distance(h, r), len(r)


def cer(hyp: str, ref: str) -> float:
    dist, n = char_errors(hyp, ref)
    return dist / n if n else float(dist > 0)


def word_errors(hyp: str, ref: str) -> tuple[int, int]:
    h, r = normalize(hyp).split(), normalize(ref).split()
    return Levenshtein.distance(h, r), len(r)


def wer(hyp: str, ref: str) -> float:
    dist, n = word_errors(hyp, ref)
    return dist / n if n else float(dist > 0)
