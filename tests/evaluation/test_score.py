"""`vlmocr evaluate`: hand-computed CER/WER, missing pages, gates, the bootstrap, the cleaned layer,
and a real Tesseract run on two pages of tests/data/gt."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support.cli import cli_in_process as cli
from support.cli import run_cli
from support.components import GT_PAGE_COUNT
from support.runs import write_run, write_truth_csv
from vlmocr.evaluation import (
    aggregate,
    bootstrap_ci,
    cer,
    distances,
    evaluate_run,
    normalize,
    parse_gate,
    rate,
    score,
)
from vlmocr.exceptions import UsageError
from vlmocr.runfolder.store import final_records

# --- distances by hand -----------------------------------------------------------------------


def test_hand_computed_distances():
    # one substitution in ten characters; one wrong word of one
    assert distances("abcdefghiX", "abcdefghij") == (1, 10, 1, 1)
    # the quick brown dog: 1 of 4 words, 3 of 19 characters (f→d, o=o, x→g: "fox"→"dog" is 2 edits)
    ce, rc, we, rw = distances("the quick brown dog", "the quick brown fox")
    assert (rc, rw, we) == (19, 4, 1) and ce == 2
    # a deleted word: "a b c" vs "a c" → 2 char edits ("b "), 1 word edit
    assert distances("a c", "a b c") == (2, 5, 1, 3)
    # whitespace runs and newlines collapse to one space before scoring
    assert distances("a  b\n\n c\t", " a b c") == (0, 5, 0, 3)


def test_empty_truth_and_empty_text():
    assert distances("", "") == (0, 0, 0, 0)
    assert rate(0, 0) == 0.0
    # text against empty truth: every character is an insertion, the rate is 1
    ce, rc, we, rw = distances("abc de", "")
    assert (ce, rc, we, rw) == (6, 0, 2, 0) and rate(ce, rc) == 1.0 and rate(we, rw) == 1.0
    # nothing read: every reference character is a deletion
    ce, rc, we, rw = distances("", "Hello world")
    assert (ce, rc, we, rw) == (11, 11, 2, 2) and rate(ce, rc) == 1.0


def test_combining_marks_are_composed_before_scoring():
    decomposed = "Cafe\u0301 na\u0308ive"  # e + COMBINING ACUTE, a + COMBINING DIAERESIS
    assert distances(decomposed, "Café näive")[0] == 0
    # a missing accent is one edit (é vs e), not zero and not two
    assert distances("Cafe", "Café") == (1, 4, 1, 1)
    assert distances("ἐν", "εν")[0] == 1  # polytonic breathing: one composed character differs
    assert distances("Cafe", "Café", ["diacritics"])[0] == 0
    assert cer("Cafe", "Café") == 0.25


def test_folds_are_diagnostics():
    assert normalize("  Die  Straße,\n ſie!  ") == "Die Straße, ſie!"
    assert normalize("Die Straße, ſie!", ["case"]) == "die strasse, sie!"  # casefold: ß → ss, ſ → s
    assert normalize("Die Straße, ſie!", ["long_s"]) == "Die Straße, sie!"
    assert normalize("Die Straße, ſie!", ["punct"]) == "Die Straße ſie"
    assert normalize("Die Straße, ſie!", ["long_s", "case", "punct"]) == "die strasse sie"
    assert distances("DIE SEE", "die See", ["case"])[0] == 0
    with pytest.raises(UsageError):
        normalize("x", ["nonsense"])


# --- a run scored by hand --------------------------------------------------------------------

# Truth and readings with known edits:
#   a/1  "abcdefghij"  read "abcdefghiX"   1 edit / 10 chars, 1 / 1 words
#   a/2  "hello world" read "hello world"  0 / 11, 0 / 2   (an earlier, worse record is superseded)
#   b/1  "one two three four" read ""  (status error)  18 / 18, 4 / 4
#   c/1  "xyz" — no record: missing (the run has document c: its page 2 failed)
#   d/1  truth of a document the run never had: not missing, not scored (issue 47, point 5)
HAND_RUN = [
    ("a", 2, "ok", "hullo wurld"),  # superseded by the later record of a/2
    ("a", 1, "ok", "abcdefghiX"),
    ("a", 2, "ok", "hello world"),
    ("b", 1, "error", ""),
    ("z", 1, "ok", "a page nobody transcribed"),
    ("c", 2, "error", ""),
]
HAND_TRUTH = [("a", 1, "s1", "abcdefghij"), ("a", 2, "s1", "hello world"), ("b", 1, "s2", "one two three four"),
              ("c", 1, "s2", "xyz"), ("d", 1, "s2", "a letter another run read")]


@pytest.fixture
def hand(tmp_path) -> tuple[Path, Path]:
    run = write_run(tmp_path / "run", HAND_RUN)
    # The run's own tally: it finished, every document it was given read (a, b, c, z).
    (run / "summary.json").write_text(json.dumps({"schema": 1, "state": "finished", "docs": 4, "missing": 0}))
    return run, write_truth_csv(tmp_path / "truth.csv", HAND_TRUTH)


def test_micro_macro_missing_by_hand(hand):
    run, truth = hand
    ev = evaluate_run(run, truth, resamples=200)
    c = ev.corpus
    assert (c.pages, c.scored, c.missing) == (4, 3, 1)
    assert (c.char_edits, c.ref_chars, c.word_edits, c.ref_words) == (19, 39, 5, 7)
    assert c.cer == pytest.approx(19 / 39)
    assert c.cer_macro == pytest.approx((0.1 + 0 + 1.0) / 3)
    assert c.wer == pytest.approx(5 / 7)
    assert c.wer_macro == pytest.approx((1.0 + 0 + 1.0) / 3)
    # the missing page counts as CER 1.0: 3 more edits over 3 more characters
    assert c.cer_with_missing == pytest.approx((19 + 3) / (39 + 3))
    assert c.wer_with_missing == pytest.approx((5 + 1) / (7 + 1))
    assert [(p.doc_id, p.page) for p in ev.missing] == [("c", 1)]
    assert ev.unscored_records == 2  # z/1 and c/2 have no truth
    assert ev.elsewhere == ["d"] and "d" not in ev.docs
    s1, s2 = ev.sets["s1"], ev.sets["s2"]
    assert s1.cer == pytest.approx(1 / 21) and s1.missing == 0
    assert s2.cer == pytest.approx(1.0) and s2.missing == 1 and s2.cer_with_missing == pytest.approx(1.0)
    assert ev.docs["a"].cer == pytest.approx(1 / 21) and ev.docs["c"].scored == 0 and ev.docs["c"].cer is None
    worst = ev.worst(2)
    assert [(p.doc_id, p.status, p.cer) for p in worst] == [("b", "error", 1.0), ("a", "ok", 0.1)]


def test_evaluate_cli_json_and_gates(hand):
    run, truth = hand
    res = cli("evaluate", str(run), "--truth", str(truth), "--json", "--allow-missing", "--gate", "cer<=0.5",
                  "--gate", "set:s1:cer<=0.05", "--gate", "wer<0.8")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["passed"] is True and [g["passed"] for g in data["gates"]] == [True, True, True]
    assert data["corpus"]["cer"] == pytest.approx(19 / 39)
    assert data["missing"] == [{"doc_id": "c", "page": 1, "set": "s2"}]
    assert {p["doc_id"] for p in data["pages"]} == {"a", "b", "c"}
    assert "1 of 4 truth pages have no record" in res.stderr
    assert data["truth_documents_not_in_run"] == ["d"] and "truth for 1 document(s) not in this run, not counted: d" in res.stderr

    # a failing gate: exit 4 (from the real process) and a line naming the gate and by how much
    # (A terminal wide enough for the line: under pytest-xdist the workers inherit a COLUMNS.)
    res = run_cli("evaluate", str(run), "--truth", str(truth), "--allow-missing", "--gate", "set:s1:cer<=0.03",
                  env={"COLUMNS": "200"})
    assert res.returncode == 4
    assert "gate set:s1:cer<=0.03 failed: cer = 0.0476 (4.76 %) in set s1, over the limit 0.03 by 0.0176 (1.76 pp)" \
        in res.stdout
    # missing pages fail a gate unless allowed
    res = cli("evaluate", str(run), "--truth", str(truth), "--gate", "cer<=0.9")
    assert res.returncode == 4 and "1 of 4 truth pages in corpus have no record" in res.stdout
    res = cli("evaluate", str(run), "--truth", str(truth), "--gate", "set:s1:cer<=0.9", "--gate", "missing<=1")
    assert res.returncode == 0, res.stdout
    # the text report: a table with every set, the worst pages and the missing ones
    for needle in ("s1", "s2", "all", "worst", "missing (1 truth pages", "c page 1", "CER 48.72 %"):
        assert needle in res.stdout
    # usage errors: a malformed gate, an unknown set, no truth
    assert cli("evaluate", str(run), "--truth", str(truth), "--gate", "cer=<0.1").returncode == 3
    res = cli("evaluate", str(run), "--truth", str(truth), "--allow-missing", "--gate", "set:nope:cer<=0.1")
    assert res.returncode == 4 and "no set named 'nope'" in res.stdout
    assert cli("evaluate", str(run)).returncode == 3


def test_parse_gate():
    g = parse_gate("set:ehri_en:cer<=0.05")
    assert (g.kind, g.name, g.metric, g.op, g.value) == ("set", "ehri_en", "cer", "<=", 0.05)
    assert parse_gate("wer < 10%").value == pytest.approx(0.10)
    assert parse_gate("cer_hi<=0.04").metric == "cer_hi"
    assert parse_gate("doc:a:cer_macro>=0").kind == "doc"
    for bad in ("cer", "xer<=0.1", "cer<=abc", "set:cer<=0.1"):
        with pytest.raises(UsageError):
            parse_gate(bad)


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(7)
    chars = rng.integers(500, 3000, size=60)
    edits = (chars * rng.uniform(0.0, 0.1, size=60)).astype(np.int64)
    a = bootstrap_ci(edits, chars, 1000, seed=3)
    b = bootstrap_ci(edits, chars, 1000, seed=3)
    c = bootstrap_ci(edits, chars, 1000, seed=4)
    assert a == b and a != c
    point = edits.sum() / chars.sum()
    assert a[0] < point < a[1] and a[1] - a[0] < 0.03
    # one page: no spread
    lo, hi = bootstrap_ci(np.array([3]), np.array([30]), 100, seed=0)
    assert lo == hi == pytest.approx(0.1)
    assert bootstrap_ci(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) is None


def test_evaluation_is_deterministic(hand):
    run, truth = hand
    a = evaluate_run(run, truth).as_dict()
    b = evaluate_run(run, truth).as_dict()
    assert a == b and a["corpus"]["cer_ci"] is not None
    c = evaluate_run(run, truth, seed=1).as_dict()
    assert c["corpus"]["cer"] == a["corpus"]["cer"]


def test_evaluate_clean_scores_the_cleaned_layer(tmp_path):
    raw = "<|ref|>text<|/ref|><|det|>[[10, 10, 500, 40]]<|/det|>\nThe harbour was closed."
    run = write_run(tmp_path / "run", [("d", 1, "ok", raw)])
    truth = write_truth_csv(tmp_path / "t.csv", [("d", 1, "", "The harbour was closed.")])
    assert evaluate_run(run, truth).corpus.cer > 0.5
    ev = evaluate_run(run, truth, clean=True)
    assert ev.corpus.cer == 0 and ev.layer.startswith("clean (in memory")
    assert cli("clean", str(run)).returncode == 0
    assert evaluate_run(run, truth, clean=True).layer == "clean (layer)"


@pytest.mark.tesseract
def test_real_tesseract_run_against_pages_csv(real_run, gt):
    res = cli("evaluate", str(real_run), "--truth", str(gt / "pages.csv"), "--json", "--gate", "set:ehri_en:cer<=0.08",
                  "--allow-missing")
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads(res.stdout)
    # The truth's other documents are no pages this run should have read: not missing, said apart.
    assert data["corpus"]["scored"] == 2 and data["corpus"]["missing"] == 0 and data["missing"] == []
    assert len(data["truth_documents_not_in_run"]) == GT_PAGE_COUNT - 2 and "zonaras" not in data["sets"]
    recs = final_records(real_run / "pages.jsonl")
    for page in (p for p in data["pages"] if not p["missing"]):
        rec = recs[(page["doc_id"], 1)]
        truth = (gt / "ehri_en" / (page["doc_id"] + ".txt")).read_text(encoding="utf-8")
        assert page["cer"] == pytest.approx(cer(rec.text, truth))  # one scorer: the same number
        assert 0 < page["cer"] < 0.08
    lo, hi = data["corpus"]["cer_ci"]
    assert lo <= data["corpus"]["cer"] <= hi
    # The run read all it was given: the truth of other documents does not make it partial (a gate
    # without --allow-missing passes), and is said apart.
    res = cli("evaluate", str(real_run), "--truth", str(gt / "pages.csv"), "--gate", "cer<=0.5")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"truth for {GT_PAGE_COUNT - 2} document(s) not in this run, not counted" in res.stderr


def test_aggregate_of_nothing():
    agg = aggregate([])
    assert agg.pages == 0 and agg.cer is None and agg.cer_with_missing is None
    ev = score({}, [])
    assert ev.corpus.pages == 0
