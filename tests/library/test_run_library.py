"""`vlmocr run --library LIB` reads only what the library does not already hold."""

from __future__ import annotations

from support.cli import run_cli
from support.documents import make_text_pdf
from support.records import read_records


def test_run_skips_documents_the_library_holds(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("a", "b"):
        make_text_pdf(corpus / f"{name}.pdf", [[f"Document {name}: a born-digital page long enough to count."]])
    lib = tmp_path / "lib"
    assert run_cli("run", str(corpus / "a.pdf"), "--out", str(tmp_path / "r1"), "--engine", "textlayer").returncode == 0
    pub = run_cli("publish", str(tmp_path / "r1"), "--library", str(lib))
    assert pub.returncode == 0, pub.stderr
    res = run_cli("run", str(corpus), "--out", str(tmp_path / "r2"), "--engine", "textlayer", "--library", str(lib))
    assert res.returncode == 0, res.stderr
    assert "1 document(s) already in library" in res.stderr
    assert {r["doc_id"] for r in read_records(tmp_path / "r2")} == {"b"}
    # A file replaced under the same name is read again.
    make_text_pdf(corpus / "a.pdf", [["Document a, second edition: different bytes, long enough."]])
    res = run_cli("run", str(corpus), "--out", str(tmp_path / "r2"), "--engine", "textlayer", "--library", str(lib))
    assert res.returncode == 0, res.stderr
    assert {r["doc_id"] for r in read_records(tmp_path / "r2")} == {"a", "b"}
