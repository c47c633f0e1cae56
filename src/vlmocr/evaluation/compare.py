"""Two runs of the same pages: do they agree as twins, and which pages differ (information).

Twins, as seed 000 defines them ("Twin scores from the bulk run differed from the gate by up to
0.12 pp raw, within 0.1 pp after cleaning. Treat a larger gap as a pipeline change."): the pages
both runs read agree when their corpus scores differ by at most the tolerance (0.1 pp). The
score is the micro CER against truth (what the gate is scored by) when truth is given; without
truth it is the micro CER of A's text against B's, which bounds the gap between any two scores
(per page, |d(A, T) − d(B, T)| ≤ d(A, B)). Pages differing by more are listed, never decisive."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..exceptions import UsageError
from ..runfolder.record import JsonObject, Row
from .score import distances, normalisation_name, rate, run_records
from .truth import TruthPage, load_truth, match_truth


@dataclass
class PageDiff:
    doc_id: str
    page: int
    status_a: str | None
    status_b: str | None
    cer_ab: float | None  # CER of A's text with B's as the reference
    cer_a: float | None = None  # against truth
    cer_b: float | None = None
    flagged: bool = False
    reason: str = ""

    @property
    def delta(self) -> float | None:
        return None if self.cer_a is None or self.cer_b is None else self.cer_a - self.cer_b

    def as_dict(self) -> JsonObject:
        return {**asdict(self), "delta": self.delta}


@dataclass
class Verdict:
    """Whether the twins agree: their corpus scores differ by at most `tolerance`."""

    basis: str  # "truth": each run's corpus CER against truth; "texts": the corpus CER of A against B
    twins: int  # pages both runs have
    scored: int  # the twin pages the scores cover (with truth: those that have a truth)
    gap: float  # how far apart the corpus scores are (a rate: 0.001 = 0.1 pp)
    tolerance: float
    score_a: float | None = None
    score_b: float | None = None

    @property
    def agree(self) -> bool:
        return self.gap <= self.tolerance + 1e-12

    def line(self) -> str:
        """One line for a person and a script: agree or differ, and by how much."""
        word = "agree" if self.agree else "differ"
        if self.basis == "truth":
            assert self.score_a is not None and self.score_b is not None  # scored against the truth
            what = (f"corpus CER against truth A {self.score_a * 100:.2f} % B {self.score_b * 100:.2f} % "
                    f"on {self.scored} of {self.twins} twin pages")
        else:
            what = f"corpus CER of A against B on {self.scored} twin pages (no truth)"
        return (f"Twins {word}: {what}: {self.gap * 100:.2f} pp apart, tolerance {self.tolerance * 100:g} pp")

    def as_dict(self) -> JsonObject:
        return {**asdict(self), "agree": self.agree, "gap_pp": self.gap * 100, "tolerance_pp": self.tolerance * 100}


@dataclass
class Comparison:
    pages: list[PageDiff]
    tolerance: float
    layer: str
    truth_pages: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    corpus: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict | None = None

    @property
    def flagged(self) -> list[PageDiff]:
        return [p for p in self.pages if p.flagged]

    def as_dict(self) -> JsonObject:
        return {**self.meta, "layer": self.layer, "tolerance": self.tolerance, "pages_compared": len(self.pages),
                "flagged": len(self.flagged), "truth_pages": self.truth_pages, "corpus": self.corpus,
                "verdict": self.verdict.as_dict() if self.verdict else None,
                "pages": [p.as_dict() for p in self.pages]}


def compare_records(a: Mapping[tuple[str, int], Row], b: Mapping[tuple[str, int], Row], *, tolerance: float = 0.001,
                    truth: list[TruthPage] | None = None, folds: Iterable[str] = ()) -> Comparison:
    """Two runs of the same pages: the twins' verdict (corpus scores within `tolerance`) and the
    pages listed for information. A page is flagged (listed) when it is in one run only, when
    its CER against truth differs by more than `tolerance` (when truth is given for it), or else
    when A's text differs from B's by a CER above `tolerance`. No page in common is a usage
    error: there are no twins to judge."""
    folds = list(folds)
    truth_text: dict[tuple[str, int], str] = {}
    if truth:
        for side in (a, b):
            doc_map = match_truth(truth, {d for d, _ in side})
            for t in truth:
                truth_text.setdefault((doc_map.get(t.doc_id, t.doc_id), t.page), t.text)
    keys = sorted(k for k in set(a) | set(b) if k[1] > 0)
    diffs: list[PageDiff] = []
    sums = {"a_edits": 0, "b_edits": 0, "ref_chars": 0, "ab_edits": 0, "b_chars": 0}
    for key in keys:
        ra, rb = a.get(key), b.get(key)
        d = PageDiff(key[0], key[1], ra.status.value if ra else None, rb.status.value if rb else None, None)
        if ra is None or rb is None:
            d.flagged, d.reason = True, f"only in {'B' if ra is None else 'A'}"
            diffs.append(d)
            continue
        ta, tb = ra.text, rb.text
        ab_edits, b_chars, _, _ = distances(ta, tb, folds)
        d.cer_ab = rate(ab_edits, b_chars)
        sums["ab_edits"] += ab_edits
        sums["b_chars"] += b_chars
        ref = truth_text.get(key)
        if ref is not None:
            ea, n, _, _ = distances(ta, ref, folds)
            eb, _, _, _ = distances(tb, ref, folds)
            d.cer_a, d.cer_b = rate(ea, n), rate(eb, n)
            sums["a_edits"] += ea
            sums["b_edits"] += eb
            sums["ref_chars"] += n
            if abs(d.cer_a - d.cer_b) > tolerance + 1e-12:
                d.flagged = True
                d.reason = f"CER against truth differs by {(d.cer_a - d.cer_b) * 100:+.2f} pp"
        elif d.cer_ab > tolerance + 1e-12:
            d.flagged, d.reason = True, f"texts differ: CER A vs B {d.cer_ab * 100:.2f} %"
        diffs.append(d)
    # Micro rates (Σ edits / Σ reference characters: long pages weigh more) and macro rates (the
    # mean of the page rates), named as `evaluate` names them.
    both = [d.cer_ab for d in diffs if d.cer_ab is not None]
    corpus: dict[str, Any] = {"cer_ab": rate(sums["ab_edits"], sums["b_chars"]) if both else None,
                              "cer_ab_macro": _mean(both)}
    if sums["ref_chars"]:
        corpus.update(cer_a=sums["a_edits"] / sums["ref_chars"], cer_b=sums["b_edits"] / sums["ref_chars"])
        corpus["delta"] = corpus["cer_a"] - corpus["cer_b"]
        corpus["cer_a_macro"] = _mean([d.cer_a for d in diffs if d.cer_a is not None])
        corpus["cer_b_macro"] = _mean([d.cer_b for d in diffs if d.cer_b is not None])
    truth_pages = sum(1 for d in diffs if d.cer_a is not None)
    twins = len(both)
    if not twins:
        raise UsageError("the two runs have no page in common: there are no twins to compare")
    if truth is not None and not truth_pages:
        raise UsageError("--truth: no truth for any page both runs read (check its doc_id/page columns)")
    if truth_pages and "delta" in corpus:
        verdict = Verdict("truth", twins, truth_pages, abs(corpus["delta"]), tolerance,
                          score_a=corpus["cer_a"], score_b=corpus["cer_b"])
    else:
        verdict = Verdict("texts", twins, twins, corpus["cer_ab"] or 0.0, tolerance)
    return Comparison(diffs, tolerance, "raw", truth_pages=truth_pages, corpus=corpus, verdict=verdict)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def compare_runs(run_a: Path, run_b: Path, *, truth_path: Path | None = None, tolerance: float = 0.001,
                 clean: bool = True, rules: Any = None, folds: Iterable[str] = ()) -> Comparison:
    recs_a, layer_a = run_records(Path(run_a), clean, rules)
    recs_b, layer_b = run_records(Path(run_b), clean, rules)
    truth = load_truth(truth_path) if truth_path else None
    cmp = compare_records(recs_a, recs_b, tolerance=tolerance, truth=truth, folds=folds)
    cmp.layer = layer_a if layer_a == layer_b else f"A {layer_a}, B {layer_b}"
    cmp.meta = {"run_a": str(run_a), "run_b": str(run_b), "truth": str(truth_path) if truth_path else None,
                "normalisation": normalisation_name(folds)}
    return cmp
