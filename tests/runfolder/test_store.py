import json

import pytest

from vlmocr.exceptions import RunLocked
from vlmocr.files import RunLock
from vlmocr.runfolder.record import PageRecord, Status
from vlmocr.runfolder.store import RecordWriter, ResumeIndex, repair_torn_tail


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
    from vlmocr.runfolder.store import iter_records, resume_fields

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


def test_a_record_damaged_after_writing_is_read_again_not_counted_done(tmp_path, caplog):
    """Each line carries the CRC-32 of what precedes it. A line that fails its check is not
    trusted by any reader, whether it still parses (a flipped byte, a hand edit, a damaged
    check name) or not: it is skipped with a warning naming file:line, its page is owed again,
    and a record written later for the page is the one that counts. Lines from before the
    check, and a last line that lost only its newline, are still read. Readers never see the
    check."""
    from vlmocr.runfolder.store import CHECK_KEY, final_records, iter_records, resume_fields

    path = tmp_path / "pages.jsonl"
    with RecordWriter(path) as w:
        for page in (1, 2, 3, 4, 5):
            w.append(PageRecord(doc_id="d", source="d.pdf", page=page, doc_pages=6, key="k",
                                status=Status.ok, text=f"page {page} text"))
    lines = path.read_bytes().splitlines(keepends=True)
    assert all(line.endswith(b'"}\n') and b',"crc32":"' in line for line in lines)
    lines[1] = lines[1].replace(b'"page 2 text"', b'"page \\q2 text"')  # \q: no longer JSON
    lines[2] = lines[2].replace(b'"page 3 text"', b'"page 3 tdxt"')  # one flipped bit, still JSON
    lines[3] = lines[3].replace(b'"crc32"', b'"crc33"')  # the check's own name damaged
    legacy = {"schema": 1, "doc_id": "d", "source": "d.pdf", "page": 6, "doc_pages": 6, "key": "k",
              "status": "ok", "attempt": 1, "text": "page 6 from before the check", "engine": "x"}
    path.write_bytes(b"".join(lines) + json.dumps(legacy).encode() + b"\n")

    with caplog.at_level("WARNING", logger="vlmocr.runfolder.store"):
        assert [r["page"] for r in resume_fields(path)] == [1, 5, 6]
    assert [m for m in caplog.messages if "CRC-32" in m] == [
        f"{path}:3: skipping a line that does not match its CRC-32 (damaged or edited after it was written)",
        f"{path}:4: skipping a line that does not match its CRC-32 (damaged or edited after it was written)"]
    assert any(f"{path}:2: skipping a line that is not JSON" == m for m in caplog.messages)
    state = ResumeIndex.load(path, {"k"}).get("k", "d")
    assert [state.status(p) for p in range(1, 7)] == [Status.ok, None, None, None, Status.ok, Status.ok]
    full = list(iter_records(path))
    assert [r["text"] for r in full] == ["page 1 text", "page 5 text", "page 6 from before the check"]
    assert not any(CHECK_KEY in r for r in full)
    flipped = tmp_path / "flipped.jsonl"
    flipped.write_bytes(lines[0] + lines[2])
    with pytest.raises(ValueError, match=r"flipped.jsonl:2: the line does not match its CRC-32"):
        list(iter_records(flipped, strict=True))

    # The page read again: its new record counts, the damaged one never does.
    with RecordWriter(path) as w:
        w.append(PageRecord(doc_id="d", source="d.pdf", page=3, doc_pages=6, key="k", status=Status.ok,
                            attempt=2, text="page 3 text"))
    assert final_records(path)[("d", 3)].text == "page 3 text"
    assert ResumeIndex.load(path, {"k"}).get("k", "d").attempts_of(3) == 2
    # Written again (as publish or a merge may do), a record gets a fresh check, not two.
    with RecordWriter(path) as w:
        w.append(full[0])
    last = path.read_bytes().splitlines()[-1]
    assert last.count(b'"crc32"') == 1 and list(resume_fields(path))[-1]["page"] == 1
    # A whole last line that lost only its newline still matches its check.
    path.write_bytes(path.read_bytes()[:-1])
    assert [r["page"] for r in iter_records(path)][-1] == 1


def _run_pngs(tmp_path, out, *pngs):
    from support.cli import run_cli

    res = run_cli("run", *map(str, pngs), "--out", str(out), "--engine", "rapidocr", "--workers", "1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return res


def _export_txt(tmp_path, run_dir, name):
    from support.cli import run_cli

    out = tmp_path / name
    res = run_cli("export", str(run_dir), "--format", "txt", "--out", str(out))
    assert res.returncode == 0, res.stderr
    return res, {p.stem: p.read_text(encoding="utf-8") for p in sorted(out.glob("*.txt"))}


def test_a_flipped_byte_in_a_real_runs_text_is_read_again_and_never_exported(tmp_path):
    """A real run (RapidOCR on two generated PNGs); one byte inside the text of one record is
    flipped on disk, leaving valid JSON. Export leaves the damaged text out, and resume reads
    that page again; the export after it holds the text as read, not the damaged one."""
    from support.documents import text_image
    from support.records import read_records

    pngs = []
    for name, lines in (("a", ["Hello world", "second line"]), ("b", ["Other page", "more text"])):
        text_image(lines, (600, 300)).save(tmp_path / f"{name}.png")
        pngs.append(tmp_path / f"{name}.png")
    run_dir = tmp_path / "run"
    _run_pngs(tmp_path, run_dir, *pngs)
    good = {r["doc_id"]: r["text"] for r in read_records(run_dir)}
    assert "Hello" in good["a"] and "Other" in good["b"]

    pages = run_dir / "pages.jsonl"
    raw = pages.read_bytes()
    first_end = raw.index(b"\n") + 1
    line = raw[:first_end]
    assert b'"doc_id":"a"' in line
    at = line.index(b'"text":"') + len(b'"text":"')
    line = line[:at] + bytes([line[at] ^ 0x20]) + line[at + 1:]  # H -> h: one byte, still JSON
    damaged = json.loads(line)["text"]
    assert damaged != good["a"] and damaged.lower() == good["a"].lower()
    pages.write_bytes(line + raw[first_end:])

    res, exported = _export_txt(tmp_path, run_dir, "before")
    assert f"{pages}:1: skipping a line that does not match its CRC-32" in res.stderr
    assert damaged not in "".join(exported.values())

    res = _run_pngs(tmp_path, run_dir, *pngs)
    assert "records=2 ok=2" in res.stdout.splitlines()[-1]
    records = read_records(run_dir)
    assert len(records) == 3 and records[-1]["doc_id"] == "a" and records[-1]["text"] == good["a"]

    _, exported = _export_txt(tmp_path, run_dir, "after")
    assert exported["a"].strip() == good["a"] and exported["b"].strip() == good["b"]
    assert damaged not in "".join(exported.values())


# ------------------------------------------------------------------------------ replace_dir


def test_replace_dir_replaces_only_a_new_empty_or_own_folder(tmp_path):
    from vlmocr.exceptions import UsageError
    from vlmocr.files import OUTPUT_MARKER, replace_dir

    def built(text: str):
        tmp = tmp_path / f".out.{text}.tmp"
        tmp.mkdir()
        (tmp / "file.txt").write_text(text)
        return tmp

    out = tmp_path / "out"
    out.mkdir()  # empty: fine
    replace_dir(built("one"), out, "export")
    assert (out / "file.txt").read_text() == "one" and (out / OUTPUT_MARKER).read_text() == "export\n"
    replace_dir(built("two"), out, "export")  # its own: replaced whole, nothing left beside it
    assert (out / "file.txt").read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(UsageError, match="made by vlmocr export"):
        replace_dir(built("three"), out, "merge")  # another command's folder
    assert (out / "file.txt").read_text() == "two"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="new or empty folder"):
        replace_dir(built("four"), theirs, "export")
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    with pytest.raises(UsageError, match="not a folder"):
        replace_dir(built("five"), a_file, "export")
    link = tmp_path / "link"
    link.symlink_to(out)
    with pytest.raises(UsageError, match="symbolic link"):
        replace_dir(built("six"), link, "export")
    assert (theirs / "notes.txt").read_text() == "mine" and a_file.read_text() == "mine"
    assert (out / "file.txt").read_text() == "two"


def test_a_final_record_of_an_unknown_status_is_skipped_and_said(tmp_path, caplog):
    """A line written by hand or by another tool (no CRC) whose status this vlmocr does not know
    is no page's final record: the page's earlier record stands, a warning names the file, and
    no reader of the run stops on it with a traceback."""
    from vlmocr.runfolder.store import final_index, final_records

    path = tmp_path / "pages.jsonl"
    first = PageRecord(doc_id="d", source="d.pdf", page=1, key="k", status="suspect", text="first").to_json_dict()
    odd = {**PageRecord(doc_id="d", source="d.pdf", page=1, key="k", status="ok", text="later").to_json_dict(),
           "status": "fine"}
    only = {**PageRecord(doc_id="d", source="d.pdf", page=2, key="k", status="ok").to_json_dict(), "status": "fine"}
    path.write_text("".join(json.dumps(r) + "\n" for r in (first, odd, only)))
    with caplog.at_level("WARNING"):
        eager, lazy = final_records(path), final_index(path)
    assert set(eager) == set(lazy) == {("d", 1)}
    assert eager[("d", 1)].text == lazy[("d", 1)].text == "first" and eager[("d", 1)].status is Status.suspect
    assert "status 'fine'" in caplog.text and str(path) in caplog.text
