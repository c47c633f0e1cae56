"""`vlmocr triage` on a mixed corpus made here: every column of every kind of document, the
sampling cap, the process pool, contact sheets and the language guesser."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from support.cli import run_cli
from support.corpora import ENG, build_corpus
from support.documents import make_text_pdf

RULE = "chars>=40,wordish>=50%,broken<=5%"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("triage") / "corpus")


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return {r["doc_id"]: r for r in csv.DictReader(fh)}


def ints(row: dict[str, str], *names: str) -> tuple[int, ...]:
    return tuple(int(row[n] or 0) for n in names)


COUNTS = ("pages", "pages_checked", "text_pages", "image_only_pages", "blank_pages", "other_pages", "bad_pages",
          "rotated_pages", "landscape_pages", "spread_pages")


def test_every_column_of_a_mixed_corpus(corpus, tmp_path):  # noqa: PLR0915 (long: to be split)
    from vlmocr.corpus.triage import COLUMNS, TriageOptions, triage

    out = tmp_path / "triage.csv"
    summary = triage([str(corpus)], out, opts=TriageOptions(), workers=1)
    with out.open(encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert header == COLUMNS
    rows = read_csv(out)
    # the same documents, ids and order as `vlmocr run` (sources.discover)
    from vlmocr.inputs.sources import discover

    assert list(rows) == [d.doc_id for d in discover([str(corpus)])]
    for row in rows.values():
        path = Path(row["path"])
        assert path.is_absolute() and path.parent == corpus.resolve()
        if row["status"] != "missing":
            assert int(row["bytes"]) == path.stat().st_size
            assert len(row["sha256"]) == 64
        assert float(row["seconds"]) >= 0

    born = rows["born"]
    assert (born["kind"], born["status"], born["reason"], born["encrypted"], born["duplicate_of"]) == ("pdf", "ok", "", "", "")
    assert ints(born, *COUNTS) == (2, 2, 2, 0, 0, 0, 0, 0, 0, 0)
    assert born["text_judged"] == RULE
    assert (born["page_size_min"], born["page_size_max"]) == ("595x842", "595x842")
    assert born["image_px_min"] == born["image_px_max"] == born["scan_dpi"] == born["dpi_source"] == ""
    assert born["lang"] == "eng"
    assert rows["copy_of_born"]["duplicate_of"] == "born" and rows["copy_of_born"]["sha256"] == born["sha256"]
    assert rows["deutsch"]["lang"] == "deu" and rows["francais"]["lang"] == "fra"

    scan = rows["scan"]
    assert ints(scan, *COUNTS) == (3, 3, 0, 3, 0, 0, 0, 0, 0, 0)
    assert (scan["page_size_min"], scan["page_size_max"]) == ("612x792", "612x792")
    assert (scan["image_px_min"], scan["image_px_max"]) == ("850x1100", "850x1100")
    assert (scan["scan_dpi"], scan["scan_dpi_min"], scan["scan_dpi_max"], scan["dpi_source"]) == ("100", "100", "100", "pdf-image")
    assert scan["lang"] == "" and scan["text_judged"] == RULE

    mixed = rows["mixed"]  # text, scan, blank, landscape, /Rotate 90
    assert ints(mixed, *COUNTS) == (5, 5, 3, 1, 1, 0, 0, 1, 2, 0)
    assert (mixed["page_size_min"], mixed["page_size_max"]) == ("595x595", "842x842")
    assert mixed["scan_dpi"] == "100" and mixed["image_px_min"] == "850x1100" and mixed["lang"] == "eng"

    book = rows["book"]  # without sheets the white page is a scan like the others
    assert ints(book, *COUNTS) == (3, 3, 0, 3, 0, 0, 0, 0, 0, 1)
    assert (book["page_size_min"], book["page_size_max"]) == ("288x432", "576x432")
    assert (book["image_px_min"], book["image_px_max"]) == ("600x900", "1200x900")
    assert book["scan_dpi"] == "150"

    locked = rows["locked"]
    assert (locked["status"], locked["encrypted"], locked["pages"]) == ("encrypted", "password", "0")
    assert locked["reason"].startswith("encrypted PDF (a password is required)")
    assert locked["pages_checked"] == locked["text_judged"] == ""
    perm = rows["perm"]
    assert (perm["status"], perm["encrypted"], perm["text_pages"], perm["lang"]) == ("ok", "permissions-only", "1", "eng")

    symbols = rows["symbols"]
    assert ints(symbols, *COUNTS) == (1, 1, 0, 0, 0, 1, 0, 0, 0, 0)
    assert symbols["text_judged"] == RULE + "; rejected: mostly symbols x1" and symbols["lang"] == ""

    assert rows["corrupt"]["status"] == "corrupt" and "no %PDF header" in rows["corrupt"]["reason"]
    assert rows["truncated"]["status"] == "corrupt" and rows["truncated"]["reason"].startswith("corrupt PDF")
    assert rows["empty"]["status"] == "empty" and "no pages" in rows["empty"]["reason"]

    photo = rows["photo"]
    assert (photo["kind"], photo["status"]) == ("image", "ok")
    assert ints(photo, *COUNTS) == (1, 1, 0, 1, 0, 0, 0, 0, 0, 0)
    assert (photo["page_size_min"], photo["image_px_min"], photo["scan_dpi"], photo["dpi_source"]) == (
        "595x842", "1240x1754", "150", "metadata")
    assert photo["text_judged"] == "" and photo["lang"] == ""
    multi = rows["multi"]
    assert ints(multi, *COUNTS) == (2, 2, 0, 2, 0, 0, 0, 0, 0, 0)
    assert (multi["page_size_max"], multi["image_px_max"], multi["scan_dpi"]) == ("612x792", "1700x2200", "200")

    s = summary.as_dict()
    assert s["docs"] == len(rows) == 15
    assert s["duplicates"] == 1 and s["unreadable"] == 4
    assert s["statuses"] == {"ok": 11, "encrypted": 1, "corrupt": 2, "empty": 1}
    assert s["pages"] == sum(int(r["pages"]) for r in rows.values())
    assert s["text_pages_estimated"] + s["ocr_pages_estimated"] == s["pages"]
    assert s["languages"] == {"eng": 4, "deu": 1, "fra": 1}


def test_cli_pool_json_progress_and_missing_file(corpus, tmp_path):
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    res = run_cli("triage", str(corpus), str(tmp_path / "missing.pdf"), "--out", str(two), "--workers", "2", "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["docs"] == 16 and summary["statuses"]["missing"] == 1 and summary["duplicates"] == 1
    assert "docs/s" in res.stderr and "unreadable document(s)" in res.stderr  # progress and report on stderr
    res = run_cli("triage", str(corpus), str(tmp_path / "missing.pdf"), "--out", str(one), "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Triage: 16 docs")
    a, b = read_csv(one), read_csv(two)
    assert list(a) == list(b)  # the pool keeps the order
    for doc_id in a:
        assert {**a[doc_id], "seconds": ""} == {**b[doc_id], "seconds": ""}
    assert a["missing"]["status"] == "missing" and a["missing"]["reason"].startswith("file not found")
    assert not list(tmp_path.glob(".*.tmp"))
    res = run_cli("triage", "--out", str(tmp_path / "x.csv"))
    assert res.returncode == 3 and "no documents" in res.stderr


def test_big_documents_are_sampled_but_counted(tmp_path):
    from vlmocr.corpus.facts import pages_to_check
    from vlmocr.corpus.triage import TriageOptions, estimated_text_pages, triage

    assert pages_to_check(5, 32) == [1, 2, 3, 4, 5]
    assert pages_to_check(100, 4) == [1, 34, 67, 100]
    assert pages_to_check(100, 0) == list(range(1, 101))
    make_text_pdf(tmp_path / "big.pdf", [ENG * 2] * 60)
    out = tmp_path / "t.csv"
    triage([str(tmp_path / "big.pdf")], out, opts=TriageOptions(check_pages=10))
    row = read_csv(out)["big"]
    assert ints(row, "pages", "pages_checked", "text_pages") == (60, 10, 10)
    assert estimated_text_pages(row) == 60


def test_interrupted_triage_leaves_no_partial_csv(corpus, tmp_path, monkeypatch):
    from vlmocr.corpus import triage as mod

    def rows_then_interrupt(docs, opts, workers=1, batch_size=8):
        first = next(iter(docs))
        yield mod.triage_document(first.doc_id, str(first.path), opts)
        raise KeyboardInterrupt

    monkeypatch.setattr(mod, "iter_rows", rows_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        mod.triage([str(corpus)], tmp_path / "t.csv", workers=1)
    assert list(tmp_path.iterdir()) == []


def test_contact_sheets(corpus, tmp_path):
    from vlmocr.corpus.sheets import CELL_H, CELL_W, COLS, HEADER_H, sheet_size

    sheets = tmp_path / "sheets"
    res = run_cli("triage", str(corpus), "--out", str(tmp_path / "t.csv"), "--sheets", str(sheets),
                  "--sheet-block", "4", "--workers", "2")
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in sheets.iterdir())
    readable = ["book", "born", "copy_of_born", "deutsch", "francais", "multi", "perm", "photo", "scan", "symbols"]
    assert names == sorted([f"{n}.png" for n in readable] + ["mixed.p0001-0004.png", "mixed.p0005-0005.png"])
    assert sheet_size(4) == (COLS * CELL_W, HEADER_H + CELL_H) and sheet_size(7) == (COLS * CELL_W, HEADER_H + 2 * CELL_H)
    pages = {"book": 3, "born": 2, "multi": 2, "photo": 1, "scan": 3, "symbols": 1}
    for name, n in pages.items():
        with Image.open(sheets / f"{name}.png") as im:
            assert im.size == sheet_size(n) and im.format == "PNG"
    with Image.open(sheets / "mixed.p0001-0004.png") as im:
        assert im.size == sheet_size(4)
        # the thumbnail of page 1 (a white A4 page with black text) sits in the first cell
        cell = im.convert("L").crop((0, HEADER_H, CELL_W, HEADER_H + CELL_H))
        assert cell.getextrema() == (0, 255)
    with Image.open(sheets / "mixed.p0005-0005.png") as im:
        assert im.size == sheet_size(1)
    rows = read_csv(tmp_path / "t.csv")
    # with sheets every page is checked and white paper is recognised from its thumbnail
    assert ints(rows["book"], "pages_checked", "image_only_pages", "blank_pages", "spread_pages") == (3, 2, 1, 1)
    assert ints(rows["mixed"], "blank_pages", "image_only_pages") == (1, 1)
    assert ints(rows["multi"], "blank_pages", "image_only_pages") == (0, 2)  # sparse small type is not blank


def test_flags_of_pages():
    from vlmocr.corpus.facts import PageFacts, mark_shapes

    pages = [PageFacts(1, 300, 450), PageFacts(2, 600, 450), PageFacts(3, 450, 300), PageFacts(4, 300, 450)]
    mark_shapes(pages)
    assert [p.shape for p in pages] == ["", "spread", "landscape", ""]
    pages[0].kind, pages[0].rotation = "text", 90
    pages[1].kind = "image"
    assert pages[0].flags() == ["text layer", "rot90"]
    assert pages[1].flags() == ["spread?"]
    assert pages[2].flags() == ["rotated?"]
    pages[3].kind = "other"
    assert pages[3].flags() == ["no text"]
    pages[3].text_reason = "mostly symbols"
    assert pages[3].flags() == ["unusable text"]


@pytest.mark.parametrize("lang,text", [
    ("eng", "It was the best of times, it was the worst of times, and all of them were in the house with him."),
    ("deu", "Es war einmal ein König, der hatte eine Tochter, und die war so schön, dass die Sonne sich wunderte."),
    ("fra", "Il était une fois un roi qui avait une fille, et elle était si belle que le soleil lui-même s'étonnait."),
    ("ces", "Byl jednou jeden král a ten měl dceru, která byla tak krásná, že se jí i slunce divilo, když na ni svítilo."),
    ("dan", "Der var engang en konge, og han havde en datter, som var så smuk, at solen selv undrede sig over hende."),
    ("ita", "C'era una volta un re che aveva una figlia, ed era così bella che il sole stesso si meravigliava di lei."),
    ("spa", "Había una vez un rey que tenía una hija, y era tan hermosa que el sol mismo se asombraba cuando la veía."),
    ("nld", "Er was eens een koning en hij had een dochter, die zo mooi was dat de zon zich over haar verwonderde."),
    ("lat", "Erat rex qui filiam habebat, et tam pulchra erat ut sol ipse, cum in eam luceret, miraretur; sed non est."),
    ("ell", "Η Ελλάδα είναι χώρα της Ευρώπης και η πρωτεύουσά της είναι η Αθήνα, που είναι μια πόλη με ιστορία."),
    ("grc", "Ὁ δὲ βασιλεὺς ἐν τῇ πόλει ἦν, καὶ οἱ στρατιῶται πρὸς αὐτὸν ἦλθον διὰ τὴν νίκην τῶν Ῥωμαίων."),
])
def test_language_guess(lang, text):
    from vlmocr.corpus.facts import text_language

    assert text_language(text * 2) == lang


def test_language_guess_without_enough_words():
    from vlmocr.corpus.facts import text_language

    assert text_language("") == ""
    assert text_language("12 34 --") == ""
    assert text_language("Xylophone zebra quantum") == "und"


def crash_on_marked(batch, opts):
    """A worker function that dies like a pdfium segfault on any file named *crash*."""
    import os

    from vlmocr.corpus.triage import triage_batch

    if any("crash" in Path(path).name for _, path in batch):
        os._exit(139)
    return triage_batch(batch, opts)


def test_a_document_that_kills_a_worker_gets_a_row_and_the_rest_go_on(corpus, tmp_path):
    from vlmocr.corpus.triage import TriageOptions, iter_rows
    from vlmocr.inputs.sources import discover

    d = tmp_path / "c"
    d.mkdir()
    for name in ("a.pdf", "b.pdf", "crash.pdf", "d.pdf", "e.pdf", "f.pdf"):
        shutil.copy(corpus / ("scan.pdf" if name != "b.pdf" else "born.pdf"), d / name)
    rows = list(iter_rows(discover([str(d)]), TriageOptions(), workers=2, batch_size=2, work=crash_on_marked))
    assert [r["doc_id"] for r in rows] == ["a", "b", "crash", "d", "e", "f"]
    crashed = rows[2]
    assert crashed["status"] == "corrupt" and "crashed the reader" in crashed["reason"]
    assert crashed["sha256"] == rows[0]["sha256"] and crashed["bytes"] == (d / "crash.pdf").stat().st_size
    for r in rows[:2] + rows[3:]:
        assert r["status"] == "ok" and r["pages"] in (2, 3)
