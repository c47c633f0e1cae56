"""The quality signal: how likely a reading is to be right, judged from the reading alone.

Every page record that has a reading carries ``quality``: one **score** in [0, 1] (higher is
better) and the components it is made of, each a share in [0, 1] or None when it cannot be
measured:

* ``confidence`` — the engine's own: RapidOCR's line scores, Tesseract's word confidences (its
  TSV), a VLM's geometric-mean token probability (``logprobs``); each weighted by characters.
* ``known_words`` — the share of words found in the word list of the page's language
  (textquality: wordfreq). None when the language has no word list or the page has fewer than
  ``MIN_WORDS`` words (a caption or a page number cannot be judged).
* ``implausible`` — the share of characters a page in that language and script should not hold
  (control characters, U+FFFD, letters of another script: textquality).
* ``garbage_lines`` — the share of lines that are mostly not letters or digits (``'. ,- ;'``),
  or that the engine read with a confidence below its **shaky-line cutoff** (``[line_confidence]``
  in the thresholds file, per engine: each engine's scores mean something else — RapidOCR drops
  lines below 0.5 itself and scores a mangled Fraktur line 0.55–0.85, Tesseract's word
  confidences run lower). This is the component that separates the moderate failures (10–25 %
  CER with plausible words) from good pages: they have many lines the engine was unsure of.
* ``text_vs_ink`` — characters read against the ink on the page, 1 when a page yields the text
  its ink suggests (``CHARS_PER_INK``), lower when a page full of ink gives a few words.

The score is the weighted mean of the components that were measured, with ``implausible``
turned into a goodness (``1 − implausible × IMPLAUSIBLE_SCALE``, at least 0) and
``garbage_lines`` too (``1 − garbage_lines``). The weights and the rule live in a data file,
``signal_thresholds.toml``: a reading is **suspect** when its score is below the threshold for
its engine and script, calibrated on real pages against human transcriptions
(``benchmarks/bench_signal.py``; BENCHMARKS.md). A script has its own threshold so that good
polytonic Greek, whose words a modern word list knows only in part, is not flagged for being
Greek; an engine without a calibration of its own gets ``[default]``.

The page's language (a wordfreq code) is what the record says (a VLM's ``fields.language``),
else the language guessed from the text's stopwords, else the language the run was given
(``--lang``); its script is Greek or Cyrillic for those languages, Fraktur when the given
language names Fraktur data (``frk``, ``Fraktur``, ``deu_latf``), else Latin.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..runfolder.record import JsonObject, Row, Signal, Status
from .textquality import MIN_WORDS, assess_text, guess_language, lexicon, other_language, wordfreq_code

THRESHOLDS_FILE = Path(__file__).with_name("signal_thresholds.toml")

# A line the engine itself scored below this is a garbage line, whatever it says — for an
# engine the thresholds file gives no cutoff of its own.
LOW_LINE_CONFIDENCE = 0.5
# Implausible characters cost this much goodness per unit share: 5 % of them make it 0.
IMPLAUSIBLE_SCALE = 20.0
# A page this nearly blank says nothing about how much text it should yield.
MIN_INK = 0.002

_GREEK = {"el", "grc"}
_CYRILLIC = {"ru", "uk", "bg"}
_FRAKTUR = re.compile(r"frk|fraktur|latf", re.I)


def page_language(text: str, stated: str | None = None, given: str | None = None) -> str | None:
    """The wordfreq code of the page's language: `stated` by the record, else guessed from the
    text, else `given` to the run."""
    return wordfreq_code(stated) or guess_language(text) or wordfreq_code(given)


def script_of(language: str | None, given: str | None = None) -> str:
    """ISO 15924 code of the page's expected script (the calibration's second key)."""
    if language in _GREEK:
        return "Grek"
    if language in _CYRILLIC:
        return "Cyrl"
    if given and _FRAKTUR.search(given):
        return "Latf"
    return "Latn"


def _is_garbage(line: str) -> bool:
    """A line that is mostly not letters or digits: `'. ,- ;`, `|||`, `~~ ^`."""
    visible = [c for c in line if not c.isspace()]
    return bool(visible) and sum(c.isalnum() for c in visible) < 0.5 * len(visible)


def garbage_line_share(text: str, line_confidences: list[float] | None, cutoff: float = LOW_LINE_CONFIDENCE) -> float:
    """Share of the text's lines that are garbage by their characters or by the engine's score
    (below `cutoff`). The engines give one score per line they print, so the two line up when
    their counts match; when they do not, the larger of the two shares."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return 0.0
    by_text = [_is_garbage(line) for line in lines]
    if not line_confidences:
        return sum(by_text) / len(lines)
    low = [c < cutoff for c in line_confidences]
    if len(low) == len(lines):
        return sum(a or b for a, b in zip(by_text, low)) / len(lines)
    return max(sum(by_text) / len(lines), sum(low) / len(low))


@dataclass(frozen=True)
class Rule:
    """The calibrated rule: component weights, the text a unit of ink should yield, each
    engine's shaky-line cutoff, and the score thresholds per engine and script."""

    weights: dict[str, float]
    chars_per_ink: float
    thresholds: dict[str, dict[str, float]]
    line_confidence: dict[str, float] = field(default_factory=dict)

    def line_cutoff(self, engine: str) -> float:
        """The line score below which `engine`'s line counts as garbage."""
        return self.line_confidence.get(engine, self.line_confidence.get("default", LOW_LINE_CONFIDENCE))

    def threshold(self, engine: str, script: str) -> float | None:
        """The score below which a reading of `engine` in `script` is suspect; None: no rule."""
        table = self.thresholds.get(engine, self.thresholds.get("default", {}))
        value = table.get(script, table.get("any"))
        return None if value is None else float(value)


@lru_cache(maxsize=4)
def load_thresholds(path: Path = THRESHOLDS_FILE) -> Rule:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return Rule(weights={k: float(v) for k, v in data["weights"].items()},
                chars_per_ink=float(data["chars_per_ink"]),
                thresholds={k: {s: float(t) for s, t in v.items()} for k, v in data["thresholds"].items()},
                line_confidence={k: float(v) for k, v in data.get("line_confidence", {}).items()})


def score_of(components: dict[str, float | None], weights: dict[str, float]) -> float:
    """The weighted mean of the measured components' goodness values (see the module doc)."""
    goodness = {
        "confidence": components.get("confidence"),
        "known_words": components.get("known_words"),
        "implausible": max(0.0, 1.0 - (components.get("implausible") or 0.0) * IMPLAUSIBLE_SCALE),
        "garbage_lines": 1.0 - (components.get("garbage_lines") or 0.0),
        "text_vs_ink": components.get("text_vs_ink"),
    }
    total = weight = 0.0
    for name, value in goodness.items():
        w = weights.get(name, 0.0)
        if value is not None and w > 0:
            total += w * value
            weight += w
    return round(total / weight, 4) if weight else 1.0


def measure(text: str, *, engine: str = "", lang: str | None = None, stated_lang: str | None = None,
            confidence: float | None = None, line_confidences: list[float] | None = None,
            ink: float | None = None, rule: Rule | None = None, expected: str | None = None) -> Signal:
    """The signal of one reading. `lang` is the language the run was given (`--lang`, a
    Tesseract name or a code); `stated_lang` one the reading states itself; `ink` the page
    image's `ink_share` (None without an image); `expected` the page's language when a person
    said it (manifest, an explicit --lang: "deu+eng" allows both)."""
    rule = rule or load_thresholds()
    code = page_language(text, stated_lang, lang)
    chars, n_words, known, bad = assess_text(text, code, MIN_WORDS)
    judged = n_words >= MIN_WORDS and code is not None and lexicon(code) is not None
    known_share = known / n_words if judged else None
    text_vs_ink = None
    if ink is not None and ink >= MIN_INK:
        text_vs_ink = min(1.0, chars / (ink * rule.chars_per_ink))
    components: dict[str, float | None] = {
        "confidence": None if confidence is None or math.isnan(confidence) else max(0.0, min(1.0, confidence)),
        "known_words": known_share,
        "implausible": len(bad) / chars if chars else 0.0,
        "garbage_lines": garbage_line_share(text, line_confidences, rule.line_cutoff(engine)),
        "text_vs_ink": text_vs_ink,
    }
    return Signal(score=score_of(components, rule.weights), confidence=components["confidence"],
                  known_words=known_share, implausible=components["implausible"] or 0.0,
                  garbage_lines=components["garbage_lines"] or 0.0, text_vs_ink=text_vs_ink,
                  language=code, script=script_of(code, lang or stated_lang), words=n_words,
                  wrong_language=_wrong_language(text, expected, n_words))


def _wrong_language(text: str, expected: str | None, n_words: int) -> str | None:
    if not expected or n_words < MIN_WORDS:
        return None
    codes = [code for part in expected.split("+") if (code := wordfreq_code(part))]
    return other_language(text, codes)


def is_suspect(signal: Signal, engine: str, rule: Rule | None = None) -> bool:
    threshold = (rule or load_thresholds()).threshold(engine, signal.script)
    return threshold is not None and signal.score < threshold


def judge(text: str, engine: str, **kwargs: Any) -> tuple[JsonObject, bool]:
    """(the record's `quality`, suspect?) for one reading of `engine`: `measure` and the rule."""
    rule = load_thresholds()
    sig = measure(text, engine=engine, rule=rule, **kwargs)
    threshold = rule.threshold(engine, sig.script)
    return sig.as_dict(threshold), (threshold is not None and sig.score < threshold) or sig.wrong_language is not None


def write_thresholds(fitted: dict[str, dict[str, float]], path: Path = THRESHOLDS_FILE,
                     line_cutoffs: dict[str, float] | None = None) -> None:
    """Replace the [thresholds.<engine>] tables of the file with `fitted` (and the engines'
    entries of [line_confidence] with `line_cutoffs`), keeping the rest (weights,
    chars_per_ink, the default and engines not fitted) and its comments."""
    text = path.read_text(encoding="utf-8")
    for engine, cutoff in (line_cutoffs or {}).items():
        entry = re.compile(rf"^{re.escape(engine)} = [0-9.]+$", re.M)
        section = re.search(r"^\[line_confidence\]\n", text, re.M)
        if section is None:
            raise ValueError(f"{path} has no [line_confidence] table")
        if entry.search(text[section.end():].split("\n[", 1)[0]):
            head, tail = text[:section.end()], text[section.end():]
            text = head + entry.sub(f"{engine} = {cutoff}", tail, count=1)
        else:
            text = text[:section.end()] + f"{engine} = {cutoff}\n" + text[section.end():]
    for engine, scripts in fitted.items():
        body = "".join(f"{script} = {value}\n" for script, value in sorted(scripts.items()))
        header = f"[thresholds.{engine}]\n"
        pattern = re.compile(rf"^\[thresholds\.{re.escape(engine)}\]\n(?:[^\[\n][^\n]*\n|\n)*?(?=^\[|\Z)", re.M)
        if pattern.search(text):
            text = pattern.sub(lambda _m: header + body + "\n", text, count=1)
        else:
            text = text.rstrip("\n") + "\n\n" + header + body
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    load_thresholds.cache_clear()


def record_verdict(record: Row, *, remeasure: bool = False, lang: str | None = None) -> tuple[Signal | None, bool]:
    """(the signal, suspect?) of a stored page record — what `vlmocr suspicious` and the report
    say about a page, by the rule the run applied. The stored `quality` when the record has one
    and the text is the one it was measured on; with `remeasure` (a cleaned layer, or a record
    from before the signal) the text is measured again, with the engine confidence the record
    kept. A record without text (failed, bad input) has no signal."""
    if not record.text.strip():
        return None, False
    stored = record.quality
    if stored is not None and not remeasure:
        return stored, stored.below or record.status is Status.suspect
    stated = record.fields.get("language") if record.fields else None
    quality, suspect = judge(record.text, record.engine, lang=lang, stated_lang=str(stated) if stated else None,
                             confidence=stored.confidence if stored else None, ink=None)
    if stored is not None and stored.side_notes:
        # Cleaning changes letters, not the order lines were read in: the doubt stays.
        return Signal.of({**quality, "side_notes": stored.side_notes}), True
    return Signal.of(quality), suspect
