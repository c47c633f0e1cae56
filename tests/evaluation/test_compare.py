"""`vlmocr compare`: two runs of the same pages as twins (seed 000: "Twin scores from the bulk run
differed from the gate by up to 0.12 pp raw, within 0.1 pp after cleaning. Treat a larger gap as
a pipeline change."): the corpus scores after cleaning decide the exit code, pages are listed."""

from __future__ import annotations

import json

import pytest

from support.cli import cli_in_process as cli
from support.cli import run_cli
from support.runs import write_run, write_truth_csv
from vlmocr.evaluation import compare_records, load_truth
from vlmocr.runfolder.store import RecordWriter, final_records


def test_compare_flags_the_right_pages(tmp_path):
    base = [("d", 1, "ok", "The quick brown fox jumps over the lazy dog."),
            ("d", 2, "ok", "Pack my box with five dozen liquor jugs."),
            ("e", 1, "ok", "Sphinx of black quartz, judge my vow.")]
    a = write_run(tmp_path / "a", base)
    changed = list(base)
    changed[1] = ("d", 2, "ok", "Pack my box with five dozen liquor jug.")  # 1 edit in 40 chars: 2.5 pp
    changed.append(("e", 2, "ok", "only in B"))
    b = write_run(tmp_path / "b", changed)
    res = cli("compare", str(a), str(b), "--json")
    assert res.returncode == 4  # no truth: 1 edit in B's 120 characters of the three twins, 0.83 pp
    data = json.loads(res.stdout)
    flagged = {(p["doc_id"], p["page"]): p for p in data["pages"] if p["flagged"]}
    assert set(flagged) == {("d", 2), ("e", 2)}
    assert flagged[("d", 2)]["cer_ab"] == pytest.approx(1 / 39)
    assert flagged[("e", 2)]["reason"] == "only in B"
    v = data["verdict"]
    assert (v["basis"], v["twins"], v["agree"]) == ("texts", 3, False)
    assert v["gap"] == pytest.approx(1 / 120)
    assert cli("compare", str(a), str(a)).returncode == 0
    # a loose tolerance lets the twins agree; the page only in B is still listed, as information
    res = cli("compare", str(a), str(b), "--tolerance-pp", "1")
    assert res.returncode == 0, res.stdout
    assert "2 differ by more than 1 pp" in res.stdout and "only in B" in res.stdout
    assert res.stdout.strip().splitlines()[-1].startswith("Twins agree:")
    res = cli("compare", str(a), str(b), "--tolerance-pp", "-1")
    assert res.returncode == 3 and "--tolerance-pp" in res.stderr


def test_compare_without_common_pages_is_a_usage_error(tmp_path):
    a = write_run(tmp_path / "a", [("d", 1, "ok", "one")])
    b = write_run(tmp_path / "b", [("e", 1, "ok", "two")])
    res = cli("compare", str(a), str(b))
    assert res.returncode == 3 and "no page in common" in res.stderr and "Traceback" not in res.stderr


def test_compare_against_truth_judges_the_corpus_not_the_pages(tmp_path):
    truth = write_truth_csv(tmp_path / "t.csv", [("d", 1, "", "abcdefghij"), ("d", 2, "", "klmnopqrst")])
    a = write_run(tmp_path / "a", [("d", 1, "ok", "abcdefghiX"), ("d", 2, "ok", "klmnopqrst")])
    # d/1: a different error, same CER (both 10 %): not flagged; d/2: 0 % → 10 %: flagged
    b = write_run(tmp_path / "b", [("d", 1, "ok", "Xbcdefghij"), ("d", 2, "ok", "klmnopqrsX")])
    cmp = compare_records(final_records(a / "pages.jsonl"), final_records(b / "pages.jsonl"),
                          truth=load_truth(truth), tolerance=0.001)
    assert [(p.doc_id, p.page) for p in cmp.flagged] == [("d", 2)]
    assert cmp.flagged[0].delta == pytest.approx(-0.1)
    assert cmp.corpus["cer_a"] == pytest.approx(0.05) and cmp.corpus["cer_b"] == pytest.approx(0.1)
    res = cli("compare", str(a), str(b), "--truth", str(truth))
    assert res.returncode == 4 and "-10.00 pp" in res.stdout
    assert "Twins differ: corpus CER against truth A 5.00 % B 10.00 % on 2 of 2 twin pages: 5.00 pp apart" in res.stdout
    # the same errors moved to other places: every page differs, the corpus scores do not
    c = write_run(tmp_path / "c", [("d", 1, "ok", "Xbcdefghij"), ("d", 2, "ok", "klmnopqrst")])
    res = cli("compare", str(a), str(c), "--truth", str(truth))
    assert res.returncode == 0, res.stdout
    assert "0.00 pp apart" in res.stdout
    # without truth the texts themselves are the measure: 2 edits in 20 characters
    res = cli("compare", str(a), str(c))
    assert res.returncode == 4 and "Twins differ: corpus CER of A against B on 2 twin pages (no truth): 10.00 pp apart" in res.stdout
    # truth that names none of the twins is a usage error, not a silent switch to the texts
    other = write_truth_csv(tmp_path / "o.csv", [("zz", 1, "", "abc")])
    res = cli("compare", str(a), str(c), "--truth", str(other))
    assert res.returncode == 3 and "--truth" in res.stderr


def _real_twin(real_run, path, edit=None):
    """A copy of a real run's records, each text passed through `edit`."""
    path.mkdir()
    recs = final_records(real_run / "pages.jsonl")
    with RecordWriter(path / "pages.jsonl") as w:
        for key in sorted(recs):
            rec = dict(recs[key].data)
            if edit is not None:
                rec["text"] = edit(key, rec["text"])
            w.append(rec)
    return path, recs


@pytest.mark.tesseract
def test_real_runs_with_identical_settings_are_twins(real_run, gt, tmp_path):
    # a second Tesseract run of the same pages with the same settings: the twins agree, with and without truth
    again = tmp_path / "again"
    sources = sorted({r.source for r in final_records(real_run / "pages.jsonl").values()})
    res = run_cli("run", *sources, "--out", str(again), "--engine", "tesseract",
                  "--lang", "eng", "--workers", "2")
    assert res.returncode == 0, res.stderr
    for extra in (("--truth", str(gt / "pages.csv")), ()):
        res = cli("compare", str(real_run), str(again), *extra)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "0 differ by more than 0.1 pp" in res.stdout
        last = res.stdout.strip().splitlines()[-1]
        assert last.startswith("Twins agree:") and "0.00 pp apart, tolerance 0.1 pp" in last


@pytest.mark.tesseract
def test_real_twins_differ_beyond_the_tolerance(real_run, gt, tmp_path):
    # one page of the twin loses its first line: the corpus CER moves by more than 0.1 pp
    twin, recs = _real_twin(real_run, tmp_path / "twin")
    key = min(recs)
    rec = dict(recs[key].data)
    rec["text"] = "\n".join(rec["text"].splitlines()[1:])
    with RecordWriter(twin / "pages.jsonl") as w:
        w.append(rec)
    res = cli("compare", str(real_run), str(twin), "--truth", str(gt / "pages.csv"), "--json")
    assert res.returncode == 4
    data = json.loads(res.stdout)
    assert [(p["doc_id"], p["page"]) for p in data["pages"] if p["flagged"]] == [key]
    v = data["verdict"]
    assert v["basis"] == "truth" and not v["agree"] and v["gap_pp"] > 0.1
    assert v["gap"] == pytest.approx(abs(v["score_a"] - v["score_b"]))
    # the one line says by how much
    assert f"{v['gap_pp']:.2f} pp apart, tolerance 0.1 pp" in res.stderr
    res = cli("compare", str(real_run), str(twin), "--truth", str(gt / "pages.csv"))
    assert res.returncode == 4
    assert res.stdout.strip().splitlines()[-1].startswith("Twins differ: corpus CER against truth A ")
    # a tolerance wider than the gap: the same runs agree, the page is still listed
    res = cli("compare", str(real_run), str(twin), "--truth", str(gt / "pages.csv"),
              "--tolerance-pp", f"{v['gap_pp'] + 0.01:.2f}", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["verdict"]["agree"]


@pytest.mark.tesseract
def test_real_page_differences_are_listed_not_failed(real_run, gt, tmp_path):
    # two stray characters at the end of the shorter page (about 1,370 characters): that page is
    # 0.15 pp off, the corpus of both pages (about 3,700) 0.05 pp: listed, and the twins agree
    recs = final_records(real_run / "pages.jsonl")
    short = min(recs, key=lambda k: len(recs[k].text))
    twin, _ = _real_twin(real_run, tmp_path / "twin", lambda key, text: text + "##" if key == short else text)
    for extra in (("--truth", str(gt / "pages.csv")), ()):
        res = cli("compare", str(real_run), str(twin), *extra, "--json")
        assert res.returncode == 0, res.stdout + res.stderr
        data = json.loads(res.stdout)
        assert [(p["doc_id"], p["page"]) for p in data["pages"] if p["flagged"]] == [short]
        assert data["verdict"]["agree"] and 0 < data["verdict"]["gap_pp"] <= 0.1


@pytest.mark.tesseract
def test_real_twins_are_judged_after_cleaning(real_run, gt, tmp_path):
    # the twin's pages come back in a ```markdown fence, as a VLM writes them: the raw layers
    # differ, the cleaned ones (the default: the cleaning rules strip the fence) are twins
    twin, _ = _real_twin(real_run, tmp_path / "twin", lambda key, text: f"```markdown\n{text}\n```")
    res = cli("compare", str(real_run), str(twin), "--truth", str(gt / "pages.csv"))
    assert res.returncode == 0, res.stdout
    assert "0.00 pp apart" in res.stdout
    res = cli("compare", str(real_run), str(twin), "--truth", str(gt / "pages.csv"), "--raw")
    assert res.returncode == 4 and "Twins differ:" in res.stdout
