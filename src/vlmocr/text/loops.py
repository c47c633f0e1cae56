"""Loops: find where a reading repeats itself, and salvage the text before the repetition.

A vision-language model that loops emits dot leaders running to `max_tokens`, one table row
fifty times, the page again from the top, or a numbered list counting on with the same content.
`detect_loop` says what repeated, where, and how much of the text it covers, so that
`trim_loop` can keep the text before the loop. Legitimate repetition (a table of contents, price
lists, refrains, numeric tables, separators, a form's stack of blank rules) stays below the
thresholds.

All thresholds are module constants; each says why it has its value. The detector is plain
Python built on C-speed string operations (`str.find`, slice comparison, `re`), linear in the
text length: a 5,000-character page takes about a millisecond.
"""

from __future__ import annotations

import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import accumulate

# --------------------------------------------------------------------------------------------
# Loop thresholds

# A repeated unit that contains a letter must cover at least this many characters, and
# repeat at least TEXT_MIN_REPEATS times, to be a loop. 80 characters is "the " twenty times
# or one 20-character line four times: no real page repeats a word twenty times in a row,
# while a single line three times in a row does occur on forms (three signature lines).
TEXT_MIN_SPAN = 80
TEXT_MIN_REPEATS = 4
# A unit this long (a paragraph, a block of rows, a whole page) is a loop from its second
# consecutive verbatim copy: a printed page never repeats 200 characters verbatim back to
# back, while models re-emit the page from the top as a common failure.
LONG_UNIT_CHARS = 200
# Units with no letter at all (dot leaders, "| | | |" rows, rules of dashes or underscores,
# bare numbers) occur legitimately in runs: a table of contents has leaders of 20–80 dots per
# line, forms have stacks of ten or fifteen blank rules. Only a run of at least this many
# copies and characters is a loop; a model looping on such a unit runs on for thousands.
BARE_MIN_REPEATS = 20
BARE_MIN_SPAN = 200
# The last copy of a loop that runs to the end is often cut short (generation stopped
# mid-unit): half a copy of tolerance for units under LONG_UNIT_CHARS. Long units get none: a
# refrain sung after every verse repeats a hundred characters at a distance of two hundred,
# which is 1.5 "copies" of a 200-character unit.
REPEAT_SLACK = 0.5
# Any copy may lack its trailing separator (the final newline, the blank line after it).
EDGE_CHARS = 2
# A page re-emitted from the top and cut by max_tokens holds less than two copies. It is a
# loop when the repetition begins within this many characters of the start (a preamble such
# as a code fence) and the repeated part reaches LONG_UNIT_CHARS.
RESTART_MAX_LEAD = 100
# A loop that does not reach the end of the text (the model looped, then went on) is only
# reported when it covers this share of the text or has twice the copies otherwise required:
# mid-page repetition is more often genuine (a form's repeated fields) than a tail is.
MID_MIN_SHARE = 0.25

# A numbered list whose items are otherwise identical ("1. Item", "2. Item", …) is a loop
# from this many items on; a real form rarely numbers more than a handful of identical
# blank entries.
COUNTER_MIN_REPEATS = 10
# …and a bare counter ("1", "2", "3" … or "| 17 | | |" rows) from this many: numbered blank
# rows on a register page stay below forty, a model counting off runs to hundreds.
BARE_COUNTER_MIN_REPEATS = 40

# Pairs of neighbouring blocks checked for a constant step in a long numbered run: a real
# table's irregular figures fail at the first pair, a model counting on passes them all.
COUNTER_SAMPLES = 64

# Character-level search: the n-gram length used to find where a text repeats. Twelve
# characters rarely recur by chance in prose, yet fit inside a loop with a period of one
# character.
CHAR_GRAM = 12
# Longest period searched for: a whole page (3–6k characters) re-emitted from the top.
MAX_CHAR_PERIOD = 8000
# Anchors are taken every ANCHOR_STEP characters. Every loop that the thresholds above can
# report spans at least its period plus CHAR_GRAM plus this step, so an anchor always lands
# inside it. Texts over ANCHOR_STEP * MAX_ANCHORS (32,000) characters are sampled more
# sparsely, to stay linear; loops that long have long spans anyway.
ANCHOR_STEP = 16
MAX_ANCHORS = 2000
# Occurrences of an anchor's n-gram tried as periods before moving on: the nearest ones are
# often a short sub-period inside a longer repeated row ("<td></td>" inside a "<tr>…</tr>").
CHAR_TRIES = 4

# A loop interrupted by at most this many whitespace characters (a wrapped line, a stray line
# break between two HTML rows) is one loop: the copies after the break continue the cycle.
RUN_GAP_MAX = 2

# Line-level search: repeated blocks of up to this many lines (a table row split over lines,
# a recipe's five ingredients, a three-line slogan).
MAX_BLOCK_LINES = 12

# Near-repetition at the end (the model cycles through a few variants: "Hakate Toolbox",
# "Hakete Toolbox", "Hekate Toolbox"…): a tail of at least FUZZY_MIN_LINES lines with at most
# this ratio of distinct lines (about three copies of each on average). A poem with a refrain
# or a price list stays far above it: most of their lines are distinct.
FUZZY_MIN_LINES = 12
FUZZY_MAX_DISTINCT = 0.34
# Same on word trigrams, for loops that vary inside one long line ("I'll do it. I'll start.
# I'll begin…"). Prose has nearly all trigrams distinct; a loop cycles through a few.
FUZZY_MIN_TRIGRAMS = 40
FUZZY_MAX_DISTINCT_TRIGRAMS = 0.30

# The last line repeated verbatim from earlier text (the model re-emits a passage it already
# read, often wrapped in **bold**): reported when at least this long, after markup and
# spacing are removed. 60 characters is a long sentence in Chinese and a full line of print;
# shorter lines ("Heil Hitler!") legitimately recur. A last line equal to a whole earlier line
# (a letterhead or signature line repeated for a second signed section) is only reported
# when it is paragraph-sized, LONG_UNIT_CHARS or more.
DUP_TAIL_MIN_CHARS = 60


@dataclass(frozen=True)
class LoopFinding:
    """A repetition found in a reading.

    `start` is where the looping region begins (its first copy), `cut` where the redundant
    text begins (`trim_loop` keeps ``text[:cut] + text[end:]``), `end` where the region ends
    (``len(text)`` when it runs to the end). `share` is ``(end - start) / len(text)``.
    `repeats` is the number of copies (approximate for the fuzzy kinds).
    """

    kind: str  # chars | lines | counter | fuzzy_lines | fuzzy_tokens | duplicate_tail
    unit: str  # one copy of what repeats, as it appears in the text
    start: int
    cut: int
    end: int
    repeats: float
    share: float
    at_end: bool

    @property
    def span(self) -> int:
        return self.end - self.start


# --------------------------------------------------------------------------------------------
# Loop detection

_LETTER = re.compile(r"[^\W\d_]")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[^\W_]+")
_NON_ALNUM = re.compile(r"[\W_]+")
_MARKUP = re.compile(r"[*_`#>~]+")


EXACT_KINDS = frozenset({"chars", "lines", "counter"})


class _Lines:
    """The non-blank lines of a text: `norm[j]` is line j with its whitespace collapsed;
    `start(j)`/`end(j)` are the offsets of its first and after its last visible character
    (computed on demand: only the few lines a finding names need them)."""

    __slots__ = ("_cumulative", "index", "norm", "raw")

    def __init__(self, text: str) -> None:
        self.raw = text.split("\n")
        collapsed = [" ".join(r.split()) for r in self.raw]
        self.index = [i for i, norm in enumerate(collapsed) if norm]
        self.norm = [collapsed[i] for i in self.index]
        self._cumulative = list(accumulate(map(len, self.raw)))

    def __len__(self) -> int:
        return len(self.norm)

    def _offset(self, i: int) -> int:
        return (self._cumulative[i - 1] if i else 0) + i  # + one newline per earlier line

    def start(self, j: int) -> int:
        raw = self.raw[self.index[j]]
        return self._offset(self.index[j]) + len(raw) - len(raw.lstrip())

    def end(self, j: int) -> int:
        return self._offset(self.index[j]) + len(self.raw[self.index[j]].rstrip())


def detect_loop(text: str) -> LoopFinding | None:
    """Find the most extensive loop in `text`, or None.

    Looks for exact periodic runs (character level: dot leaders, "the the the", a repeated
    HTML row; line level: repeated lines and blocks of lines), numbered lists counting on with
    identical content, near-repetitive tails (line and word-trigram level) and a final
    paragraph that repeats earlier text. Legitimate repetition (a table of contents, price
    lists, refrains, numeric tables, separators) stays below the thresholds above.
    """
    if not text or len(text) < 2 * CHAR_GRAM:
        return None
    lines = _Lines(text)
    candidates: list[LoopFinding] = []
    candidates += _char_runs(text)
    candidates += _line_runs(text, lines)
    # A fuzzy finding must cover twice the best exact one to win: past half the text it can't.
    if not any(2 * f.span > len(text) for f in candidates):
        for finder in (_fuzzy_lines, _fuzzy_tokens, _duplicate_tail):
            found = finder(text, lines)
            if found is not None:
                candidates.append(found)
    if not candidates:
        return None
    return _best(candidates)


def _best(candidates: list[LoopFinding]) -> LoopFinding | None:
    """The most extensive region wins (it is what a caller must trim); ties go to the earlier
    region, then the shorter unit. Exact repeats trim precisely, so a fuzzy finding only wins
    when it covers more than twice as much."""

    def rank(f: LoopFinding) -> tuple[int, int, int]:
        return (f.span, -f.start, -(f.cut - f.start))

    exact = [f for f in candidates if f.kind in EXACT_KINDS]
    fuzzy = [f for f in candidates if f.kind not in EXACT_KINDS]
    best_exact = max(exact, key=rank) if exact else None
    best_fuzzy = max(fuzzy, key=rank) if fuzzy else None
    if best_exact is None:
        return best_fuzzy
    if best_fuzzy is not None and best_fuzzy.span > 2 * best_exact.span:
        return best_fuzzy
    return best_exact


def trim_loop(text: str, finding: LoopFinding) -> str:
    """Cut the redundant copies: keep the text before the loop and one copy of its unit.

    For a loop that runs to the end (the usual case: generation stopped at max_tokens) this is
    the text up to the end of the first copy, trailing spaces removed.
    """
    kept = text[: finding.cut]
    rest = text[finding.end :]
    if not rest.strip():
        return kept.rstrip()
    return kept + rest


def _earliest_repetitive_suffix(keys: Sequence[Hashable], min_count: int, max_distinct: float) -> int:
    """Smallest index i such that keys[i:] has at least `min_count` items of which at most
    `max_distinct` (a ratio) are distinct; -1 if none."""
    distinct: set[Hashable] = set()
    best = -1
    total = len(keys)
    for pos in range(total - 1, -1, -1):
        distinct.add(keys[pos])
        count = total - pos
        excess = len(distinct) - max_distinct * count
        if excess <= 0 and count >= min_count:
            best = pos
        elif excess > max_distinct * pos:
            break  # even if every earlier item repeated, the ratio could not come back down
    return best


def _has_letter(s: str) -> bool:
    return _LETTER.search(s) is not None


def _required_repeats(unit: str) -> float:
    size = max(1, len(unit))
    if _has_letter(unit):
        if size >= LONG_UNIT_CHARS:
            return 2.0
        return float(max(TEXT_MIN_REPEATS, math.ceil(TEXT_MIN_SPAN / size)))
    return float(max(BARE_MIN_REPEATS, math.ceil(BARE_MIN_SPAN / size)))


def _significant(unit: str, start: int, end: int, need: float, n: int, at_end: bool) -> bool:
    """Whether `end - start` characters of copies of `unit` make a loop; `need` copies are
    required (see the thresholds above)."""
    period = len(unit)
    copies = (end - start + EDGE_CHARS) / period
    if at_end:
        if period < LONG_UNIT_CHARS:
            copies += REPEAT_SLACK
        elif start <= RESTART_MAX_LEAD and end - start - period >= LONG_UNIT_CHARS:
            return True
    if copies < need:
        return False
    return at_end or (end - start) / n >= MID_MIN_SHARE or copies >= 2 * need


def _gallop(equal: Callable[[int], bool], lo: int, step: int, limit: int) -> int:
    """Largest f <= limit with equal(f), given equal(lo): gallop from lo by doubling steps, then
    bisect. Each probe is one C-level slice comparison."""
    hi = limit + 1
    while True:
        probe = min(lo + step, limit)
        if probe <= lo:
            return lo
        if equal(probe):
            lo = probe
            step *= 2
        else:
            hi = probe
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if equal(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _forward_match(text: str, i: int, j: int, known: int, limit: int) -> int:
    """Largest f <= limit with text[i:i+f] == text[j:j+f], given that `known` matches."""
    lo = min(known, limit)
    return _gallop(lambda f: text[i : i + f] == text[j : j + f], lo, max(lo, 1), limit)


def _backward_match(text: str, i: int, j: int, limit: int) -> int:
    """Largest g <= limit with text[i-g:i] == text[j-g:j]."""
    return _gallop(lambda g: text[i - g : i] == text[j - g : j], 0, 8, limit)


def _judge_run(text: str, start: int, end: int, period: int) -> LoopFinding | None:
    """A character run [start, end) with the given period: a loop or not."""
    n = len(text)
    unit = text[start : start + period]
    # Align the copy kept by trim_loop to whole lines when the unit spans lines, else to whole
    # words, so that the salvaged text does not end in half a word.
    boundary = -1
    if start > 0 and text[start - 1] != "\n":
        boundary = unit.find("\n")
        if boundary < 0 and not text[start - 1].isspace():
            boundary = unit.find(" ")
    if 0 <= boundary < period - 1 and end - (start + boundary + 1) >= period:
        start += boundary + 1
        unit = text[start : start + period]
    at_end = not text[end:].strip()
    if at_end:
        end = n
    else:
        # Text after a loop may begin like the unit; only whole copies belong to the loop.
        end = start + (end - start + EDGE_CHARS) // period * period
    if not _significant(unit, start, end, _required_repeats(unit), n, at_end):
        return None
    repeats = (end - start) / period
    return LoopFinding("chars", unit, start, start + period, end, repeats, (end - start) / n, at_end)


def _continue_run(text: str, end: int, period: int) -> int:
    """Extend a periodic run that ends at `end` across short whitespace interruptions after
    which the text resumes the cycle where it broke off."""
    n = len(text)
    while end < n:
        for gap in range(1, RUN_GAP_MAX + 1):
            resume = end + gap
            if resume >= n or not text[end:resume].isspace():
                return end
            size = min(period, n - resume)
            if text[resume : resume + size] != text[end - period : end - period + size]:
                continue
            if size < period:
                return n  # the text ends inside the resumed copy
            end = resume + period + _forward_match(text, resume, resume + period, 0, n - resume - period)
            break
        else:
            return end
    return end


def _char_runs(text: str) -> list[LoopFinding]:
    """Exact periodic runs found from anchors: where an anchor's n-gram recurs at distance p,
    the run around it with period p is measured by slice comparisons."""
    n = len(text)
    gram_len = CHAR_GRAM
    step = max(ANCHOR_STEP, n // MAX_ANCHORS)
    found: list[LoopFinding] = []
    free_from = 0  # anchors inside a run already reported are skipped
    for a in range(0, n - gram_len, step):
        if a < free_from:
            continue
        gram = text[a : a + gram_len]
        lo = a + 1
        hi = min(n, a + MAX_CHAR_PERIOD + gram_len)
        for _ in range(CHAR_TRIES):
            j = text.find(gram, lo, hi)
            if j < 0:
                break
            period = j - a
            forward = _forward_match(text, a, j, gram_len, n - j)
            backward = _backward_match(text, a, j, a)
            run_start, run_end = a - backward, j + forward
            if (run_end - run_start) / period + REPEAT_SLACK >= _required_repeats(text[run_start : run_start + period]):
                # Already a loop by itself: go on across a stray line break. (Not before: a
                # stack of ruled lines is not one long rule.)
                run_end = _continue_run(text, run_end, period)
            finding = _judge_run(text, run_start, run_end, period)
            if finding is not None:
                found.append(finding)
                free_from = finding.end
                break
            # Later occurrences inside this run only give multiples of the same period.
            lo = max(j + 1, run_end - gram_len + 1)
    return found


def _equal_runs(keys: list[str], k: int) -> list[tuple[int, int]]:
    """Maximal runs of lines i..j (inclusive) with keys[x] == keys[x+k] throughout, that hold
    at least two copies of a k-line block."""
    if len(keys) < 2 * k:
        return []
    flags = bytes(map(operator.eq, keys, keys[k:]))
    if 1 not in flags:
        return []
    pattern = re.compile(b"\x01{%d,}" % k)
    return [(m.start(), m.end() - 1 + k) for m in pattern.finditer(flags)]


def _line_runs(text: str, lines: _Lines) -> list[LoopFinding]:
    m = len(lines)
    if m < 2:
        return []
    exact = lines.norm
    has_digits = any(_DIGITS.search(s) for s in exact)
    shapes = [_DIGITS.sub("0", s) for s in exact] if has_digits else exact
    found: list[LoopFinding] = []
    covered: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
    for k in range(1, min(MAX_BLOCK_LINES, m // 2) + 1):
        for counter, keys in ((False, exact), (True, shapes)):
            if counter and not has_digits:
                continue
            for first, last in _equal_runs(keys, k):
                # A block of 2k lines repeating inside a run of k-line blocks is the same loop.
                if any(a <= first and last <= b for a, b in covered[counter]):
                    continue
                finding = _judge_lines(text, lines, keys, first, last, k, counter=counter)
                if finding is not None:
                    found.append(finding)
                    covered[counter].append((first, last))
    return found


def _judge_lines(
    text: str, lines: _Lines, keys: list[str], first: int, last: int, k: int, *, counter: bool
) -> LoopFinding | None:
    n = len(text)
    start = lines.start(first)
    unit = text[start : lines.start(first + k)]
    at_end = not text[lines.end(last) :].strip()
    if not at_end and last == len(lines) - 2:
        # A last line cut short by max_tokens, a prefix of the line the cycle expects next.
        expected, partial = keys[last + 1 - k], keys[last + 1]
        if expected.startswith(partial):
            at_end = True
    if at_end:
        end = n
    else:
        # Only whole blocks belong to a loop that the text leaves.
        last = first + (last - first + 1) // k * k - 1
        end = lines.end(last)
    count = last - first + 1
    repeats = count / k
    share = (end - start) / n
    if counter:
        if not _is_counter(lines.norm[first : last + 1], k):
            return None
        need = float(COUNTER_MIN_REPEATS if _has_letter(unit) else BARE_COUNTER_MIN_REPEATS)
        kind = "counter"
    else:
        need = _required_repeats(unit)
        kind = "lines"
    if repeats < need or not (at_end or share >= MID_MIN_SHARE or repeats >= 2 * need):
        return None
    return LoopFinding(kind, unit, start, start + len(unit), end, repeats, share, at_end)


def _is_counter(norms: list[str], k: int) -> bool:
    """Blocks of k lines whose numbers change by the same step from block to block, with at
    least one number changing: a list counting on. Numbers that vary irregularly (a real
    table) fail; identical blocks are exact repeats, found elsewhere. Long runs are checked
    on COUNTER_SAMPLES evenly spaced pairs of neighbouring blocks."""
    copies = len(norms) // k
    if copies < 3:
        return False

    def numbers(c: int) -> list[int]:
        return [int(d) for d in _DIGITS.findall(" ".join(norms[c * k : (c + 1) * k]))]

    steps = [b - a for a, b in zip(numbers(0), numbers(1))]
    if not any(steps):
        return False
    stride = max(1, (copies - 1) // COUNTER_SAMPLES)
    for c in range(1, copies - 1, stride):
        if [b - a for a, b in zip(numbers(c), numbers(c + 1))] != steps:
            return False
    return True


def _fuzzy_lines(text: str, lines: _Lines) -> LoopFinding | None:
    """A tail where a few distinct lines cycle with small variations."""
    if len(lines) < FUZZY_MIN_LINES:
        return None
    keys = [_NON_ALNUM.sub("", norm).lower() for norm in lines.norm]
    informative = [i for i, key in enumerate(keys) if len(key) >= 2]
    if len(informative) < FUZZY_MIN_LINES:
        return None
    best = _earliest_repetitive_suffix([keys[i] for i in informative], FUZZY_MIN_LINES, FUZZY_MAX_DISTINCT)
    if best < 0:
        return None
    region = informative[best:]
    counts = Counter(keys[i] for i in region)
    first = next(i for i in region if counts[keys[i]] >= 2)
    n = len(text)
    start = lines.start(first)
    unit = text[start : lines.end(first)]
    copies = sum(1 for i in region if i >= first)
    repeats = copies / max(1, len({keys[i] for i in region if i >= first}))
    return LoopFinding("fuzzy_lines", unit, start, start + len(unit), n, repeats, (n - start) / n, True)


def _fuzzy_tokens(text: str, lines: _Lines) -> LoopFinding | None:
    """A tail whose word trigrams are mostly repeats of a few. Numbers count as words: rows of
    a table that differ only in their figures ("91.9 kg", "83.8 kg") are not a loop."""
    words = _WORD.findall(text)
    if len(words) < FUZZY_MIN_TRIGRAMS + 2:
        return None
    lowered = [w.lower() for w in words]
    trigrams = list(zip(lowered, lowered[1:], lowered[2:]))
    total = len(trigrams)
    best = _earliest_repetitive_suffix(trigrams, FUZZY_MIN_TRIGRAMS, FUZZY_MAX_DISTINCT_TRIGRAMS)
    if best < 0:
        return None
    counts = Counter(trigrams[best:])
    first = next(p for p in range(best, total) if counts[trigrams[p]] >= 2)
    n = len(text)
    spans = [m.span() for m in _WORD.finditer(text)]
    start = spans[first][0]
    cut = spans[first + 2][1]
    repeats = (total - first) / max(1, len(set(trigrams[first:])))
    return LoopFinding("fuzzy_tokens", text[start:cut], start, cut, n, repeats, (n - start) / n, True)


def _markup_free(s: str) -> str:
    return " ".join(_MARKUP.sub("", s).split())


def _duplicate_tail(text: str, lines: _Lines) -> LoopFinding | None:
    """The last line repeats text that was already read (re-emitted, perhaps in bold)."""
    if len(lines) < 2:
        return None
    start, end = lines.start(len(lines) - 1), lines.end(len(lines) - 1)
    key = _markup_free(text[start:end])
    if len(key) < DUP_TAIL_MIN_CHARS or key not in _markup_free(text[:start]):
        return None
    if len(key) < LONG_UNIT_CHARS and key in {_markup_free(norm) for norm in lines.norm[:-1]}:
        return None
    n = len(text)
    return LoopFinding("duplicate_tail", text[start:end], start, start, n, 2.0, (n - start) / n, True)

