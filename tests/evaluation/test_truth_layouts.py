"""Issue 27, point 2: ground truth in the layouts people have. A folder of page files
(`doc/p0001.txt`, `doc/0001.txt`, `doc_0001.gt.txt`), a CSV of `pdf,page,truth` paths, PAGE-XML and
ALTO matched 0 of 121 pages and exited 0. Each is read now, evaluate says which layout it recognised
and how many pages matched, gives the same CER as the CSV form on the same pages, and exits 3 when
nothing matched, listing the layouts it read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import run_cli
from support.documents import make_text_pdf
from vlmocr.evaluation import load_truth
from vlmocr.exceptions import ExitCode

PAGES = {"letter": [["Dear Sir, thank you for the books", "which arrived on Monday."],
                    ["We shall pay the sum by the end", "of the month. Yours faithfully"]]}
# The truth differs from the text layer in a word per page, so the CER is not zero.
TRUTH = {("letter", 1): "Dear Sir, thank you for the book\nwhich arrived on Monday.",
         ("letter", 2): "We shall pay the sum at the end\nof the month. Yours faithfully"}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("layouts")
    make_text_pdf(folder / "letter.pdf", PAGES["letter"])
    out = folder / "run"
    assert run_cli("run", str(folder / "letter.pdf"), "--out", str(out), "--engine", "textlayer").returncode == 0
    return out


def page_xml(text: str) -> str:
    lines = "".join(f'<TextLine id="l{i}"><TextEquiv><Unicode>{t}</Unicode></TextEquiv></TextLine>'
                    for i, t in enumerate(text.split("\n")))
    return ('<?xml version="1.0" encoding="UTF-8"?><PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/'
            '2019-07-15"><Page imageFilename="x.png" imageWidth="10" imageHeight="10"><TextRegion id="r1">'
            f'{lines}</TextRegion></Page></PcGts>')


def alto(text: str) -> str:
    lines = "".join("<TextLine>" + "<SP/>".join(f'<String CONTENT="{w}"/>' for w in t.split()) + "</TextLine>"
                    for t in text.split("\n"))
    return ('<?xml version="1.0" encoding="UTF-8"?><alto xmlns="http://www.loc.gov/standards/alto/ns-v4#"><Layout>'
            f'<Page><PrintSpace><TextBlock>{lines}</TextBlock></PrintSpace></Page></Layout></alto>')


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


LAYOUT_FILES = {
    "DOC/p0001.txt": {"letter/p0001.txt": TRUTH[("letter", 1)], "letter/p0002.txt": TRUTH[("letter", 2)]},
    "DOC/0001.txt": {"letter/0001.txt": TRUTH[("letter", 1)], "letter/0002.txt": TRUTH[("letter", 2)]},
    "doc_0001.gt.txt": {"letter_0001.gt.txt": TRUTH[("letter", 1)], "letter_0002.gt.txt": TRUTH[("letter", 2)]},
    "PAGE-XML": {"letter/p0001.xml": page_xml(TRUTH[("letter", 1)]), "letter/p0002.xml": page_xml(TRUTH[("letter", 2)])},
    "ALTO": {"letter.p1.xml": alto(TRUTH[("letter", 1)]), "letter.p2.xml": alto(TRUTH[("letter", 2)])},
    "form feeds": {"letter.txt": TRUTH[("letter", 1)] + "\f" + TRUTH[("letter", 2)]},
}


def evaluate(run: Path, truth: Path) -> tuple[float, str]:
    res = run_cli("evaluate", str(run), "--truth", str(truth), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["corpus"]["pages"] == 2 and not data["missing"], data
    return data["corpus"]["cer"], res.stderr


def test_every_layout_gives_the_csv_forms_cer(run, tmp_path):
    csv_truth = tmp_path / "csv"
    csv_truth.mkdir()
    write(csv_truth, {"p1.txt": TRUTH[("letter", 1)], "p2.txt": TRUTH[("letter", 2)]})
    (csv_truth / "truth.csv").write_text(f"pdf,page,truth\n{run.parent / 'letter.pdf'},1,p1.txt\n"
                                         f"{run.parent / 'letter.pdf'},2,p2.txt\n")
    reference, said = evaluate(run, csv_truth / "truth.csv")
    assert reference > 0 and "2 matched a record" in said and "CSV" in said
    for name, files in LAYOUT_FILES.items():
        folder = write(tmp_path / name.replace("/", "_"), files)
        cer, said = evaluate(run, folder)
        assert cer == reference, (name, cer, reference)
        assert "2 matched a record" in said, (name, said)
    layouts = {t.layout for t in load_truth(tmp_path / "PAGE-XML")}
    assert layouts == {"PAGE-XML"}


def test_nothing_matched_is_a_usage_error_listing_the_layouts(run, tmp_path):
    folder = write(tmp_path / "other", {"someone_else/p0001.txt": "Not this document at all."})
    res = run_cli("evaluate", str(run), "--truth", str(folder))
    assert res.returncode == ExitCode.usage, res.stderr
    assert "no truth page" in res.stderr and "PAGE-XML" in res.stderr and "DOC/p0001.txt" in res.stderr
