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
