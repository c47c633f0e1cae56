"""The word diff of a page's text against its ground truth, as the review view shows it."""

from __future__ import annotations

import re
import unicodedata

from rapidfuzz.distance import Levenshtein

DIFF_REFINE_CHARS = 400  # replaced word runs up to this size get a character-level diff
_TOKEN = re.compile(r"\s+|[^\s]+")


def diff_ops(text: str, truth: str) -> list[list[str]]:
    """A word diff of the OCR text against the truth, refined to characters inside short
    replaced runs that resemble each other. Ops: ``["=", s]`` same, ``["-", s]`` in the truth only (missed),
    ``["+", s]`` in the text only (inserted). Whitespace differences are ignored as the CER
    ignores them: any whitespace run matches any other."""
    a = _TOKEN.findall(unicodedata.normalize("NFC", text))
    b = _TOKEN.findall(unicodedata.normalize("NFC", truth))
    ka = [" " if t[0].isspace() else t for t in a]
    kb = [" " if t[0].isspace() else t for t in b]
    ops: list[list[str]] = []

    def emit(op: str, s: str) -> None:
        if not s:
            return
        if ops and ops[-1][0] == op:
            ops[-1][1] += s
        else:
            ops.append([op, s])

    # Runs of changed words joined by single unchanged spaces are one change: a garbled line
    # is shown as the line it should have been and the line that was read.
    runs: list[list[str]] = []  # [tag, text side, truth side]
    for op in Levenshtein.opcodes(ka, kb):
        tag, i1, i2, j1, j2 = op.tag, op.src_start, op.src_end, op.dest_start, op.dest_end
        sa, sb = "".join(a[i1:i2]), "".join(b[j1:j2])
        if tag != "equal" and runs and runs[-1][0] == "change":
            runs[-1][1] += sa
            runs[-1][2] += sb
        elif (tag == "equal" and i2 - i1 == 1 and ka[i1] == " " and runs and runs[-1][0] == "change"):
            runs.append(["space", sa, sb])
        elif tag != "equal" and len(runs) > 1 and runs[-1][0] == "space" and runs[-2][0] == "change":
            _, space_a, space_b = runs.pop()
            runs[-1][1] += space_a + sa
            runs[-1][2] += space_b + sb
        else:
            runs.append(["equal" if tag == "equal" else "change", sa, sb])
    for kind, sa, sb in runs:
        if kind != "change":
            emit("=", sa)
        elif not sb:  # in the text only
            emit("+", sa)
        elif not sa:  # in the truth only
            emit("-", sb)
        elif len(sa) + len(sb) <= DIFF_REFINE_CHARS and Levenshtein.normalized_similarity(sa, sb) >= 0.5:
            # Close enough to be a misreading: show which characters differ. Unrelated runs
            # read better as one deletion and one insertion.
            for cop in Levenshtein.opcodes(sa, sb):
                ctag, c1, c2, d1, d2 = cop.tag, cop.src_start, cop.src_end, cop.dest_start, cop.dest_end
                if ctag == "equal":
                    emit("=", sa[c1:c2])
                else:
                    emit("-", sb[d1:d2])
                    emit("+", sa[c1:c2])
        else:
            emit("-", sb)
            emit("+", sa)
    return ops
