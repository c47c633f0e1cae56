"""A VLM's words placed on a CPU reading's boxes. A plain VLM answer says
nothing of where its words lie; a CPU engine's reading of the same page does, word by word, with
its own misreadings. The two word streams are aligned (rapidfuzz's Levenshtein alignment over
words compared by their letters): a VLM word aligned to a CPU word — the same letters, or close
enough to be the CPU's misreading of it — takes that word's box; a VLM word with no partner (the
CPU missed it, split it, or read it as noise) is placed in the line of its nearest aligned
neighbours, between them, by its share of their letters. The share of the VLM's words aligned is
recorded (`Positions.aligned`): low, and the VLM's text has little support on the page."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from ..runfolder.record import Line, Positions, WordBox

# A word the alignment pairs with a different CPU word is taken for the CPU's misreading of it
# when their letters agree this much (rapidfuzz's ratio, 0–100: "tbe"/"the" 67, "Austrian"/
# "Austrlan" 88); below, it is placed as a word the CPU has no partner for.
MIN_SIMILAR = 60.0
LONE_WORD = 6  # letters of a word that counts on its own, read alike, without a paired neighbour
MIN_LETTER_WIDTH = 3  # pixels a letter needs for a placed word's share of a gap to be a box


def word_key(token: str) -> str:
    """What two readings of a word share: its letters and digits, case and compatibility forms
    folded (a VLM's `**Bold**` is the CPU's `Bold`; a lone `|` or `---` is no word)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", token).casefold() if ch.isalnum())


def _partners(a: list[str], b: list[str]) -> list[int | None]:
    """For each word of `a`, the index of its partner in `b` (or None)."""
    match: list[int | None] = [None] * len(a)
    for op in Levenshtein.opcodes(a, b):
        if op.tag == "equal":
            for k in range(op.src_end - op.src_start):
                match[op.src_start + k] = op.dest_start + k
        elif op.tag == "replace":
            for k in range(min(op.src_end - op.src_start, op.dest_end - op.dest_start)):
                if fuzz.ratio(a[op.src_start + k], b[op.dest_start + k]) >= MIN_SIMILAR:
                    match[op.src_start + k] = op.dest_start + k
    # A lone pair is chance more often than not (an alignment of two long texts pairs their
    # "the" and "of" wherever it can): a pair counts when its neighbour is paired with its
    # neighbour too, or when it is a long word read alike.
    kept: list[int | None] = [None] * len(a)
    for i, m in enumerate(match):
        if m is None:
            continue
        run = ((i > 0 and match[i - 1] == m - 1) or (i + 1 < len(a) and match[i + 1] == m + 1))
        if run or (len(a[i]) >= LONE_WORD and a[i] == b[m]):
            kept[i] = m
    return kept


# An answer's words unpaired in a row stand opposite nothing when the other reading holds fewer
# than this share as many words between the pairs either side of them: the page gave the CPU no
# text there (a passage invented beside the page's own), not text it garbled (words of its own).
BARE = 0.25


def shared_words(text: str, other: str) -> tuple[float, int, int]:
    """(share of `text`'s words that `other` reads too, paired in order as `align` pairs them;
    `text`'s word count; the longest run of `text`'s words in a row that stand opposite nothing
    in `other` — unpaired, with under BARE as many words of `other` between the pairs either side).
    Fluent text not on the page shares ~5 % with a reading of it, a transcription 57–99 %; a
    transcription's longest bare run against a CPU reading of its page is short (BENCHMARKS.md,
    "Library formats"), a passage invented beside the page's text is all of it."""
    a = [k for k in (word_key(t) for t in text.split()) if k]
    b = [k for k in (word_key(t) for t in other.split()) if k]
    if not a:
        return 0.0, 0, 0
    pairs = _partners(a, b)
    longest = 0
    for i, j in _unpaired(pairs):
        # A run is as long as it goes: the words either side of it are paired (or it is at an end).
        before = pairs[i - 1] if i > 0 else None
        after = pairs[j] if j < len(a) else None
        opposite = (len(b) if after is None else after) - (-1 if before is None else before) - 1
        if opposite < BARE * (j - i):
            longest = max(longest, j - i)
    return sum(m is not None for m in pairs) / len(a), len(a), longest


def _unpaired(pairs: list[int | None]) -> Iterator[tuple[int, int]]:
    """The runs [i, j) of words with no partner."""
    i = 0
    while i < len(pairs):
        if pairs[i] is not None:
            i += 1
            continue
        j = i
        while j < len(pairs) and pairs[j] is None:
            j += 1
        yield i, j
        i = j


def align(text: str, cpu: Positions) -> Positions | None:
    """`text`'s words where they lie, from `cpu`'s boxes; None when none of them aligns (then
    the page has no positions to give)."""
    vlm = [t for t in text.split() if word_key(t)]
    where = [(li, w) for li, line in enumerate(cpu.lines) for w in line.words]
    if not vlm or not where:
        return None
    match = _partners([word_key(t) for t in vlm], [word_key(w[5]) for _, w in where])
    if not any(m is not None for m in match):
        return None
    placed: list[tuple[int, WordBox]] = [(-1, (0, 0, 0, 0, None, t)) for t in vlm]
    for i, m in enumerate(match):
        if m is not None:
            li, w = where[m]
            placed[i] = (li, (w[0], w[1], w[2], w[3], None, vlm[i]))
    for i, j in _unpaired(match):
        _place(vlm, i, j, match, where, cpu, placed)
    groups: list[tuple[int, list[WordBox]]] = []  # runs of words on one CPU line, in the VLM's order
    for li, word in placed:
        if groups and groups[-1][0] == li:
            groups[-1][1].append(word)
        else:
            groups.append((li, [word]))
    out = [Line(box=(min(w[0] for w in ws), min(w[1] for w in ws), max(w[2] for w in ws), max(w[3] for w in ws)),
                words=ws, block=cpu.lines[li].block) for li, ws in groups]
    share = sum(1 for m in match if m is not None) / len(vlm)
    return Positions(width=cpu.width, height=cpu.height, source=f"aligned:{cpu.source}", lines=out,
                     aligned=round(share, 3))


def _place(vlm: list[str], i: int, j: int, match: list[int | None], where: list[tuple[int, WordBox]],
           cpu: Positions, placed: list[tuple[int, WordBox]]) -> None:
    """Place the unaligned words vlm[i:j] in the line of their aligned neighbours: between the
    previous and the next when they share a line, else after the previous (before the next) to
    the line's end; each word gets its share of the gap by its letters. A gap too narrow for
    them (the CPU read them into its neighbour) shares the neighbour's box."""
    prev_at = match[i - 1] if i > 0 else None
    next_at = match[j] if j < len(vlm) else None
    before = where[prev_at] if prev_at is not None else None
    after = where[next_at] if next_at is not None else None
    if before is not None:
        li, prev = before
        box = cpu.lines[li].box
        x0 = prev[2]
        x1 = after[1][0] if after is not None and after[0] == li else box[2]
        y0, y1 = box[1], box[3]
        fallback = prev
    else:
        assert after is not None  # align() returns early when no word aligns
        li, nxt = after
        box = cpu.lines[li].box
        x0, x1, y0, y1 = box[0], nxt[0], box[1], box[3]
        fallback = nxt
    words = vlm[i:j]
    letters = sum(len(w) for w in words)
    if x1 - x0 < MIN_LETTER_WIDTH * letters:
        x0, x1, y0, y1 = fallback[0], fallback[2], fallback[1], fallback[3]
    x = float(x0)
    for k, word in enumerate(words, i):
        width = (x1 - x0) * len(word) / letters
        placed[k] = (li, (int(x), y0, max(int(x) + 1, int(x + width)), y1, None, word))
        x += width
