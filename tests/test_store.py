import json

from vlmocr.record import PageRecord, Status
from vlmocr.store import RecordWriter, ResumeIndex, RunLock, repair_torn_tail

import pytest

from vlmocr.exceptions import RunLocked


def rec(page, status="ok", key="k", doc="d", attempt=1):
    return PageRecord(doc_id=doc, source="s", page=page, doc_pages=3, key=key, status=Status(status), attempt=attempt)


def test_writer_appends_one_line_per_record_and_index_reads_back(tmp_path):
    p = tmp_path / "pages.jsonl"
    with RecordWriter(p) as w:
        w.append(rec(1))
        w.append(rec(2, "error"))
        w.append(rec(2, "ok", attempt=2))
        w.append(rec(1, "ok", key="other"))
    lines = p.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["schema"] == 1 for line in lines)
    idx = ResumeIndex.load(p, {"k"})
    st = idx.get("k", "d")
    assert st.doc_pages == 3
    assert st.status(1) is Status.ok and st.status(2) is Status.ok and st.status(3) is None
    assert st.attempts_of(2) == 2
    assert idx.other_keys == 1


def test_torn_last_line_is_repaired(tmp_path):
    p = tmp_path / "pages.jsonl"
    with RecordWriter(p) as w:
        w.append(rec(1))
        w.append(rec(2))
    whole = p.read_bytes()
    p.write_bytes(whole + b'{"schema":1,"doc_id":"d","pa')
    assert repair_torn_tail(p) > 0
    assert p.read_bytes() == whole
    # A writer opened on a torn file repairs before appending.
    p.write_bytes(whole + b'{"torn')
    with RecordWriter(p) as w:
        assert w.repaired == len(b'{"torn')
        w.append(rec(3))
    assert [json.loads(line)["page"] for line in p.read_text().splitlines()] == [1, 2, 3]


def test_torn_file_without_any_newline(tmp_path):
    p = tmp_path / "pages.jsonl"
    p.write_bytes(b'{"half')
    repair_torn_tail(p)
    assert p.read_bytes() == b""


def test_second_writer_is_refused(tmp_path):
    a = RunLock(tmp_path)
    a.acquire()
    with pytest.raises(RunLocked, match="in use by pid"):
        RunLock(tmp_path).acquire()
    a.release()
    RunLock(tmp_path).acquire()


def test_resume_reads_heads_and_agrees_with_a_full_parse(tmp_path):
    """resume_fields parses each record only up to its text, yet yields what a full parse
    yields for resume: texts holding quotes and `,"text":`, an older field order (attempt after
    the text), a record in another order and a torn last line."""
    from vlmocr.store import iter_records, resume_fields

    path = tmp_path / "pages.jsonl"
    w = RecordWriter(path)
    tricky = 'He said ,"text": "no", \\ and }\n{"key":"x"}'
    for page, (status, attempt, text) in enumerate(
            [(Status.ok, 1, tricky), (Status.loop, 1, "a" * 5000), (Status.ok, 2, "ü" * 300)], 1):
        w.append(PageRecord(doc_id="d", source="d.pdf", page=page, key="k", status=status,
                            attempt=attempt, text=text))
    w.close()
    old = {"schema": 1, "doc_id": "old", "source": "o.pdf", "page": 1, "doc_pages": 1, "key": "k",
           "status": "ok", "text": "written before attempt moved", "engine": "x", "attempt": 3}
    other = {"fields": {"text": "nested", "attempt": 9}, "doc_id": "other", "page": 2, "key": "k",
             "status": "review", "attempt": 4, "text": "t"}
    with path.open("ab") as fh:
        fh.write(json.dumps(old).encode() + b"\n" + json.dumps(other).encode() + b"\n")
        fh.write(b'{"schema":1,"doc_id":"torn","source":"t","page":1,"doc_pages":1,"key":"k","status":"ok","attempt":1,"text":"cut')
    first_line = path.read_bytes().split(b"\n", 1)[0]
    assert first_line.index(b'"attempt"') < first_line.index(b'"text"')  # the order resume relies on

    def view(recs):
        return [(r["doc_id"], r["page"], r["key"], r["status"], r.get("attempt", 1)) for r in recs]

    heads = list(resume_fields(path))
    assert view(heads) == view(iter_records(path)) == [
        ("d", 1, "k", "ok", 1), ("d", 2, "k", "loop", 1), ("d", 3, "k", "ok", 2),
        ("old", 1, "k", "ok", 3), ("other", 2, "k", "review", 4)]
    assert "text" not in heads[0] and heads[3]["text"]  # a head, then an old record parsed whole
    idx = ResumeIndex.load(path, {"k"})
    assert idx.get("k", "d").attempts_of(3) == 2 and idx.get("k", "old").attempts_of(1) == 3
    assert idx.get("k", "torn") is None


def test_a_record_damaged_after_writing_is_read_again_not_counted_done(tmp_path):
    """Each line carries the CRC-32 of what precedes it. A line whose head still parses but
    whose text was damaged (a stray byte, a bad hand edit) fails its check, is parsed whole,
    is skipped as not JSON, and its page is owed again; a hand edit that leaves valid JSON is
    kept (its stale check only costs the fast path). Readers never see the check."""
    from vlmocr.store import CHECK_KEY, iter_records, resume_fields

    path = tmp_path / "pages.jsonl"
    with RecordWriter(path) as w:
        for page in (1, 2, 3):
            w.append(PageRecord(doc_id="d", source="d.pdf", page=page, doc_pages=3, key="k",
                                status=Status.ok, text=f"page {page} text"))
    lines = path.read_bytes().splitlines(keepends=True)
    assert all(line.endswith(b'"}\n') and b',"crc32":"' in line for line in lines)
    lines[1] = lines[1].replace(b'"page 2 text"', b'"page \\q2 text"')  # \q: no longer JSON
    lines[2] = lines[2].replace(b'"page 3 text"', b'"page 3 edited"')  # still JSON
    path.write_bytes(b"".join(lines))

    assert [r["page"] for r in resume_fields(path)] == [1, 3]
    idx = ResumeIndex.load(path, {"k"})
    state = idx.get("k", "d")
    assert [state.status(p) for p in (1, 2, 3)] == [Status.ok, None, Status.ok]
    full = list(iter_records(path))
    assert [r["text"] for r in full] == ["page 1 text", "page 3 edited"]
    assert not any(CHECK_KEY in r for r in full)
    # Written again (as publish or a merge may do), a record gets a fresh check, not two.
    with RecordWriter(path) as w:
        w.append(full[0])
    last = path.read_bytes().splitlines()[-1]
    assert last.count(b'"crc32"') == 1 and list(resume_fields(path))[-1]["page"] == 1
