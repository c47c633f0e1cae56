"""Which reading of a page to keep when a composite engine (`--ocr-engine tesseract+rapidocr`)
read it with every part: the readable one, then the better quality signal (engines/choice.py
decides which engine reads a run or a document; this, which reading of a page)."""

from __future__ import annotations

from dataclasses import dataclass

from ..positions.order import SIDE_NOTES
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
    those, one whose lines are in order (no side notes read apart), then the higher signal score;
    a tie goes to the first named (Tesseract in `tesseract+rapidocr`: the better engine on
    average). The raw score, not the margin over each engine's threshold: on the development pages it
    keeps the better reading more often (benchmarks/bench_engine_choice.py)."""
    def rank(i: int) -> tuple[bool, bool, float, int]:
        c = candidates[i]
        # A reading whose lines are out of place (positions/order.py) loses to one in order,
        # whatever their words score: the words are the same, their order is what differs.
        return (c.readable, not c.quality.get(SIDE_NOTES), _score(c), -i)

    best = max(range(len(candidates)), key=rank)
    others = [c for i, c in enumerate(candidates) if i != best]
    chosen = candidates[best]
    if chosen.readable and not all(o.readable for o in others):
        why = f"{', '.join(o.engine for o in others if not o.readable)} gave no usable reading"
    else:
        vs = ", ".join(f"{o.engine} {_score(o):.3f}" for o in others)
        why = f"better signal ({_score(chosen):.3f} vs {vs})"
        if not chosen.quality.get(SIDE_NOTES) and (aside := [o.engine for o in others if o.quality.get(SIDE_NOTES)]):
            why = f"in order ({', '.join(aside)} read side notes apart from their lines); {why}"
    return best, why


def _score(c: Candidate) -> float:
    score = c.quality.get("score")
    return float(score) if isinstance(score, (int, float)) else 0.0
