"""Measured quality: a run scored against ground truth, gated, and compared with another run.

Scoring follows ../shared/gt/README.md: both texts NFC, every whitespace run (newlines
included) collapsed to one space, CER = Levenshtein(truth, text) / len(truth), WER the same over
words (`vlmocr.metrics`). Folding case, punctuation, diacritics or long s is a diagnostic
(`--fold`), never the headline metric.

Per page, document, set and corpus: the **micro** rate (Σ edits / Σ reference characters) and
the **macro** rate (mean of the page rates), each over the pages that have a record; a
bootstrap 95 % confidence interval over pages (seeded: the same data give the same interval);
and the rate **with missing** pages, where a page with truth but no record counts as entirely
wrong (CER 1.0: as many edits as reference characters). Missing pages are listed, never
skipped. A failed page (error, refused, bad_input) has a record and is scored on its text,
which is usually empty.

Truth comes as a folder (``name.png|jpg|tif|… + name.txt``, page 1 of the document that a
folder run derives from the image's relative path) or as a CSV: ``image`` and ``truth`` paths
relative to the CSV (like ../shared/gt/pages.csv, whose ``set`` and ``language`` columns are
used), or explicit ``doc_id,page,truth`` (a path, or the text itself in a ``text`` column).
A truth id that no record has is also looked up without its leading folders (``ehri_en__x`` →
``x``), so a run over single files or a subfolder still matches.
"""

from __future__ import annotations

import csv
import math
import re
import unicodedata
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from rapidfuzz.distance import Levenshtein

from .exceptions import UsageError
from .metrics import normalize as normalize_ws
from .sources import IMAGE_EXTS, derive_doc_id
from .store import PAGES_FILE, final_records

FOLDS = ("case", "punct", "diacritics", "long_s")
BOOTSTRAP = 1000
SEED = 0
# Resamples are drawn in blocks of at most this many page indices, so 100 000 pages take a
# few hundred megabytes at most.
_BLOCK = 4_000_000


# --- normalisation and distances -----------------------------------------------------------


def normalize(text: str, folds: Iterable[str] = ()) -> str:
    """NFC + whitespace collapse (the metric), then the diagnostic folds asked for."""
    folds = set(folds)
    unknown = folds - set(FOLDS)
    if unknown:
        raise UsageError(f"unknown fold(s) {sorted(unknown)}: choose from {', '.join(FOLDS)}")
    text = normalize_ws(text)
    if "long_s" in folds:
        text = text.replace("ſ", "s")
    if "diacritics" in folds:
        text = unicodedata.normalize(
            "NFC", "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
        )
    if "case" in folds:
        text = text.casefold()
    if "punct" in folds:
        text = normalize_ws("".join(" " if unicodedata.category(c).startswith("P") else c for c in text))
    return text


def distances(hyp: str, ref: str, folds: Iterable[str] = ()) -> tuple[int, int, int, int]:
    """(character edits, reference characters, word edits, reference words)."""
    h, r = normalize(hyp, folds), normalize(ref, folds)
    hw, rw = h.split(), r.split()
    return Levenshtein.distance(h, r), len(r), Levenshtein.distance(hw, rw), len(rw)


def rate(edits: int | float, n: int | float) -> float:
    """edits / n; an empty reference scores 0 against an empty text and 1 against any text."""
    return edits / n if n else float(edits > 0)


# --- ground truth --------------------------------------------------------------------------


@dataclass
class TruthPage:
    doc_id: str
    page: int
    text: str
    set: str = ""
    language: str | None = None
    origin: str = ""  # the truth file (or CSV row) it came from
    image: str | None = None  # the page image, when the truth names one (what `grid` reads)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8-sig")


def _truth_from_dir(root: Path) -> list[TruthPage]:
    pages: list[TruthPage] = []
    for img in sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_EXTS and p.is_file()):
        txt = img.with_suffix(".txt")
        if not txt.is_file():
            continue
        rel = img.relative_to(root).as_posix()
        parts = rel.split("/")
        pages.append(TruthPage(derive_doc_id(rel), 1, _read(txt), set=parts[0] if len(parts) > 1 else "",
                               origin=str(txt), image=str(img)))
    if not pages:
        raise UsageError(f"{root}: no truth found (expected name.png|jpg|tif + name.txt, or a CSV)")
    return pages


def _truth_from_csv(path: Path) -> list[TruthPage]:
    base = path.parent
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        cols = set(reader.fieldnames or [])
        if not ({"truth", "text"} & cols) or not ({"image", "doc_id"} & cols):
            raise UsageError(f"{path}: a truth CSV needs image,truth (paths) or doc_id[,page],truth|text columns")
        pages: list[TruthPage] = []
        for n, row in enumerate(reader, 2):
            where = f"{path}:{n}"
            image = (row.get("image") or "").strip()
            doc_id = (row.get("doc_id") or "").strip() or (derive_doc_id(image) if image else "")
            if not doc_id:
                raise UsageError(f"{where}: no doc_id and no image")
            try:
                page = int(row.get("page") or 1)
            except ValueError:
                raise UsageError(f"{where}: page {row.get('page')!r} is not a number") from None
            if row.get("text") is not None and "truth" not in cols:
                text, origin = row["text"], where
            else:
                ref = (row.get("truth") or "").strip()
                tpath = Path(ref) if Path(ref).is_absolute() else base / ref
                if ref and tpath.is_file():
                    text, origin = _read(tpath), str(tpath)
                elif ref.lower().endswith(".txt"):
                    raise UsageError(f"{where}: truth file not found: {tpath}")
                else:
                    text, origin = ref, where
            set_name = (row.get("set") or "").strip()
            if not set_name and image and "/" in image.strip("/"):
                set_name = image.strip("/").split("/")[0]
            img = (Path(image) if Path(image).is_absolute() else base / image) if image else None
            pages.append(TruthPage(doc_id, page, text, set=set_name,
                                   language=(row.get("language") or "").strip() or None, origin=origin,
                                   image=str(img) if img else None))
    if not pages:
        raise UsageError(f"{path}: no rows")
    return pages


def load_truth(path: Path | str) -> list[TruthPage]:
    """Truth pages from a folder or a CSV; duplicates are an error."""
    p = Path(path)
    if p.is_dir():
        pages = _truth_from_dir(p)
    elif p.is_file() and p.suffix.lower() == ".csv":
        pages = _truth_from_csv(p)
    elif p.is_file():
        raise UsageError(f"{p}: truth must be a folder or a .csv file")
    else:
        raise UsageError(f"truth not found: {p}")
    seen: dict[tuple[str, int], str] = {}
    for t in pages:
        if (t.doc_id, t.page) in seen:
            raise UsageError(f"duplicate truth for {t.doc_id} page {t.page}: {seen[(t.doc_id, t.page)]} and {t.origin}")
        seen[(t.doc_id, t.page)] = t.origin
    return pages


def match_truth(truth: list[TruthPage], doc_ids: Iterable[str]) -> dict[str, str]:
    """truth doc_id → run doc_id. Exact first; else the id without leading folders, when only one
    truth document claims it."""
    have = set(doc_ids)
    out: dict[str, str] = {}
    claims: dict[str, list[str]] = {}
    for tid in sorted({t.doc_id for t in truth}):
        if tid in have:
            out[tid] = tid
            continue
        parts = tid.split("__")
        for k in range(1, len(parts)):
            cand = "__".join(parts[k:])
            if cand in have:
                claims.setdefault(cand, []).append(tid)
                break
    taken = set(out.values())
    for cand, tids in claims.items():
        if len(tids) == 1 and cand not in taken:
            out[tids[0]] = cand
    return out


# --- scores --------------------------------------------------------------------------------


@dataclass
class PageScore:
    doc_id: str  # the run's doc_id (the truth's when the page is missing)
    page: int
    set: str
    status: str  # the record's status, or "missing"
    ref_chars: int
    char_edits: int
    ref_words: int
    word_edits: int
    cer: float
    wer: float
    truth_doc_id: str = ""

    @property
    def missing(self) -> bool:
        return self.status == "missing"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["missing"] = self.missing
        return d


@dataclass
class Aggregate:
    pages: int  # truth pages in the group
    scored: int  # … that have a record
    missing: int
    ref_chars: int
    char_edits: int
    ref_words: int
    word_edits: int
    cer: float | None  # micro, over scored pages
    cer_macro: float | None
    wer: float | None
    wer_macro: float | None
    cer_with_missing: float | None
    wer_with_missing: float | None
    cer_ci: tuple[float, float] | None = None
    wer_ci: tuple[float, float] | None = None
    cer_macro_ci: tuple[float, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metric(self, name: str) -> float | None:
        return METRICS[name](self)


METRICS: dict[str, Any] = {
    "cer": lambda a: a.cer,
    "wer": lambda a: a.wer,
    "cer_macro": lambda a: a.cer_macro,
    "wer_macro": lambda a: a.wer_macro,
    "cer_all": lambda a: a.cer_with_missing,
    "wer_all": lambda a: a.wer_with_missing,
    "cer_hi": lambda a: a.cer_ci[1] if a.cer_ci else None,  # upper end of the 95 % interval
    "wer_hi": lambda a: a.wer_ci[1] if a.wer_ci else None,
    "missing": lambda a: float(a.missing),
}


def bootstrap_ci(num: np.ndarray, den: np.ndarray | None, resamples: int = BOOTSTRAP, seed: int = SEED,
                 level: float = 0.95) -> tuple[float, float] | None:
    """Percentile interval of Σnum/Σden (or of mean(num) when `den` is None) over pages drawn
    with replacement. Seeded: the same inputs give the same interval."""
    n = len(num)
    if n == 0 or resamples <= 0:
        return None
    rng = np.random.default_rng(seed)
    stats: list[np.ndarray] = []
    per_block = max(1, _BLOCK // n)
    done = 0
    while done < resamples:
        k = min(per_block, resamples - done)
        idx = rng.integers(0, n, size=(k, n))
        top = num[idx].sum(axis=1)
        if den is None:
            stats.append(top / n)
        else:
            bottom = den[idx].sum(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                stats.append(np.where(bottom > 0, top / np.maximum(bottom, 1), np.where(top > 0, 1.0, 0.0)))
        done += k
    values = np.concatenate(stats)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return float(lo), float(hi)


def aggregate(scores: list[PageScore], resamples: int = BOOTSTRAP, seed: int = SEED) -> Aggregate:
    scored = [s for s in scores if not s.missing]
    missing = [s for s in scores if s.missing]
    rc = sum(s.ref_chars for s in scored)
    ce = sum(s.char_edits for s in scored)
    rw = sum(s.ref_words for s in scored)
    we = sum(s.word_edits for s in scored)
    mrc = sum(s.ref_chars for s in missing)
    mrw = sum(s.ref_words for s in missing)
    agg = Aggregate(
        pages=len(scores), scored=len(scored), missing=len(missing), ref_chars=rc, char_edits=ce,
        ref_words=rw, word_edits=we,
        cer=rate(ce, rc) if scored else None,
        cer_macro=sum(s.cer for s in scored) / len(scored) if scored else None,
        wer=rate(we, rw) if scored else None,
        wer_macro=sum(s.wer for s in scored) / len(scored) if scored else None,
        cer_with_missing=rate(ce + mrc, rc + mrc) if scores else None,
        wer_with_missing=rate(we + mrw, rw + mrw) if scores else None,
    )
    if scored and resamples > 0:
        chars = np.array([s.ref_chars for s in scored], dtype=np.int64)
        cedits = np.array([s.char_edits for s in scored], dtype=np.int64)
        words = np.array([s.ref_words for s in scored], dtype=np.int64)
        wedits = np.array([s.word_edits for s in scored], dtype=np.int64)
        agg.cer_ci = bootstrap_ci(cedits, chars, resamples, seed)
        agg.wer_ci = bootstrap_ci(wedits, words, resamples, seed)
        agg.cer_macro_ci = bootstrap_ci(np.array([s.cer for s in scored]), None, resamples, seed)
    return agg


@dataclass
class Evaluation:
    pages: list[PageScore]
    corpus: Aggregate
    sets: dict[str, Aggregate]
    docs: dict[str, Aggregate]
    unscored_records: int  # records of the run with no truth
    folds: list[str] = field(default_factory=list)
    layer: str = "raw"
    meta: dict[str, Any] = field(default_factory=dict)

    def worst(self, n: int) -> list[PageScore]:
        scored = [p for p in self.pages if not p.missing]
        return sorted(scored, key=lambda p: (-p.cer, -p.wer, p.doc_id, p.page))[:n]

    @property
    def missing(self) -> list[PageScore]:
        return [p for p in self.pages if p.missing]

    def scope(self, kind: str, name: str) -> Aggregate | None:
        if kind == "set":
            return self.sets.get(name)
        if kind == "doc":
            return self.docs.get(name)
        return self.corpus

    def as_dict(self, worst: int = 10) -> dict[str, Any]:
        return {
            **self.meta,
            "layer": self.layer,
            "folds": self.folds,
            "corpus": self.corpus.as_dict(),
            "sets": {k: v.as_dict() for k, v in self.sets.items()},
            "docs": {k: v.as_dict() for k, v in self.docs.items()},
            "worst": [p.as_dict() for p in self.worst(worst)],
            "missing": [{"doc_id": p.doc_id, "page": p.page, "set": p.set} for p in self.missing],
            "unscored_records": self.unscored_records,
            "pages": [p.as_dict() for p in self.pages],
        }


def score(records: dict[tuple[str, int], dict[str, Any]], truth: list[TruthPage], folds: Iterable[str] = (),
          resamples: int = BOOTSTRAP, seed: int = SEED) -> Evaluation:
    """Score final records {(doc_id, page): record} against truth pages."""
    folds = list(folds)
    normalize("", folds)  # validates the folds
    doc_map = match_truth(truth, {d for d, _ in records})
    used: set[tuple[str, int]] = set()
    pages: list[PageScore] = []
    for t in truth:
        run_doc = doc_map.get(t.doc_id, t.doc_id)
        rec = records.get((run_doc, t.page))
        if rec is None:
            _, rc, _, rw = distances("", t.text, folds)
            pages.append(PageScore(run_doc, t.page, t.set, "missing", rc, rc, rw, rw, 1.0 if rc else 0.0,
                                   1.0 if rw else 0.0, t.doc_id))
            continue
        used.add((run_doc, t.page))
        ce, rc, we, rw = distances(rec.get("text") or "", t.text, folds)
        pages.append(PageScore(run_doc, t.page, t.set, str(rec.get("status")), rc, ce, rw, we, rate(ce, rc),
                               rate(we, rw), t.doc_id))
    pages.sort(key=lambda p: (p.set, p.doc_id, p.page))
    sets: dict[str, list[PageScore]] = {}
    docs: dict[str, list[PageScore]] = {}
    for p in pages:
        sets.setdefault(p.set, []).append(p)
        docs.setdefault(p.doc_id, []).append(p)
    named_sets = {k: v for k, v in sets.items() if k}

    def group_seed(name: str) -> int:
        return seed + zlib.crc32(name.encode("utf-8"))

    return Evaluation(
        pages=pages,
        corpus=aggregate(pages, resamples, seed),
        sets={k: aggregate(v, resamples, group_seed(k)) for k, v in sorted(named_sets.items())},
        # Documents are many and usually short: no intervals for them.
        docs={k: aggregate(v, 0) for k, v in sorted(docs.items())},
        unscored_records=sum(1 for k in records if k not in used and k[1] > 0),
        folds=folds,
    )


def run_records(run_dir: Path, clean: bool = False, rules: Any = None) -> tuple[dict[tuple[str, int], dict], str]:
    """The final records of a run: raw, or the cleaned layer (`clean.cleaned_records`)."""
    run_dir = Path(run_dir)
    if not (run_dir / PAGES_FILE).is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    if clean:
        from .clean import cleaned_records

        recs, where = cleaned_records(run_dir, rules)
        return recs, f"clean ({where})"
    return final_records(run_dir / PAGES_FILE), "raw"


def evaluate_run(run_dir: Path, truth_path: Path, *, clean: bool = False, rules: Any = None,
                 folds: Iterable[str] = (), resamples: int = BOOTSTRAP, seed: int = SEED) -> Evaluation:
    records, layer = run_records(run_dir, clean, rules)
    ev = score(records, load_truth(truth_path), folds, resamples, seed)
    ev.layer = layer
    ev.meta = {"run": str(run_dir), "truth": str(truth_path), "bootstrap": {"resamples": resamples, "seed": seed}}
    if clean and rules is not None:
        ev.meta["rules_hash"] = rules.hash
    return ev


# --- gates ---------------------------------------------------------------------------------

_GATE = re.compile(
    r"^\s*(?:(?P<kind>set|doc):(?P<name>[^:]+):)?(?P<metric>[a-z_]+)\s*(?P<op><=|>=|<|>|==)\s*"
    r"(?P<value>[0-9]*\.?[0-9]+(?:e-?\d+)?)\s*(?P<pct>%)?\s*$"
)
_OPS = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b,
        ">": lambda a, b: a > b, "==": lambda a, b: a == b}


@dataclass(frozen=True)
class Gate:
    spec: str
    kind: str  # corpus | set | doc
    name: str
    metric: str
    op: str
    value: float

    @property
    def scope(self) -> str:
        return "corpus" if self.kind == "corpus" else f"{self.kind} {self.name}"


def parse_gate(spec: str) -> Gate:
    """'cer<=0.03', 'wer<10%', 'set:ehri_en:cer<=0.05', 'doc:X:cer_macro<0.1', 'missing<=0'."""
    m = _GATE.match(spec)
    if not m or m.group("metric") not in METRICS:
        raise UsageError(f"bad gate {spec!r}: expected [set:NAME:|doc:NAME:]METRIC OP VALUE with METRIC one of "
                         f"{', '.join(METRICS)} and OP one of <= < >= > ==, e.g. 'cer<=0.03'")
    value = float(m.group("value")) / (100 if m.group("pct") else 1)
    return Gate(spec.strip(), m.group("kind") or "corpus", m.group("name") or "", m.group("metric"), m.group("op"), value)


@dataclass
class GateResult:
    gate: Gate
    passed: bool
    measured: float | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"gate": self.gate.spec, "scope": self.gate.scope, "metric": self.gate.metric, "op": self.gate.op,
                "limit": self.gate.value, "measured": self.measured, "passed": self.passed, "message": self.message}


def _fmt(metric: str, v: float) -> str:
    return f"{v:g}" if metric == "missing" else f"{v:.4f} ({v * 100:.2f} %)"


def check_gate(ev: Evaluation, gate: Gate, allow_missing: bool = False) -> GateResult:
    agg = ev.scope(gate.kind, gate.name)
    if agg is None:
        known = sorted(ev.sets if gate.kind == "set" else ev.docs)[:20]
        return GateResult(gate, False, None, f"gate {gate.spec} failed: no {gate.kind} named {gate.name!r} "
                                             f"(known: {', '.join(known) or 'none'})")
    measured = agg.metric(gate.metric)
    if measured is None:
        return GateResult(gate, False, None, f"gate {gate.spec} failed: nothing scored in {gate.scope}")
    ok = _OPS[gate.op](measured, gate.value)
    if ok and agg.missing and not allow_missing and gate.metric != "missing":
        return GateResult(gate, False, measured,
                          f"gate {gate.spec} failed: {agg.missing} of {agg.pages} truth pages in {gate.scope} have "
                          f"no record (measured {_fmt(gate.metric, measured)} on the rest; --allow-missing to accept)")
    if ok:
        return GateResult(gate, True, measured, f"gate {gate.spec} passed: {gate.metric} = "
                                                f"{_fmt(gate.metric, measured)} in {gate.scope}")
    by = abs(measured - gate.value)
    by_text = f"{by:g}" if gate.metric == "missing" else f"{by:.4f} ({by * 100:.2f} pp)"
    return GateResult(gate, False, measured,
                      f"gate {gate.spec} failed: {gate.metric} = {_fmt(gate.metric, measured)} in {gate.scope}, "
                      f"{'over' if gate.op in ('<=', '<') else 'off'} the limit {gate.value:g} by {by_text}")


def check_gates(ev: Evaluation, gates: Iterable[Gate], allow_missing: bool = False) -> list[GateResult]:
    return [check_gate(ev, g, allow_missing) for g in gates]


# --- compare two runs ----------------------------------------------------------------------


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

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "delta": self.delta}


@dataclass
class Comparison:
    pages: list[PageDiff]
    tolerance: float
    layer: str
    truth_pages: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    corpus: dict[str, Any] = field(default_factory=dict)

    @property
    def flagged(self) -> list[PageDiff]:
        return [p for p in self.pages if p.flagged]

    def as_dict(self) -> dict[str, Any]:
        return {**self.meta, "layer": self.layer, "tolerance": self.tolerance, "pages_compared": len(self.pages),
                "flagged": len(self.flagged), "truth_pages": self.truth_pages, "corpus": self.corpus,
                "pages": [p.as_dict() for p in self.pages]}


def compare_records(a: dict[tuple[str, int], dict], b: dict[tuple[str, int], dict], *, tolerance: float = 0.001,
                    truth: list[TruthPage] | None = None, folds: Iterable[str] = ()) -> Comparison:
    """Per-page difference of two runs of the same pages. A page is flagged when it is in one run
    only, when its CER against truth differs by more than `tolerance` (when truth is given for
    it), or else when A's text differs from B's by a CER above `tolerance`."""
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
        d = PageDiff(key[0], key[1], ra and str(ra.get("status")), rb and str(rb.get("status")), None)
        if ra is None or rb is None:
            d.flagged, d.reason = True, f"only in {'B' if ra is None else 'A'}"
            diffs.append(d)
            continue
        ta, tb = ra.get("text") or "", rb.get("text") or ""
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
    both = sum(1 for d in diffs if d.cer_ab is not None)
    corpus: dict[str, Any] = {"cer_ab": rate(sums["ab_edits"], sums["b_chars"]) if both else None}
    if sums["ref_chars"]:
        corpus.update(cer_a=sums["a_edits"] / sums["ref_chars"], cer_b=sums["b_edits"] / sums["ref_chars"])
        corpus["delta"] = corpus["cer_a"] - corpus["cer_b"]
    return Comparison(diffs, tolerance, "raw", truth_pages=sum(1 for d in diffs if d.cer_a is not None),
                      corpus=corpus)


def compare_runs(run_a: Path, run_b: Path, *, truth_path: Path | None = None, tolerance: float = 0.001,
                 clean: bool = True, rules: Any = None, folds: Iterable[str] = ()) -> Comparison:
    recs_a, layer_a = run_records(Path(run_a), clean, rules)
    recs_b, layer_b = run_records(Path(run_b), clean, rules)
    truth = load_truth(truth_path) if truth_path else None
    cmp = compare_records(recs_a, recs_b, tolerance=tolerance, truth=truth, folds=folds)
    cmp.layer = layer_a if layer_a == layer_b else f"A {layer_a}, B {layer_b}"
    cmp.meta = {"run_a": str(run_a), "run_b": str(run_b), "truth": str(truth_path) if truth_path else None}
    return cmp


# --- grid: the same sample under several settings, ranked ------------------------------------

GRID_AXES = ("engine", "ocr_engine", "profile", "model", "dpi", "longest_side", "lang")


def sample_truth(truth: list[TruthPage], n: int | None) -> list[TruthPage]:
    """`n` pages evenly spaced (index ⌊(2i+1)·len / 2n⌋, as ../shared/gt chose its pages)."""
    if not n or n >= len(truth):
        return truth
    ordered = sorted(truth, key=lambda t: (t.set, t.doc_id, t.page))
    return [ordered[(2 * i + 1) * len(ordered) // (2 * n)] for i in range(n)]


def grid_cells(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the axis values, in a stable order."""
    import itertools

    names = [a for a in GRID_AXES if axes.get(a)]
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[a] for a in names))] or [{}]


def cell_name(settings: dict[str, Any]) -> str:
    if not settings:
        return "default"
    raw = "_".join(f"{k}-{v:g}" if isinstance(v, float) else f"{k}-{v}" for k, v in settings.items())
    return re.sub(r"[^\w.+-]+", "-", raw)


@dataclass
class GridCell:
    name: str
    settings: dict[str, Any]
    run_dir: str
    exit_code: int
    evaluation: Evaluation
    read_seconds: float  # engine seconds summed over the scored pages' records
    rank: int = 0
    near_best: bool = False  # its 95 % interval overlaps the best cell's: not distinguishable

    def as_dict(self) -> dict[str, Any]:
        c = self.evaluation.corpus
        return {"rank": self.rank, "name": self.name, "settings": self.settings, "run": self.run_dir,
                "exit_code": self.exit_code, "near_best": self.near_best, "read_seconds": self.read_seconds,
                "corpus": c.as_dict(), "sets": {k: v.as_dict() for k, v in self.evaluation.sets.items()}}


def rank_cells(cells: list[GridCell]) -> list[GridCell]:
    """Lowest micro CER first (then WER); a cell whose CER interval reaches the best one's is
    marked near_best: the data cannot tell the two apart."""
    def key(c: GridCell) -> tuple[float, float, float]:
        a = c.evaluation.corpus
        nan = float("inf")
        return (a.cer_with_missing if a.cer_with_missing is not None else nan,
                a.cer if a.cer is not None else nan, a.wer if a.wer is not None else nan)

    ranked = sorted(cells, key=key)
    best = ranked[0].evaluation.corpus if ranked else None
    for i, c in enumerate(ranked, 1):
        c.rank = i
        a = c.evaluation.corpus
        c.near_best = bool(best and a.cer_ci and best.cer_ci and a.cer_ci[0] <= best.cer_ci[1] and not a.missing)
    return ranked


def run_grid(truth_path: Path, out: Path, axes: dict[str, list[Any]], *, inputs: list[str] | None = None,
             manifest: Path | None = None, base: dict[str, Any] | None = None, config_file: Path | None = None,
             sample: int | None = None, resamples: int = BOOTSTRAP, seed: int = SEED,
             on_cell: Any = None) -> list[GridCell]:
    """Read the sample once per combination of settings (each cell a resumable run directory
    under `out`), score every cell against the truth and rank them.

    The sample is `inputs`/`manifest` when given, else the truth's own page images (a manifest
    written to OUT/manifest.csv names them with the truth's doc ids)."""
    import csv as _csv

    from .config import load_config
    from .progress import RunProgress
    from .run import run as run_pages

    out = Path(out)
    truth = sample_truth(load_truth(truth_path), sample)
    if not inputs and manifest is None:
        images: dict[str, str] = {}
        for t in truth:
            if t.page != 1 or not t.image:
                raise UsageError("the truth names no image for some pages: give the sample as PATH… or --manifest")
            images[t.doc_id] = t.image
        out.mkdir(parents=True, exist_ok=True)
        manifest = out / "manifest.csv"
        with manifest.open("w", encoding="utf-8", newline="") as fh:
            w = _csv.writer(fh)
            w.writerow(["doc_id", "path"])
            for doc_id, image in sorted(images.items()):
                w.writerow([doc_id, str(Path(image).resolve())])
    cells: list[GridCell] = []
    combos = grid_cells(axes)
    for i, settings in enumerate(combos, 1):
        name = cell_name(settings)
        run_dir = out / name
        if on_cell:
            on_cell(i, len(combos), name, None)
        cli = {**(base or {}), **settings, "inputs": list(inputs or []) or None, "manifest": manifest, "out": run_dir}
        summary = run_pages(load_config(cli, config_file), RunProgress(enabled=False))
        records = final_records(run_dir / PAGES_FILE)
        ev = score(records, truth, (), resamples, seed)
        ev.layer = "raw"
        scored = {(p.doc_id, p.page) for p in ev.pages if not p.missing}
        seconds = sum(float(records[k].get("seconds") or 0) for k in scored)
        cell = GridCell(name, settings, str(run_dir), int(summary.exit_code()), ev, round(seconds, 3))
        cells.append(cell)
        if on_cell:
            on_cell(i, len(combos), name, cell)
    return rank_cells(cells)


def pct(v: float | None, digits: int = 2) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 100:.{digits}f}"


__all__ = [
    "GridCell", "cell_name", "grid_cells", "rank_cells", "run_grid", "sample_truth",
    "Aggregate", "Comparison", "Evaluation", "FOLDS", "Gate", "GateResult", "PageDiff", "PageScore", "TruthPage",
    "aggregate", "bootstrap_ci", "check_gate", "check_gates", "compare_records", "compare_runs", "distances",
    "evaluate_run", "load_truth", "match_truth", "normalize", "parse_gate", "rate", "run_records", "score",
]
