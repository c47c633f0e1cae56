"""`vlmocr search` (SQLite FTS5) and `vlmocr export` in every format, each read back by its own
library (pyarrow, datasets) with page counts and text equal to the records."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from support.cli import run_cli, textlayer_run
from support.components import need
from support.documents import body_lines, make_doc, make_text_pdf
from support.records import finals_by_doc
from vlmocr.library.catalog import Catalog
from vlmocr.library.export import export
from vlmocr.library.publish import publish
from vlmocr.library.runs import PAGE_SEPARATOR


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("lib")
    src = root / "src"
    make_text_pdf(src.mkdir() or src / "rivers.pdf", [
        ["The Danube flows through Vienna and Budapest", "doi:10.5555/danube"] + body_lines(1, 1),
        ["Flood defences of the Rhine delta were rebuilt"] + body_lines(1, 2),
        ["Ferries crossed the river at dawn"] + body_lines(1, 3),
    ])
    make_text_pdf(src / "café.pdf", [["Crème brûlée at the Café Müller in Wien"] + body_lines(2, 1),
                                     ["Printing presses and the Danube steamers"] + body_lines(2, 2)])
    make_doc(src, "ledger.pdf", 3, 2)
    run = root / "run"
    textlayer_run(run, src)
    lib = root / "library"
    result = publish([run], lib)
    assert result.counts()["published"] == 3
    return {"run": run, "lib": lib, "finals": finals_by_doc(run)}


def search(lib, query, limit=20):
    with Catalog(lib, readonly=True) as cat:
        return [h.as_dict() for h in cat.search(query, limit)]


def test_fts_queries(published):
    lib = published["lib"]
    proc = run_cli("search", str(lib), "Danube", "--json")
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    assert sorted((h["doc_id"], h["page"]) for h in hits) == [("café", 2), ("rivers", 1)]
    assert all("[Danube]" in h["snippet"] and h["status"] == "ok" for h in hits)
    assert [(h["doc_id"], h["page"]) for h in search(lib, '"Rhine delta"')] == [("rivers", 2)]
    assert [(h["doc_id"], h["page"]) for h in search(lib, "danube AND vienna")] == [("rivers", 1)]
    assert [(h["doc_id"], h["page"]) for h in search(lib, "danube NOT vienna")] == [("café", 2)]
    assert {(h["doc_id"], h["page"]) for h in search(lib, "ferr*")} == {("rivers", 3)}
    assert [(h["doc_id"], h["page"]) for h in search(lib, "creme brulee")] == [("café", 1)]  # diacritics folded
    assert [h["doc_id"] for h in search(lib, 'Müller "café')] == ["café"]  # not FTS5 syntax: searched as words
    assert search(lib, "zeppelin") == []
    assert len(search(lib, "line", limit=2)) == 2
    proc = run_cli("search", str(lib), "Rhine")
    assert proc.stdout.startswith("rivers\tp.2\t") and "[Rhine]" in proc.stdout


def _check_doc_text(text: str, spans: list[dict], recs: list[dict]) -> None:
    assert len(spans) == len(recs)
    for span, rec in zip(spans, recs):
        assert span["page"] == rec["page"] and text[span["start"]:span["end"]] == rec["text"]
    assert text.split(PAGE_SEPARATOR) == [r["text"] for r in recs]


@pytest.mark.parametrize("source", ["lib", "run"])
def test_export_md_txt_jsonl(published, tmp_path, source):
    finals = published["finals"]
    for fmt in ("md", "txt"):
        proc = run_cli("export", str(published[source]), "--format", fmt, "--out", str(tmp_path / fmt))
        assert proc.returncode == 0 and "Exported 3 documents, 7 pages" in proc.stdout, proc.stderr
    for doc_id, recs in finals.items():
        md = (tmp_path / "md" / f"{doc_id}.md").read_text(encoding="utf-8")
        assert [f"<!-- page {r['page']} | ok | textlayer -->" in md for r in recs] == [True] * len(recs)
        assert md.count("<!-- page ") == len(recs) and all(r["text"].strip() in md for r in recs)
        txt = (tmp_path / "txt" / f"{doc_id}.txt").read_text(encoding="utf-8")
        assert txt.split(PAGE_SEPARATOR) == [r["text"] for r in recs]
    out = tmp_path / "corpus.jsonl"
    assert run_cli("export", str(published[source]), "--format", "jsonl", "--out", str(out)).returncode == 0
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [d["doc_id"] for d in lines] == sorted(finals)
    for d in lines:
        assert d["pages"] == len(finals[d["doc_id"]])
        _check_doc_text(d["text"], d["page_spans"], finals[d["doc_id"]])
    rivers = next(d for d in lines if d["doc_id"] == "rivers")
    assert [(i["type"], i["value"]) for i in rivers["identifiers"]] == [("doi", "10.5555/danube")]
    assert rivers["engines"] == ["textlayer"] and rivers["settings_key"] == finals["rivers"][0]["key"]
    assert (rivers["lib_id"] is not None) == (source == "lib")


@pytest.mark.parametrize("source", ["lib", "run"])
def test_export_parquet_read_back_by_pyarrow(published, tmp_path, source):
    result = export(published[source], "parquet", tmp_path / "pq")
    assert (result.documents, result.pages) == (3, 7)
    finals = published["finals"]
    pages = pq.read_table(tmp_path / "pq" / "pages.parquet").to_pylist()
    docs = pq.read_table(tmp_path / "pq" / "documents.parquet").to_pylist()
    assert len(pages) == sum(len(r) for r in finals.values()) and len(docs) == len(finals)
    for row in pages:
        rec = finals[row["doc_id"]][row["page"] - 1]
        assert (row["text"], row["status"], row["engine"], row["key"]) == (rec["text"], "ok", "textlayer", rec["key"])
    for d in docs:
        assert d["pages"] == len(finals[d["doc_id"]])
        _check_doc_text(d["text"], d["page_spans"], finals[d["doc_id"]])
        mine = [p for p in pages if p["doc_id"] == d["doc_id"]]
        assert [d["text"][p["start"]:p["end"]] for p in mine] == [p["text"] for p in mine]


def test_export_hf_read_back_by_datasets(published, tmp_path, monkeypatch):
    out = tmp_path / "hf"
    proc = run_cli("export", str(published["lib"]), "--format", "hf", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        ".vlmocr-output", "README.md", "documents/train-00000-of-00001.parquet",
        "pages/train-00000-of-00001.parquet"]  # the marker: a later export may replace this folder
    finals = published["finals"]
    # Offline, and nothing written outside tmp_path (read when datasets is first imported).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    try:
        import datasets
    except ImportError:
        datasets = None
    need(datasets is not None, "the datasets library (the [test] extras: pip install -e '.[test]')")
    cache = str(tmp_path / "hf-cache")
    docs = datasets.load_dataset(str(out), cache_dir=cache)["train"]
    pages = datasets.load_dataset(str(out), "pages", cache_dir=cache)["train"]
    again = datasets.load_dataset("parquet", data_dir=str(out / "pages"), cache_dir=cache)["train"]
    assert docs.num_rows == 3 and pages.num_rows == again.num_rows == 7
    assert sorted(docs["doc_id"]) == sorted(finals)
    for d in docs:
        assert d["pages"] == len(finals[d["doc_id"]])
        _check_doc_text(d["text"], d["page_spans"], finals[d["doc_id"]])
    for row in pages:
        assert row["text"] == finals[row["doc_id"]][row["page"] - 1]["text"]


def test_export_layers(published, tmp_path):
    # A library published raw gives its cleaned layer on request (cleaned in memory)…
    clean = export(published["lib"], "jsonl", tmp_path / "c.jsonl", layer="clean")
    lines = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert clean.documents == 3 and {d["layer"] for d in lines} == {"clean"}
    # … and a run too; a library published clean has no raw layer to give.
    export(published["run"], "parquet", tmp_path / "pq", layer="clean")
    assert set(pq.read_table(tmp_path / "pq" / "pages.parquet").column("layer").to_pylist()) == {"clean"}
    lib2 = tmp_path / "lib2"
    publish([published["run"]], lib2, layer="clean")
    proc = run_cli("export", str(lib2), "--format", "txt", "--out", str(tmp_path / "t"), "--layer", "raw")
    assert proc.returncode == 3 and "no raw layer" in proc.stderr


def test_export_leaves_incomplete_documents_out_unless_asked(published, tmp_path):
    import shutil

    from support.runs import drop_records

    run = tmp_path / "run"
    shutil.copytree(published["run"], run)
    drop_records(run, "ledger", {2})
    proc = run_cli("export", str(run), "--format", "jsonl", "--out", str(tmp_path / "a.jsonl"))
    assert "Exported 2 documents" in proc.stdout and "1 incomplete document(s) left out" in proc.stderr
    result = export(run, "jsonl", tmp_path / "b.jsonl", include_incomplete=True)
    assert result.documents == 3 and result.pages == 6


def test_search_finds_words_broken_at_line_ends(tmp_path):
    """Issue 26: search reads line-end hyphens joined (`Haupts-` + `mann` → `Hauptsmann`), while the
    published text keeps what was printed; a compound the word list knows keeps both parts."""
    src = tmp_path / "src"
    src.mkdir()
    make_text_pdf(src / "akten.pdf", [["Der Haupts-", "mann befahl den Abmarsch der Kompanie", "am fruehen Morgen"]])
    make_text_pdf(src / "minutes.pdf", [["The com-", "mittee met on Tuesday and the well-", "known members spoke"]])
    run = tmp_path / "run"
    textlayer_run(run, src)
    lib = tmp_path / "lib"
    publish([run], lib)
    assert [h["doc_id"] for h in search(lib, "Hauptsmann")] == ["akten"]
    assert [h["doc_id"] for h in search(lib, "committee")] == ["minutes"]
    assert search(lib, "mittee") == []
    # "well-known": both halves are words and the joined one is not: the hyphen stays, each part found.
    assert [h["doc_id"] for h in search(lib, "well AND known")] == ["minutes"]
    assert "[Hauptsmann]" in search(lib, "Hauptsmann")[0]["snippet"]
    # The library's own text is as read: the break is still there.
    (doc,) = [d for d in (lib / "docs").iterdir() if "akten" in d.name]
    assert "Haupts-\nmann" in (doc / "document.txt").read_text()
