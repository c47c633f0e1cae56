"""Which reading of a page to keep when a composite engine (`--ocr-engine tesseract+rapidocr`)
read it with every part: the readable one, then the better quality signal (engines/choice.py
decides which engine reads a run or a document; this, which reading of a page)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runfolder.record import JsonObject


@dataclass(frozen=True)
class Candidate:
    """One engine's reading of a page, judged: its status (quality.classify, then the signal's
    rule) and its quality signal (text/signal.py: `score`, `threshold`, components)."""

    engine: str
    readable: bool  # classified ok or suspect: neither empty, nor a loop, nor cut off
    quality: JsonObject


def pick(candidates: list[Candidate]) -> tuple[int, str]:
    """(index of the reading to keep, why). A readable reading beats one that is not; among
    those, the higher signal score; a tie goes to the first named (Tesseract in
    `tesseract+rapidocr`: the better engine on average). The raw score, not the margin over each
    engine's threshold: on ../shared/gt it keeps the better reading more often
    (benchmarks/bench_engine_choice.py)."""
    def rank(i: int) -> tuple[bool, float, int]:
        c = candidates[i]
        return (c.readable, _score(c), -i)

    best = max(range(len(candidates)), key=rank)
    others = [c for i, c in enumerate(candidates) if i != best]
    chosen = candidates[best]
    if chosen.readable and not all(o.readable for o in others):
        why = f"{', '.join(o.engine for o in others if not o.readable)} gave no usable reading"
    else:
        vs = ", ".join(f"{o.engine} {_score(o):.3f}" for o in others)
        why = f"better signal ({_score(chosen):.3f} vs {vs})"
    return best, why


def _score(c: Candidate) -> float:
    score = c.quality.get("score")
    return float(score) if isinstance(score, (int, float)) else 0.0
