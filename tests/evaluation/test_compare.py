"""`vlmocr compare`: two runs of the same pages, page by page, with and without truth."""

from __future__ import annotations

import json
import shutil

import pytest
from support.cli import cli_in_process as cli
from support.runs import write_run, write_truth_csv

from vlmocr.evaluation import compare_records, load_truth
from vlmocr.store import RecordWriter, final_records


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
    assert res.returncode == 4
    data = json.loads(res.stdout)
    flagged = {(p["doc_id"], p["page"]): p for p in data["pages"] if p["flagged"]}
    assert set(flagged) == {("d", 2), ("e", 2)}
    assert flagged[("d", 2)]["cer_ab"] == pytest.approx(1 / 39)
    assert flagged[("e", 2)]["reason"] == "only in B"
    assert cli("compare", str(a), str(a)).returncode == 0
    # a loose tolerance lets the small difference pass, not the page that is only in B
    res = cli("compare", str(a), str(b), "--tolerance", "0.05")
    assert res.returncode == 4 and "1 beyond tolerance" in res.stdout


def test_compare_against_truth_uses_the_cer_difference(tmp_path):
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


@pytest.mark.tesseract
def test_real_compare_twins(real_run, gt, tmp_path):
    twin = tmp_path / "twin"
    twin.mkdir()
    shutil.copy(real_run / "pages.jsonl", twin / "pages.jsonl")
    res = cli("compare", str(real_run), str(twin), "--truth", str(gt / "pages.csv"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 beyond tolerance 0.1 pp" in res.stdout
    # one page of the twin loses a line: only that page is flagged
    recs = final_records(twin / "pages.jsonl")
    key = sorted(recs)[0]
    rec = dict(recs[key])
    rec["text"] = "\n".join(rec["text"].splitlines()[1:])
    with RecordWriter(twin / "pages.jsonl") as w:
        w.append(rec)
    res = cli("compare", str(real_run), str(twin), "--truth", str(gt / "pages.csv"), "--json")
    assert res.returncode == 4
    flagged = [(p["doc_id"], p["page"]) for p in json.loads(res.stdout)["pages"] if p["flagged"]]
    assert flagged == [key]
