"""`vlmocr manifest`: priority order, skipped duplicates and unreadable files, ASCII staging, and
a manifest that `vlmocr run --manifest` reads."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from support.cli import run_cli
from support.corpora import build_corpus
from support.documents import make_text_pdf
from support.records import read_records

SKIPPED = {"copy_of_born": "duplicate", "locked": "encrypted", "corrupt": "corrupt", "truncated": "corrupt",
           "empty": "empty"}
PAGES = {"born": 2, "deutsch": 1, "francais": 1, "scan": 3, "mixed": 5, "book": 3, "perm": 1, "symbols": 1,
         "photo": 1, "multi": 2, "Müller brief": 1, "Muller brief": 1, "a?b": 1}


@pytest.fixture(scope="module")
def triaged(tmp_path_factory) -> Path:
    from vlmocr.corpus.triage import triage

    base = tmp_path_factory.mktemp("manifest")
    corpus = build_corpus(base / "corpus")
    # names that need staging: not ASCII, a space, and two that fold to the same ASCII name
    make_text_pdf(corpus / "Müller brief.pdf", [["Sehr geehrter Herr Müller, wir danken Ihnen für den Brief."]])
    make_text_pdf(corpus / "Muller brief.pdf", [["Dear Mr Muller, thank you for the letter you sent us."]])
    make_text_pdf(corpus / "a?b.pdf", [["A file name with a question mark in it, which some tools dislike."]])
    out = base / "triage.csv"
    triage([str(corpus)], out, workers=1)
    return out


def manifest_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def triage_order(triaged: Path) -> list[str]:
    return [r["doc_id"] for r in manifest_rows(triaged)]


def test_default_order_fewest_pages_and_skips(triaged, tmp_path):
    out = tmp_path / "m.csv"
    res = run_cli("manifest", "--triage", str(triaged), "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert (report["docs"], report["skipped_duplicates"], report["skipped_unreadable"]) == (13, 1, 4)
    assert report["pages"] == sum(PAGES.values())
    for doc_id, why in SKIPPED.items():
        assert f"skipped {doc_id}: {why}" in res.stderr
    rows = manifest_rows(out)
    with out.open(encoding="utf-8") as fh:
        # triage's suggested language goes with each document, marked as a suggestion (issue 27)
        assert fh.readline().strip() == "doc_id,path,priority,language,language_from"
    suggested = {r["doc_id"]: (r["language"], r["language_from"]) for r in manifest_rows(out)}
    triage_rows = {r["doc_id"]: r for r in csv.DictReader(triaged.open(encoding="utf-8"))}
    for doc_id, (language, source) in suggested.items():
        assert language == triage_rows[doc_id]["suggest_lang"] and source == ("triage" if language else "")
    ids = [r["doc_id"] for r in rows]
    order = triage_order(triaged)
    assert ids == sorted(PAGES, key=lambda d: (PAGES[d], order.index(d)))  # ties keep the run order
    assert [r["priority"] for r in rows] == [str(i) for i in range(1, 14)]
    assert all(Path(r["path"]).is_absolute() and Path(r["path"]).is_file() for r in rows)
    assert not set(SKIPPED) & set(ids)


@pytest.mark.parametrize("order", ["most-pages", "path", "triage"])
def test_other_orders(triaged, tmp_path, order):
    from vlmocr.corpus.manifest import build_manifest

    out = tmp_path / "m.csv"
    build_manifest(triaged, out, order=order)
    rows = manifest_rows(out)
    ids = [r["doc_id"] for r in rows]
    t = triage_order(triaged)
    if order == "most-pages":
        assert ids == sorted(PAGES, key=lambda d: (-PAGES[d], t.index(d)))
    elif order == "path":
        assert [r["path"] for r in rows] == sorted(r["path"] for r in rows)
    else:
        assert ids == [d for d in t if d in PAGES]


def test_priority_file_then_rule(triaged, tmp_path):
    prio = tmp_path / "prio.txt"
    mixed_path = next(r["path"] for r in manifest_rows(triaged) if r["doc_id"] == "mixed")
    prio.write_text(f"# most urgent first\nbook\n{mixed_path}\nnot-a-document\ncopy_of_born\nbook\n", encoding="utf-8")
    out = tmp_path / "m.csv"
    res = run_cli("manifest", "--triage", str(triaged), "--out", str(out), "--priority-file", str(prio),
                  "--order", "most-pages")
    assert res.returncode == 0, res.stderr
    ids = [r["doc_id"] for r in manifest_rows(out)]
    assert ids[:2] == ["book", "mixed"]  # by doc_id and by path, in the file's order
    t = triage_order(triaged)
    rest = [d for d in PAGES if d not in ("book", "mixed")]
    assert ids[2:] == sorted(rest, key=lambda d: (-PAGES[d], t.index(d)))
    # a duplicate stays out even when named; unknown names are reported
    assert "copy_of_born" not in ids
    assert "2 priority entries match no readable, unique document: not-a-document, copy_of_born" in res.stderr
    assert "2 prioritised" in res.stdout


def test_priority_column(triaged, tmp_path):
    from vlmocr.corpus.manifest import build_manifest
    from vlmocr.exceptions import UsageError

    rows = manifest_rows(triaged)
    edited = tmp_path / "triage-edited.csv"
    with edited.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]) + ["urgency"])
        w.writeheader()
        for r in rows:
            w.writerow({**r, "urgency": {"photo": "2", "scan": "1", "multi": "2.5"}.get(r["doc_id"], "")})
    out = tmp_path / "m.csv"
    report = build_manifest(edited, out, priority_column="urgency")
    ids = [r["doc_id"] for r in manifest_rows(out)]
    assert ids[:3] == ["scan", "photo", "multi"] and report.prioritised == 3
    with pytest.raises(UsageError, match="no column 'nope'"):
        build_manifest(edited, out, priority_column="nope")
    with pytest.raises(UsageError, match="not both"):
        build_manifest(edited, out, priority_column="urgency", priority_file=edited)
    res = run_cli("manifest", "--triage", str(edited), "--out", str(out), "--order", "largest")
    assert res.returncode == 3


def test_stage_ascii_links_and_run_accepts_the_manifest(triaged, tmp_path):
    stage, out = tmp_path / "stage", tmp_path / "m.csv"
    for again in (False, True):  # staging again is a no-op, not an error (the manifest: --overwrite)
        res = run_cli("manifest", "--triage", str(triaged), "--out", str(out), "--stage", str(stage),
                      *(["--overwrite"] if again else []))
        assert res.returncode == 0, res.stderr
    rows = manifest_rows(out)
    originals = {r["doc_id"]: r for r in manifest_rows(tmp_path / "m.originals.csv")}
    assert set(originals) == set(PAGES)
    names = sorted(p.name for p in stage.iterdir())
    assert len(names) == 13 and len({n.lower() for n in names}) == 13
    for r in rows:
        link = Path(r["path"])
        assert link.parent == stage.absolute() and link.is_symlink()
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in link.name), link.name
        assert os.readlink(link) == originals[r["doc_id"]]["original_path"]
        assert originals[r["doc_id"]]["path"] == r["path"]
        assert link.resolve() == Path(originals[r["doc_id"]]["original_path"]).resolve()
    by_id = {r["doc_id"]: Path(r["path"]).name for r in rows}
    assert by_id["born"] == "born.pdf" and by_id["a?b"] == "a_b.pdf" and by_id["multi"] == "multi.tif"
    assert {by_id["Müller brief"], by_id["Muller brief"]} & {"Muller_brief.pdf"}
    assert by_id["Müller brief"] != by_id["Muller brief"]
    # `vlmocr run --manifest` reads it, with the original doc ids (results keep the original names)
    run = tmp_path / "run"
    res = run_cli("run", "--manifest", str(out), "--out", str(run), "--engine", "textlayer", "--workers", "1")
    assert res.returncode in (0, 2), res.stderr  # scans have no text layer: review, not an error
    recs = read_records(run)
    assert {r["doc_id"] for r in recs} == set(PAGES)
    assert len(recs) == sum(PAGES.values())
    assert (run / "docs" / "Müller brief.md").exists()
    assert "Sehr geehrter Herr Müller" in (run / "docs" / "Müller brief.md").read_text(encoding="utf-8")


def test_stage_refuses_to_replace_a_real_file(triaged, tmp_path):
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / "born.pdf").write_text("mine")
    res = run_cli("manifest", "--triage", str(triaged), "--out", str(tmp_path / "m.csv"), "--stage", str(stage))
    assert res.returncode == 3 and "not a symlink" in res.stderr
    assert (stage / "born.pdf").read_text() == "mine"


def test_skipped_list_file(triaged, tmp_path):
    from vlmocr.corpus.manifest import build_manifest

    build_manifest(triaged, tmp_path / "m.csv", skipped_out=tmp_path / "skipped.csv")
    skipped = {r["doc_id"]: r for r in manifest_rows(tmp_path / "skipped.csv")}
    assert {d: r["why"] for d, r in skipped.items()} == SKIPPED
    assert skipped["copy_of_born"]["detail"] == "duplicate of born"
    assert "password" in skipped["locked"]["detail"]


def test_triage_reads_a_manifest_with_its_doc_ids(triaged, tmp_path):
    from vlmocr.corpus.manifest import build_manifest
    from vlmocr.corpus.triage import triage

    build_manifest(triaged, tmp_path / "m.csv", order="most-pages", stage=tmp_path / "stage")
    again = tmp_path / "again.csv"
    summary = triage([], again, manifest=tmp_path / "m.csv")
    assert [r["doc_id"] for r in manifest_rows(again)] == [r["doc_id"] for r in manifest_rows(tmp_path / "m.csv")]
    assert summary.duplicates == 0 and summary.unreadable == 0 and summary.pages == sum(PAGES.values())


def test_staged_names_are_never_windows_device_names():
    from vlmocr.corpus.manifest import Entry, stage_names

    entries = [Entry("CON\u2014", "/x/a.pdf", 1, 0), Entry("nul\u00b7.v2", "/x/b.tif", 1, 1), Entry("console", "/x/c.pdf", 1, 2)]
    assert stage_names(entries) == {"CON\u2014": "CON_.pdf", "nul\u00b7.v2": "nul_.v2.tif", "console": "console.pdf"}
