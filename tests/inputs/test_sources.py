import json
import os
from pathlib import Path

import pytest

from support.documents import make_text_pdf
from vlmocr.exceptions import UsageError
from vlmocr.inputs.sources import check_doc_id, derive_doc_id, discover, parse_pages, parse_shard, shard_of


def touch_pdf(p: Path) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    return make_text_pdf(p, [["x" * 50]])


def test_folder_is_recursive_and_sorted(tmp_path):
    for rel in ["b/2.pdf", "a/1.pdf", "a/z/3.png", "c.tif", "notes.txt", ".hidden.pdf"]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    docs = discover([tmp_path])
    assert [d.doc_id for d in docs] == ["a__1", "a__z__3", "b__2", "c"]


def test_symlink_loop_is_walked_once(tmp_path):
    touch_pdf(tmp_path / "root" / "sub" / "doc.pdf")
    os.symlink(tmp_path / "root", tmp_path / "root" / "sub" / "loop")
    docs = discover([tmp_path / "root"])
    assert [d.doc_id for d in docs] == ["sub__doc"]


def test_manifest_csv_with_pages_and_dpi(tmp_path):
    touch_pdf(tmp_path / "f" / "a.pdf")
    m = tmp_path / "m.csv"
    m.write_text('doc_id,path,pages,dpi\nalpha,f/a.pdf,"1-3,7",150\nbeta,f/a.pdf,,\n', encoding="utf-8")
    docs = discover(manifest=m)
    assert docs[0].doc_id == "alpha" and docs[0].pages == (1, 2, 3, 7) and docs[0].dpi == 150
    assert docs[0].path == tmp_path / "f" / "a.pdf"
    assert docs[1].pages is None and docs[1].dpi is None


def test_manifest_jsonl(tmp_path):
    m = tmp_path / "m.jsonl"
    m.write_text(json.dumps({"doc_id": "x", "path": "a.pdf", "pages": "2"}) + "\n\n", encoding="utf-8")
    (d,) = discover(manifest=m)
    assert d.doc_id == "x" and d.pages == (2,)


@pytest.mark.parametrize("bad", ["../etc", "a/b", "line\nbreak", ".", ""])
def test_unsafe_manifest_ids_are_rejected_with_the_line(tmp_path, bad):
    m = tmp_path / "m.jsonl"
    m.write_text(json.dumps({"doc_id": bad or " ", "path": "a.pdf"}) + "\n", encoding="utf-8")
    if bad == "":
        # an empty id falls back to the derived one
        assert discover(manifest=m)[0].doc_id == "a"
        return
    with pytest.raises(UsageError, match="m.jsonl:1"):
        discover(manifest=m)


def test_duplicate_ids_fail_before_any_work(tmp_path):
    touch_pdf(tmp_path / "a.pdf")
    (tmp_path / "a.png").write_bytes(b"x")
    with pytest.raises(UsageError, match="duplicate doc_id 'a'"):
        discover([tmp_path])


def test_bad_manifest_rows(tmp_path):
    m = tmp_path / "m.csv"
    m.write_text("doc_id,path,pages\nx,a.pdf,3-1\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"m.csv:2: bad page range"):
        discover(manifest=m)
    m.write_text("doc_id,file\nx,a.pdf\n", encoding="utf-8")
    with pytest.raises(UsageError, match="'path' column"):
        discover(manifest=m)


def test_hostile_names_get_safe_ids():
    assert derive_doc_id('dir/a b, "c" ü\nz.pdf') == 'dir__a b, "c" ü_z'
    assert check_doc_id(derive_doc_id("../../x.pdf")) is None
    long = derive_doc_id("x" * 400 + ".pdf")
    assert check_doc_id(long) is None and len(long.encode()) <= 180


def test_parse_pages():
    assert parse_pages("1-3,7") == (1, 2, 3, 7)
    assert parse_pages("5, 2") == (2, 5)
    for bad in ["0", "a", "3-1", ""]:
        with pytest.raises(ValueError):
            parse_pages(bad)


def test_shards_partition_the_documents():
    ids = [f"doc-{i}" for i in range(500)]
    n = 4
    shards = [{i for i in ids if shard_of(i, n) == k} for k in range(1, n + 1)]
    assert set().union(*shards) == set(ids)
    assert sum(len(s) for s in shards) == len(ids)
    assert all(len(s) > 60 for s in shards)  # roughly even
    assert parse_shard("2/4") == (2, 4)
    with pytest.raises(UsageError):
        parse_shard("5/4")


def test_manifest_original_path_becomes_the_source(tmp_path):
    m = tmp_path / "m.csv"
    m.write_text("doc_id,path,original_path\nx,staged/0001.pdf,/archive/Müller brief.pdf\n", encoding="utf-8")
    (d,) = discover(manifest=m)
    assert d.source == "/archive/Müller brief.pdf" and d.path == tmp_path / "staged" / "0001.pdf"


def test_a_symlink_to_itself_is_listed_not_dropped(tmp_path):
    os.symlink(tmp_path / "self.pdf", tmp_path / "self.pdf")
    (d,) = discover([tmp_path])
    assert d.doc_id == "self"
