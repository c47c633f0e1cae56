"""Scores: a run's text against ground truth, aggregated, with intervals and gates.

Scoring follows the development pages' README: both texts NFC, every whitespace run (newlines
included) collapsed to one space, CER = Levenshtein(truth, text) / len(truth), WER the same over
words. Folding case, punctuation, diacritics or historical letter forms (long s, r rotunda,
superscript e, ligatures, or a whole OCR-D level: `text/historic.py`) is chosen with `--fold`,
applied to both texts, and named with every result: `normalisation` is ``nfc+whitespace`` plus
the folds in the order they apply (``nfc+whitespace+long_s``).

Per page, document, set and corpus: the **micro** rate (Σ edits / Σ reference characters) and
the **macro** rate (mean of the page rates), each over the pages that have a record; a
bootstrap 95 % confidence interval over pages (seeded: the same data give the same interval);
and the rate **with missing** pages, where a page with truth but no record counts as entirely
wrong (CER 1.0: as many edits as reference characters). Missing pages are listed, never
skipped. A failed page (error, refused, bad_input) has a record and is scored on its text,
which is usually empty.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from rapidfuzz.distance import Levenshtein

from ..exceptions import UsageError
from ..runfolder.flags import Flag, flag_name
from ..runfolder.record import JsonObject, Row
from ..runfolder.store import PAGES_FILE
from ..text import historic
from .truth import TruthPage, load_truth, match_truth

if TYPE_CHECKING:
    import numpy as np

# Every fold, in the order they apply: the historical letter forms, then diacritics, case, punct.
FOLDS = (*historic.FOLDS, "diacritics", "case", "punct")
# What --fold accepts: a fold, or an OCR-D level standing for its folds (ocrd1, ocrd2).
FOLD_NAMES = (*FOLDS, *historic.LEVELS)
# What every score applies before any fold.
BASE_NORMALISATION = "nfc+whitespace"
BOOTSTRAP = 1000
SEED = 0
# Resamples are drawn in blocks of at most this many page indices, so 100 000 pages take a
# few hundred megabytes at most.
_BLOCK = 4_000_000
_WS = re.compile(r"\s+")


# --- normalisation and distances -----------------------------------------------------------


def _collapse(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


def canonical_folds(folds: Iterable[str]) -> list[str]:
    """The folds `folds` asks for (level names expanded), in the order they apply."""
    names = historic.expand(folds)
    unknown = [f for f in names if f not in FOLDS]
    if unknown:
        raise UsageError(f"unknown fold(s) {sorted(unknown)}: choose from {', '.join(FOLD_NAMES)}")
    return [f for f in FOLDS if f in names]


def normalisation_name(folds: Iterable[str] = ()) -> str:
    """What a score applied, e.g. 'nfc+whitespace+long_s'."""
    return "+".join([BASE_NORMALISATION, *canonical_folds(folds)])


def normalize(text: str, folds: Iterable[str] = ()) -> str:
    """NFC + whitespace collapse (the metric), then the folds asked for."""
    folds = set(canonical_folds(folds))
    text = historic.fold(_collapse(text), folds)
    if "diacritics" in folds:
        text = unicodedata.normalize(
            "NFC", "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
        )
    if "case" in folds:
        text = text.casefold()
    if "punct" in folds:
        text = _collapse("".join(" " if unicodedata.category(c).startswith("P") else c for c in text))
    return text


def char_errors(hyp: str, ref: str, folds: Iterable[str] = ()) -> tuple[int, int]:
    """(character edits, reference characters) on normalised text."""
    h, r = normalize(hyp, folds), normalize(ref, folds)
    return Levenshtein.distance(h, r), len(r)


def distances(hyp: str, ref: str, folds: Iterable[str] = ()) -> tuple[int, int, int, int]:
    """(character edits, reference characters, word edits, reference words)."""
    h, r = normalize(hyp, folds), normalize(ref, folds)
    hw, rw = h.split(), r.split()
    return Levenshtein.distance(h, r), len(r), Levenshtein.distance(hw, rw), len(rw)


def rate(edits: int | float, n: int | float) -> float:
    """edits / n; an empty reference scores 0 against an empty text and 1 against any text."""
    return edits / n if n else float(edits > 0)


def cer(hyp: str, ref: str) -> float:
    """The character error rate of one text against its reference."""
    return rate(*char_errors(hyp, ref))


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

    def as_dict(self) -> JsonObject:
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

    def as_dict(self) -> JsonObject:
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
    import numpy as np  # here, not at the top: `char_errors` users (report, benchmarks) need none of it

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
        import numpy as np

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
    folds: list[str] = field(default_factory=list)  # canonical_folds: applied to text and truth
    layer: str = "raw"
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a person should know about the truth's fit
    # The final records scored (truth or not): what the spelling count is measured over, once a
    # gate asks for it (`spelling`): a wordfreq pass over every page costs, and most runs never ask.
    records: Mapping[tuple[str, int], Row] = field(default_factory=dict, repr=False)
    _spelling: dict[str, Any] | None = field(default=None, repr=False)
    # Truth documents the run holds no page of (a truth set shared by several runs): neither scored
    # nor missing — the run never had them.
    elsewhere: list[str] = field(default_factory=list)

    @property
    def spelling(self) -> dict[str, Any]:
        """The spelling count (evaluation/spelling.py: the `unknown_words` gate metric), corpus and
        per document, measured on first use."""
        if self._spelling is None:
            from .spelling import measure_spelling

            self._spelling = measure_spelling(self.records)
        return self._spelling

    def by_flag(self) -> dict[str, JsonObject]:
        """The scored pages by each flag their records carry (runfolder/flags.py): how many, their
        CER and WER taken together, and what the flag means — do turned, downscaled or fallen-back
        pages read worse than the rest?"""
        groups: dict[str, list[PageScore]] = {}
        for p in self.pages:
            rec = self.records.get((p.doc_id, p.page))
            if p.missing or rec is None:
                continue
            for name in dict.fromkeys(flag_name(f) for f in rec.flags):
                groups.setdefault(name, []).append(p)
        out: dict[str, JsonObject] = {}
        for name, ps in sorted(groups.items()):
            rc, rw = sum(p.ref_chars for p in ps), sum(p.ref_words for p in ps)
            flag = Flag.__members__.get(name)
            out[name] = {"pages": len(ps), "cer": sum(p.char_edits for p in ps) / rc if rc else 0.0,
                         "wer": sum(p.word_edits for p in ps) / rw if rw else 0.0,
                         "means": flag.means if flag is not None else None}
        return out

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

    @property
    def normalisation(self) -> str:
        return normalisation_name(self.folds)

    def as_dict(self, worst: int = 10) -> JsonObject:
        return {
            **self.meta,
            "layer": self.layer,
            "normalisation": self.normalisation,
            "folds": self.folds,
            "corpus": self.corpus.as_dict(),
            "sets": {k: v.as_dict() for k, v in self.sets.items()},
            "docs": {k: v.as_dict() for k, v in self.docs.items()},
            "worst": [p.as_dict() for p in self.worst(worst)],
            "missing": [{"doc_id": p.doc_id, "page": p.page, "set": p.set} for p in self.missing],
            "truth_documents_not_in_run": self.elsewhere,
            "unscored_records": self.unscored_records,
            "notes": self.notes,
            "spelling": self._spelling["corpus"].as_dict() if self._spelling else None,  # when a gate asked
            "flags": self.by_flag(),
            "pages": [p.as_dict() for p in self.pages],
        }


def score(records: Mapping[tuple[str, int], Row], truth: list[TruthPage], folds: Iterable[str] = (),
          resamples: int = BOOTSTRAP, seed: int = SEED, complete: bool = False) -> Evaluation:
    """Score final records {(doc_id, page): record} against truth pages. A truth document the
    records hold no page of is another run's (`Evaluation.elsewhere`) when the run is `complete`
    (every document it was given has its records: `run_complete`); otherwise — a gate's or a
    grid's truth, every document of which is to be read, or a run cut short — it is missing, as
    its pages would be."""
    folds = canonical_folds(folds)  # validates them
    run_docs = {d for d, _ in records}
    doc_map = match_truth(truth, run_docs)
    used: set[tuple[str, int]] = set()
    pages: list[PageScore] = []
    notes: list[str] = []
    elsewhere: set[str] = set()  # truth documents this run holds no page of: another run's, not missing here
    for t in truth:
        run_doc = doc_map.get(t.doc_id, t.doc_id)
        if run_doc not in run_docs and complete:
            elsewhere.add(t.doc_id)
            continue
        rec = records.get((run_doc, t.page))
        if rec is None:
            _, rc, _, rw = distances("", t.text, folds)
            pages.append(PageScore(run_doc, t.page, t.set, "missing", rc, rc, rw, rw, 1.0 if rc else 0.0,
                                   1.0 if rw else 0.0, t.doc_id))
            continue
        used.add((run_doc, t.page))
        doc_pages = rec.doc_pages
        if t.unpaged and doc_pages is not None and doc_pages > 1:
            notes.append(f"{t.origin}: one page of truth for {run_doc}, which has {doc_pages} pages: scored as its "
                         "page 1 (separate a document's pages with form feeds, \\f, or give name.pN.txt per page)")
        ce, rc, we, rw = distances(rec.text, t.text, folds)
        pages.append(PageScore(run_doc, t.page, t.set, rec.status.value, rc, ce, rw, we, rate(ce, rc),
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
        notes=notes,
        elsewhere=sorted(elsewhere),
        records=records,
    )


def run_records(run_dir: Path, clean: bool = False, rules: Any = None) -> tuple[Mapping[tuple[str, int], Row], str]:
    """The final records of a run: raw, or the cleaned layer (`clean.cleaned_records`)."""
    run_dir = Path(run_dir)
    from ..runfolder.rundir import RunDir

    if not RunDir(run_dir).pages.is_file():
        if run_dir.is_dir():
            return files_reading(run_dir), "files"
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    if clean:
        from ..text.clean import cleaned_records

        recs, where = cleaned_records(run_dir, rules)
        return recs, f"clean ({where})"
    return RunDir(run_dir).reading(), "raw"


def run_complete(run_dir: Path, records: Mapping[tuple[str, int], Row]) -> bool:
    """Did the run read every document it was given (its summary: no page missing, and as many
    documents as hold records)? A folder of files (an export) is complete as it is."""
    from ..runfolder.rundir import RunDir

    if not RunDir(run_dir).pages.is_file():
        return True
    summary = RunDir(run_dir).summary()
    if summary is None:
        return False
    return summary.get("missing") == 0 and summary.get("docs") == len({d for d, _ in records})


def files_reading(folder: Path) -> Mapping[tuple[str, int], Row]:
    """A reading given as files instead of a run: ALTO or PAGE-XML (vlmocr's export, another
    tool's output) or plain text, read and matched to documents and pages as truth is
    (truth.load_truth): `evaluate EXPORT --truth GT` scores an export as it scores its run."""
    from ..runfolder.record import PageRecord

    try:
        pages = load_truth(folder)
    except UsageError:
        raise UsageError(f"{folder} is not a run directory (no {PAGES_FILE}) nor a folder of readings "
                         "(ALTO, PAGE-XML or text files)") from None
    return {(t.doc_id, t.page): Row.of(PageRecord(doc_id=t.doc_id, source=t.image or t.origin, page=t.page,
                                                  key="", status="ok", text=t.text, engine=t.layout or "text")
                                       .to_json_dict()) for t in pages}


def evaluate_run(run_dir: Path, truth_path: Path, *, clean: bool = False, rules: Any = None,
                 folds: Iterable[str] = (), resamples: int = BOOTSTRAP, seed: int = SEED) -> Evaluation:
    from collections import Counter

    records, layer = run_records(run_dir, clean, rules)
    truth = load_truth(truth_path)
    ev = score(records, truth, folds, resamples, seed, complete=run_complete(run_dir, records))
    ev.layer = layer
    ev.meta = {"run": str(run_dir), "truth": str(truth_path), "bootstrap": {"resamples": resamples, "seed": seed},
               "truth_layouts": dict(Counter(t.layout for t in truth))}
    if truth and len(ev.missing) == len(ev.pages):  # none matched (or only other runs' documents)
        from .truth import LAYOUTS

        said = ", ".join(f"{n} as {layout}" for layout, n in ev.meta["truth_layouts"].items())
        raise UsageError(f"no truth page of {truth_path} matches a page of {run_dir} ({len(truth)} truth pages: "
                         f"{said}; {len(records)} records); matched by document file, id or file stem — the "
                         f"layouts read: {'; '.join(LAYOUTS)}")
    if clean and rules is not None:
        ev.meta["rules_hash"] = rules.hash
        if rules.fold.names():
            ev.meta["clean_folds"] = rules.fold.names()  # folded in the text only, before scoring
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
    from .spelling import NO_TRUTH_METRICS

    m = _GATE.match(spec)
    if not m or m.group("metric") not in (*METRICS, *NO_TRUTH_METRICS):
        raise UsageError(f"bad gate {spec!r}: expected [set:NAME:|doc:NAME:]METRIC OP VALUE with METRIC one of "
                         f"{', '.join((*METRICS, *NO_TRUTH_METRICS))} and OP one of <= < >= > ==, e.g. 'cer<=0.03'")
    value = float(m.group("value")) / (100 if m.group("pct") else 1)
    return Gate(spec.strip(), m.group("kind") or "corpus", m.group("name") or "", m.group("metric"), m.group("op"), value)


@dataclass
class GateResult:
    gate: Gate
    passed: bool
    measured: float | None
    message: str

    def as_dict(self) -> JsonObject:
        return {"gate": self.gate.spec, "scope": self.gate.scope, "metric": self.gate.metric, "op": self.gate.op,
                "limit": self.gate.value, "measured": self.measured, "passed": self.passed, "message": self.message}


def _fmt(metric: str, v: float) -> str:
    return f"{v:g}" if metric == "missing" else f"{v:.4f} ({v * 100:.2f} %)"


def check_gate(ev: Evaluation, gate: Gate, allow_missing: bool = False) -> GateResult:
    from .spelling import NO_TRUTH_METRICS

    if gate.metric in NO_TRUTH_METRICS:
        return check_spelling_gate(ev.spelling, gate)
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


def check_spelling_gate(spelling: Mapping[str, Any], gate: Gate) -> GateResult:
    """A gate on a no-truth metric (``gate.metric`` in spelling.NO_TRUTH_METRICS) → GateResult."""
    if gate.kind == "set":
        return GateResult(gate, False, None, f"gate {gate.spec} failed: {gate.metric} has no set scope (sets come "
                                             "from the truth); use the corpus or doc:NAME:")
    s = spelling.get("corpus" if gate.kind == "corpus" else f"doc:{gate.name}")
    if s is None:
        return GateResult(gate, False, None, f"gate {gate.spec} failed: no document named {gate.name!r} in the run")
    measured = s.unknown_words
    if measured is None:
        return GateResult(gate, False, None,
                          f"gate {gate.spec} failed: no words to count in {gate.scope} ({s.pages} page(s); languages "
                          f"{', '.join(f'{k} {v}' for k, v in sorted(s.languages.items())) or 'none'}: a word list "
                          "exists for none of them, or the pages are empty)")
    ok = _OPS[gate.op](measured, gate.value)
    said = (f"{gate.metric} = {measured:.4f} ({measured * 100:.2f} %: {s.unknown} of {s.words} words on {s.judged} "
            f"of {s.pages} page(s) not in the word list of their language) in {gate.scope}")
    return GateResult(gate, ok, measured, f"gate {gate.spec} {'passed' if ok else 'failed'}: {said}"
                      + ("" if ok else f", over the limit {gate.value:g}"))


def check_gates(ev: Evaluation, gates: Iterable[Gate], allow_missing: bool = False) -> list[GateResult]:
    return [check_gate(ev, g, allow_missing) for g in gates]
