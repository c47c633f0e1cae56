"""Issue 46, points 1, 2 and 6: text no XML may carry and a terminal must not obey. A PDF whose text
layer holds C0 controls, a form feed and a bidi override (its font's ToUnicode map says so, as in
broken PDFs), and a VLM answer holding U+FFFE, U+FFFF, a lone surrogate and a bell: the records
hold them made safe (runfolder/safe.py), ALTO, hOCR and PAGE-XML of both runs are written and validate
against the official schemas, `export --format txt` gives `evaluate --truth` back as many pages as
the document has, and `search` shows what it prints from the text escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import etree

from support.cli import run_cli, textlayer_run
from support.documents import make_hostile_text_pdf
from support.records import finals, read_records
from vlmocr.library.export import ExportDoc, _made_safe
from vlmocr.runfolder.record import Row
from vlmocr.runfolder.safe import json_shown, shown, xml_safe
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf

XSD = Path(__file__).resolve().parent.parent / "data" / "xsd"
# The glyphs of these letters say they are: SOH, ESC, BS, a form feed, a vertical tab, RLO.
HOSTILE = {"Q": "\x01", "X": "\x1b", "Z": "\x08", "J": "\x0c", "K": "\x0b", "W": "\u202e"}
C0 = [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]  # every one XML 1.0 refuses
# And the glyphs of a line of digits and signs: every other C0 control, one each.
SIGNS = "0123456789!#$%&*+,-/:;<=>?@"
HOSTILE.update({sign: c for sign, c in zip(SIGNS, (c for c in C0 if c not in HOSTILE.values()))})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("unsafe")
    src = root / "src"
    src.mkdir()
    make_hostile_text_pdf(src / "hostile.pdf", [
        ["The harbour ledger Q of the river council", "Rivers X and bridges Z of the valley"],
        ["Second page: the J mill and the K chapel", "W the orchard market", f"signs {SIGNS} end"],
    ], HOSTILE)
    textlayer = root / "textlayer"
    textlayer_run(textlayer, src)
    scan = make_coded_pdf(root / "scan.pdf", [1])
    # Every character XML 1.0 refuses — the C0 controls but tab, LF and CR, one after each of the
    # page's words; U+FFFE, U+FFFF and a lone surrogate at its end — in an answer that reads the page.
    words = expected_text(1).split(" ")
    answer = " ".join(w + (C0[i] if i < len(C0) else "") for i, w in enumerate(words)) + " \ufffe \uffff \ud800 end"
    assert len(words) >= len(C0)
    vlm = root / "vlm"
    with serve_in_process(ServerConfig(answer="script", script={1: answer})) as srv:
        res = run_cli("run", str(scan), "--out", str(vlm), "--endpoint", srv.url, "--model", "test-model",
                      "--profile", "generic", "--workers", "1", env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode in (0, 2), res.stderr
    return root, textlayer, vlm


def test_the_records_hold_the_text_made_safe(runs):
    _, textlayer, vlm = runs
    pages = finals(textlayer)
    one, two = pages[("hostile", 1)], pages[("hostile", 2)]
    assert "\x1b" not in one["text"] and "\x01" not in one["text"] and "\x08" not in one["text"]
    assert "ledger  of" in one["text"] and "Rivers  and" in one["text"]  # the controls left out
    # A page's own form feed and vertical tab are line breaks: never the page separator of a txt file.
    assert "\x0c" not in two["text"] and "\x0b" not in two["text"] and "the \n mill" in two["text"]
    assert "\u202e" in two["text"]  # a bidi override is text XML takes: kept, shown escaped on a terminal
    assert not set(C0) & set(one["text"] + two["text"]) and f"signs {SIGNS} end" not in two["text"]
    made = [int(f.split(":")[1]) for f in one["flags"] + two["flags"] if f.startswith("chars_made_safe:")]
    # (PDFium itself turns 0x02 into the hyphen that ends a line: the reader writes that back.)
    assert sum(made) == 3 + 2 + 24 - 1, made
    words = [w[5] for line in one["positions"]["lines"] for w in line["words"]]
    assert not any(xml_safe(w)[1] for w in words)
    (answer,) = finals(vlm).values()
    assert xml_safe(answer["text"])[1] == 0
    # The VLM's own answer, its first attempt (one full of controls is judged as it came, and went on
    # to the ladder and the fallback): U+FFFE and U+FFFF replaced here, the lone surrogate by the
    # client (lone_surrogates_replaced); 29 controls, 27 left out, FF and VT made line breaks.
    first = next(r for r in read_records(vlm) if r["engine"] == "openai")
    assert xml_safe(first["text"])[1] == 0 and not set(C0) & set(first["text"])
    assert first["text"].count("\ufffd") == 3 and "chars_made_safe:31" in first["flags"], first["flags"]


@pytest.mark.parametrize("fmt", ["alto", "hocr", "pagexml"])
def test_alto_hocr_and_pagexml_of_both_runs_are_written_and_validate(runs, tmp_path, fmt):
    _, textlayer, vlm = runs
    out = tmp_path / fmt
    res = run_cli("export", str(textlayer), str(vlm), "--format", fmt, "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    schema = {"alto": "alto-4-2.xsd", "pagexml": "pagecontent-2019-07-15.xsd"}.get(fmt)
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.suffix in (".xml", ".hocr"))
    assert len(files) == {"alto": 2, "hocr": 2, "pagexml": 3}[fmt], files
    for f in files:
        tree = etree.parse(str(f))  # well-formed XML, whatever the page held
        if schema:
            xsd = etree.XMLSchema(etree.parse(str(XSD / schema)))
            assert xsd.validate(tree), (f, xsd.error_log)
    text = " ".join(" ".join(etree.parse(str(f)).getroot().itertext()) for f in files)
    assert "ledger" in text or fmt == "alto"  # ALTO keeps its words in CONTENT attributes


def test_one_unsafe_character_in_an_old_record_cannot_stop_an_export():
    # A record written before the rule: made safe on the way out, and counted in the export's note.
    notes: list[str] = []
    old = Row.of({"doc_id": "d", "page": 1, "key": "k", "status": "ok", "text": "a\x1bb\x0cc\ud800",
                  "positions": {"width": 10, "height": 10, "source": "tesseract",
                                "lines": [{"box": [0, 0, 9, 9], "words": [[0, 0, 9, 9, 0.9, "a\x1bb"]], "block": 0}]}})
    (doc,) = list(_made_safe(iter([ExportDoc("d", [old], "raw")]), notes))
    (row,) = doc.records
    assert row.text == "ab\nc\ufffd" and row.word_positions().words()[0][5] == "ab"
    assert "chars_made_safe:3" in row.flags and notes and notes[0].startswith("1 page(s) held characters")


def test_a_page_form_feed_does_not_split_the_txt_export_for_evaluate(runs, tmp_path):
    root, textlayer, _ = runs
    out = tmp_path / "txt"
    assert run_cli("export", str(textlayer), "--format", "txt", "--out", str(out)).returncode == 0
    text = (out / "hostile.txt").read_text(encoding="utf-8")
    assert text.count("\f") == 1  # the page break, the page's own form feed a line break
    res = run_cli("evaluate", str(textlayer), "--truth", str(out), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["corpus"]["pages"] == 2 and data["corpus"]["cer"] == 0.0, data["corpus"]


def test_search_shows_a_documents_controls_escaped_never_obeyed(runs, tmp_path):
    _, textlayer, _ = runs
    lib = tmp_path / "lib"
    assert run_cli("publish", str(textlayer), "--library", str(lib)).returncode == 0
    res = run_cli("search", str(lib), "orchard")
    assert res.returncode == 0, res.stderr
    assert "\u202e" not in res.stdout and "\\u202e" in res.stdout  # RLO written out, not reordering the line
    res = run_cli("search", str(lib), "orchard", "--json")
    assert "\u202e" not in res.stdout and json.loads(res.stdout)[0]["snippet"].count("\u202e") == 1


def test_what_a_terminal_is_shown():
    assert shown("a\x1b[2Jb\x07\x85\u202e\tz") == "a\\x1b[2Jb\\x07\\x85\\u202e\tz"
    assert shown("plain Ελληνικά text") == "plain Ελληνικά text"
    doc = json.dumps({"t": "a\x85\u2066b\ud800"}, ensure_ascii=False)
    assert json.loads(json_shown(doc)) == {"t": "a\x85\u2066b\ud800"} and "\u2066" not in json_shown(doc)
