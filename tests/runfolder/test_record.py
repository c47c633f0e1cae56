"""The typed row read back from a run folder is the record written to it, its fields made from the
record's (scripts/make_row.py)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vlmocr.runfolder.record import Block, PageRecord, Row, Signal, Status

REPO = Path(__file__).resolve().parents[2]


def test_a_row_has_every_field_a_page_record_has_and_no_other():
    # A field PageRecord gains must be readable as a type, not only as `data[...]`: Row is made from
    # PageRecord's fields by scripts/make_row.py, and what it made is what record.py holds.
    row_fields = [f.name for f in dataclasses.fields(Row) if f.name != "data"]
    assert row_fields == list(PageRecord.model_fields)
    made = subprocess.run([sys.executable, str(REPO / "scripts" / "make_row.py"), "--check"], capture_output=True,
                          text=True)
    assert made.returncode == 0, made.stderr


def test_make_row_says_what_it_cannot_make_of_a_new_field_and_rewrites_only_its_part():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import make_row
    finally:
        sys.path.remove(str(REPO / "scripts"))
    text = (REPO / "src" / "vlmocr" / "runfolder" / "record.py").read_text(encoding="utf-8")
    block = make_row.render()
    assert make_row.rewrite(text, block) == text
    stale = make_row.rewrite(text, block.replace("    master: Mapping[str, Any] | None\n", ""))
    assert stale != text and make_row.rewrite(stale, block) == text
    assert "tuple[str, ...]" == make_row.BY_TYPE["list[str]"][0]  # a list field reads back immutable


def test_a_written_record_reads_back_as_the_same_values_typed():
    sig = Signal(score=0.42, confidence=0.61, known_words=0.3, implausible=0.0, garbage_lines=0.1, text_vs_ink=None,
                 language="de", script="Latn", words=40, threshold=0.5)
    rec = PageRecord(doc_id="d", source="d.pdf", page=3, doc_pages=9, key="k", status="suspect", text="Wort",
                     engine="tesseract", quality=sig.as_dict(), flags=["textlayer"], dpi=200.0, width=10, height=20,
                     blocks=[Block(type="figure", bbox=(100, 100, 500, 500))], fields={"language": "de"})
    line = rec.to_json_dict()
    row = Row.of(line)
    for name in PageRecord.model_fields:
        if name in ("quality", "flags", "blocks", "status", "positions"):
            continue
        assert getattr(row, name) == getattr(rec, name), name
    assert row.status is Status.suspect and row.flags == ("textlayer",) and row.page_id == ("d", 3)
    assert isinstance(row.quality, Signal) and row.quality.score == 0.42 and row.quality.below
    assert row.quality.as_dict() == line["quality"]  # the Signal is the stored dict, both ways
    assert row.blocks is not None and row.blocks[0].type == "figure"
    assert row.data is line


def test_amended_changes_fields_and_the_stored_line_alike():
    row = Row.of(PageRecord(doc_id="d", source="s.pdf", page=1, key="k", status="ok", text="a").to_json_dict())
    new = row.amended(text="b", clean={"rules": "r"})
    assert (new.text, new.data["text"], new.extra("clean")) == ("b", "b", {"rules": "r"})
    assert (row.text, row.extra("clean")) == ("a", None)  # the original is untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.text = "c"  # type: ignore[misc]


def test_an_unknown_status_is_refused_on_reading():
    line = PageRecord(doc_id="d", source="s.pdf", page=1, key="k", status="ok").to_json_dict()
    with pytest.raises(ValueError):
        Row.of({**line, "status": "fine"})


def test_positions_are_stored_compactly_and_parsed_only_when_asked_for():
    from vlmocr.runfolder.record import Line, Positions

    pos = Positions(width=1000, height=1400, source="tesseract",
                    lines=[Line(box=(10, 20, 300, 50), words=[(10, 20, 120, 50, 0.9, "Dear"), (130, 22, 300, 50, None, "Sir")])])
    line = PageRecord(doc_id="d", source="d.png", page=1, key="k", status="ok", text="Dear Sir", positions=pos).to_json_dict()
    assert line["positions"]["lines"][0]["words"][1] == [130, 22, 300, 50, None, "Sir"]  # a list a word
    row = Row.of(json.loads(json.dumps(line)))
    assert row.word_positions() == pos and [w[5] for w in pos.words()] == ["Dear", "Sir"]
    assert "positions" not in PageRecord(doc_id="d", source="d.png", page=1, key="k", status="ok").to_json_dict()
