"""Ground truth: the folder and CSV layouts `vlmocr evaluate` and the SLURM gate accept, and the
matching of truth pages to a run's documents."""

from __future__ import annotations

import pytest

from support.cli import cli_in_process as cli
from support.components import GT_PAGE_COUNT
from support.documents import text_image
from support.runs import write_run, write_truth_csv
from vlmocr.evaluation import TruthPage, evaluate_run, load_truth, match_truth
from vlmocr.exceptions import UsageError


def test_truth_folder_layout_matches_folder_run_ids(tmp_path):
    root = tmp_path / "gt"
    (root / "letters").mkdir(parents=True)
    text_image(["x"]).save(root / "letters" / "l 1.png")
    (root / "letters" / "l 1.txt").write_text("first letter", encoding="utf-8")
    text_image(["y"]).save(root / "top.jpg")
    (root / "top.txt").write_text("top page", encoding="utf-8")
    text_image(["z"]).save(root / "no_truth.png")  # an image without .txt is not truth
    truth = load_truth(root)
    assert sorted((t.doc_id, t.page, t.set) for t in truth) == [("letters__l 1", 1, "letters"), ("top", 1, "")]
    # a folder run over gt/ names the docs like the truth; a run over single files without folders
    assert match_truth(truth, ["letters__l 1", "top"]) == {"letters__l 1": "letters__l 1", "top": "top"}
    assert match_truth(truth, ["l 1"]) == {"letters__l 1": "l 1"}
    run = write_run(tmp_path / "run", [("l 1", 1, "ok", "first letter"), ("top", 1, "ok", "top pag")])
    ev = evaluate_run(run, root)
    assert ev.corpus.missing == 0 and ev.corpus.char_edits == 1 and ev.corpus.ref_chars == 20


def test_ambiguous_short_ids_are_not_guessed():
    truth = [TruthPage("a__x", 1, "t"), TruthPage("b__x", 1, "t")]
    assert match_truth(truth, ["x"]) == {}


def test_pages_csv_of_the_development_split(gt):
    # tests/data/gt/pages.csv: rows of ../shared/gt/pages.csv, with the same columns
    truth = load_truth(gt / "pages.csv")
    assert len(truth) == GT_PAGE_COUNT
    by_id = {t.doc_id: t for t in truth}
    t = by_id["ehri_en__EHRI-DR-19421116-US_02"]
    assert t.set == "ehri_en" and t.language == "eng" and t.text.startswith("- 2 -")
    with pytest.raises(UsageError):
        load_truth(gt / "README.md")


def test_duplicate_truth_is_an_error(tmp_path):
    with pytest.raises(UsageError, match="duplicate truth"):
        load_truth(write_truth_csv(tmp_path / "t.csv", [("a", 1, "", "x"), ("a", 1, "", "y")]))


def test_pages_csv_layout_in_a_folder_of_its_own(tmp_path):
    # the development split's pages.csv columns: image and truth relative to the CSV
    (tmp_path / "ehri_en").mkdir()
    text_image(["x"]).save(tmp_path / "ehri_en" / "p1.jpg")
    (tmp_path / "ehri_en" / "p1.txt").write_text("\ufeff- 2 -\nDear Sir,", encoding="utf-8")
    (tmp_path / "pages.csv").write_text(
        "set,name,image,truth,language,script,source_repo,source_path,license,kind\n"
        "ehri_en,p1,ehri_en/p1.jpg,ehri_en/p1.txt,eng,Latn,EHRI/x,a/b.txt,CC-BY,typescript\n", encoding="utf-8")
    [t] = load_truth(tmp_path / "pages.csv")
    assert (t.doc_id, t.page, t.set, t.language, t.text) == ("ehri_en__p1", 1, "ehri_en", "eng", "- 2 -\nDear Sir,")
    assert t.image == str(tmp_path / "ehri_en" / "p1.jpg") and t.origin == str(tmp_path / "ehri_en" / "p1.txt")


def test_truth_from_a_folder_and_from_csvs_in_every_shape(tmp_path):
    # The shapes the SLURM gate accepted, read by the one loader `vlmocr evaluate` uses too.
    t = tmp_path / "truth"
    (t / "set").mkdir(parents=True)
    text_image(["x"]).save(t / "set" / "one.png")
    (t / "set" / "one.txt").write_text("first page")
    (t / "two.txt").write_text("page one of two")  # no image beside it: still truth, of page 1
    (t / "two.p2.txt").write_text("page two of two")  # name.pN.txt: page N
    (t / "two.pdf").write_bytes(b"%PDF-1.4 not read here")
    text_image(["y"]).save(t / "scan.p2.png")  # an image named scan.p2: the .p2 is its name, not a page
    (t / "scan.p2.txt").write_text("a page called p2")
    (t / ".ipynb_checkpoints").mkdir()
    (t / ".ipynb_checkpoints" / "two.txt").write_text("an editor's copy")  # hidden: not truth
    pages = load_truth(t)
    assert sorted((p.doc_id, p.page, p.set, p.text) for p in pages) == [
        ("scan.p2", 1, "", "a page called p2"), ("set__one", 1, "set", "first page"),
        ("two", 1, "", "page one of two"), ("two", 2, "", "page two of two")]
    images = {(p.doc_id, p.page): p.image for p in pages}
    assert images[("set__one", 1)] == str(t / "set" / "one.png")
    assert images[("two", 1)] == images[("two", 2)] == str(t / "two.pdf")

    # doc_id,page,truth_path (a file relative to the CSV)
    (tmp_path / "t1.csv").write_text("doc_id,page,truth_path\ntwo,2,truth/two.p2.txt\n")
    assert [(p.doc_id, p.page, p.text) for p in load_truth(tmp_path / "t1.csv")] == [("two", 2, "page two of two")]
    # path,truth: the document as a path, the truth a file; its id derived as a run derives it
    (tmp_path / "t2.csv").write_text("path,truth\ntruth/set/one.png,truth/set/one.txt\n")
    [p] = load_truth(tmp_path / "t2.csv")
    assert (p.doc_id, p.set, p.image, p.text) == ("truth__set__one", "truth", str(t / "set" / "one.png"), "first page")
    # inline text: in a `text` column, or in a `truth` cell that names no file
    (tmp_path / "t3.csv").write_text('doc_id,page,text\nx,1,"inline, with comma"\ny,1,\n')
    assert [(p.doc_id, p.text) for p in load_truth(tmp_path / "t3.csv")] == [("x", "inline, with comma"), ("y", "")]
    (tmp_path / "t4.csv").write_text("doc_id,truth\nx,the text itself\n")
    assert load_truth(tmp_path / "t4.csv")[0].text == "the text itself"


@pytest.mark.parametrize("body, needle", [
    ("a,b\n1,2\n", "needs a document column"),
    ("doc_id,truth_path\nx,nowhere.txt\n", "t.csv:2: truth file not found"),
    ("doc_id,truth\nx,nowhere.txt\n", "t.csv:2: truth file not found"),
    ("doc_id,page,text\nx,two,hi\n", "t.csv:2: page 'two' is not a number"),
    ("doc_id,image,text\n,,hi\n", "t.csv:2: no doc_id and no image"),
    ("doc_id,text\n", "t.csv: no rows"),
])
def test_bad_truth_csv_is_one_line_naming_the_row(tmp_path, body, needle):
    (tmp_path / "t.csv").write_text(body)
    with pytest.raises(UsageError, match=needle.replace(".", r"\.")):
        load_truth(tmp_path / "t.csv")


def test_unreadable_truth_is_a_usage_error_naming_the_file(tmp_path):
    gt = tmp_path / "gt"
    gt.mkdir()
    (gt / "a.txt").write_text("fine", encoding="utf-8")
    (gt / "b.txt").write_bytes("Stra\u00dfe".encode("latin-1"))  # not UTF-8
    run = write_run(tmp_path / "run", [("a", 1, "ok", "fine")])
    res = cli("evaluate", str(run), "--truth", str(gt))
    assert res.returncode == 3, res.stdout + res.stderr
    assert f"cannot read truth {gt / 'b.txt'}: not UTF-8" in res.stderr and "Traceback" not in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="no truth found"):
        load_truth(empty)


def test_matching_by_original_file_id_and_stem(tmp_path):
    (tmp_path / "scans").mkdir()
    img = tmp_path / "scans" / "letter.png"
    img.write_bytes(b"x")
    (tmp_path / "link.png").symlink_to(img)
    truth = [TruthPage("set__letter", 1, "t", image=str(img)), TruthPage("memo", 1, "t"),
             TruthPage("set__report", 1, "t", image=str(tmp_path / "elsewhere" / "report.pdf")),
             TruthPage("a__notes", 1, "t"), TruthPage("b__notes", 1, "t")]
    originals = {"g1": str(tmp_path / "link.png"),  # the same file through a symlink: matched by image
                 "memo": "/in/memo.pdf",  # the same id
                 "g3": "/in/report.pdf",  # the same stem, one document has it
                 "g4": "/in/notes.pdf", "g5": "/other/notes.pdf"}  # a stem two documents have: no guess
    assert match_truth(truth, list(originals), originals) == {"set__letter": "g1", "memo": "memo",
                                                              "set__report": "g3"}
    # a file names its document before an id does: the truth "g1" does not take g1 from the image match
    assert match_truth([*truth, TruthPage("g1", 1, "t")], list(originals), originals)["set__letter"] == "g1"
    assert "g1" not in match_truth([*truth, TruthPage("g1", 1, "t")], list(originals), originals)
    # without originals, only ids
    assert match_truth(truth, list(originals)) == {"memo": "memo"}
