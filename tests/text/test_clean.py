"""`vlmocr clean`: the cleaned layer beside the raw one, on real page text from tests/data/gt."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

import pytest

from support.cli import cli_in_process as cli
from vlmocr.exceptions import UsageError
from vlmocr.profiles import load_profile
from vlmocr.runfolder.record import PageRecord, Row
from vlmocr.runfolder.store import RecordWriter
from vlmocr.text.clean import (
    CleanRules,
    DehyphenRules,
    clean_records,
    clean_text,
    collapse_repetition,
    default_rules_text,
    dehyphenate,
    find_running_lines,
    header_key,
    is_page_number,
    load_rules,
    parse_rules,
)
from vlmocr.text.postprocess import postprocess, strip_grounding
from vlmocr.text.textquality import lexicon


def lines_of(doc_id: str, texts: list[str], **extra) -> list[dict]:
    """Page records as a pages.jsonl holds them."""
    return [{"doc_id": doc_id, "page": i, "status": "ok", "text": t, "key": "k", **extra}
            for i, t in enumerate(texts, 1)]


def recs(doc_id: str, texts: list[str], **extra) -> list[Row]:
    """The same records as a run folder hands them back."""
    return [Row.of(d) for d in lines_of(doc_id, texts, **extra)]


def write_run(run: Path, records: list[dict]) -> Path:
    with RecordWriter(run / "pages.jsonl") as w:
        for r in records:
            w.append(PageRecord(source=f"{r['doc_id']}.pdf", engine="test", **r))
    return run


def gt_pages(gt: Path, set_name: str, n: int) -> list[str]:
    pages = [p.read_text(encoding="utf-8") for p in sorted((gt / set_name).glob("*.txt"))[:n]]
    assert len(pages) == n, f"tests/data/gt/{set_name} has {len(pages)} pages, the test needs {n}"
    return pages


# --- running headers, footers, page numbers on real pages -----------------------------------


def test_page_numbers_of_goethe_pages_removed(gt):
    pages = gt_pages(gt, "goethe", 5)  # each page starts with its printed page number: 7, 16, 25, …
    out = clean_records(recs("goethe", pages))
    for raw, cleaned in zip(pages, out):
        first, second = raw.split("\n")[:2]
        assert is_page_number(first)
        assert cleaned.extra("clean")["removed_lines"] == [first]
        assert cleaned.text.split("\n")[0].startswith(second.split()[0])  # the body starts where it did


def test_running_heads_of_zonaras_removed_apparatus_kept(gt):
    # Pages 0029…0059: "LIB. XI. CAP. VII. VIII. 23" / "30 LIB. XI. CAP. IX. X." alternate (0017, sorted
    # before them, is there for the orientation tests: six pages earlier in the book).
    pages = gt_pages(gt, "zonaras", 7)[1:]
    out = clean_records(recs("zonaras", pages))
    for raw, cleaned in zip(pages, out):
        head = raw.split("\n")[0]
        assert "LIB." in head and cleaned.extra("clean")["removed_lines"][0] == head
        assert "LIB. XI" not in cleaned.text.split("\n")[0]
        # the critical apparatus at the foot of the page is content, not a footer
        last = raw.rstrip("\n").split("\n")[-1]
        if not is_page_number(last):
            assert cleaned.text.rstrip().endswith(last.strip()[-10:])


def test_headers_footers_on_a_synthetic_multipage_doc(gt):
    bodies = [p.split("\n", 1)[1] for p in gt_pages(gt, "ehri_en", 4)]
    pages = [f"AMERICAN JOINT DISTRIBUTION COMMITTEE\nReport No. {i}\n{body}\n- {i} -" for i, body in enumerate(bodies, 1)]
    out = clean_records(recs("report", pages))
    for i, (body, cleaned) in enumerate(zip(bodies, out), 1):
        assert cleaned.extra("clean")["removed_lines"] == ["AMERICAN JOINT DISTRIBUTION COMMITTEE", f"Report No. {i}", f"- {i} -"]
        assert "COMMITTEE" not in cleaned.text and not cleaned.text.endswith(f"- {i} -")
        assert cleaned.text.split("\n")[0] == body.split("\n")[0]
    # one page alone has no neighbours: nothing is taken for a header
    alone = clean_records(recs("one", pages[:1]))[0]
    assert alone.extra("clean")["removed_lines"] == [] and alone.text.startswith("AMERICAN JOINT")
    # two pages: page numbers go (they need two), a header needs three
    two = clean_records(recs("two", pages[:2]))
    assert [r.extra("clean")["removed_lines"] for r in two] == [["- 1 -"], ["- 2 -"]]


def test_recurring_first_lines_of_letters_are_not_headers():
    # different pages that start differently keep their first lines
    pages = ["Dear Sir,\nthank you for the report.", "Minutes of the meeting\nPresent: all.", "To whom it may concern\nx"]
    assert find_running_lines(list(enumerate(pages, 1)), CleanRules().headers) == {}


def test_header_key_folds_numbers_and_roman_numerals():
    assert header_key("LIB. XI. CAP. I. 3") == "lib # cap #"
    assert header_key("18 LIB. XI. CAP. V. VI.") == "# lib # cap #"
    assert all(is_page_number(s) for s in ("12", "- 12 -", "xii", "Seite 12", "p. 4", "2*", "(17)"))
    assert not any(is_page_number(s) for s in ("12 men came", "Chapter", "1938."[:-1] + " was"))


# --- dehyphenation -------------------------------------------------------------------------


def test_dehyphenation_joins_words_keeps_compounds():
    en = lexicon("en")
    rules = DehyphenRules()
    text = ("We sent a re-\nport to the com-\nmittee on his self-\nesteem and the Schiller-\nStraße office;\n"
            "a blorf-\nzimp stays.")
    out, n = dehyphenate(text, en, rules)
    assert out == ("We sent a report\nto the committee\non his self-esteem\nand the Schiller-Straße\noffice;\n"
                   "a blorf-\nzimp stays.")
    assert n == 4
    assert dehyphenate(out, en, rules) == (out, 0)  # idempotent
    # a word alone on its line: the line disappears, no empty line is left behind
    assert dehyphenate("the commit-\ntee\nmet", en, rules)[0] == "the committee\nmet"
    # a soft hyphen always joins, even without a word list
    assert dehyphenate("Zusammen\u00ad\nhang", None, rules)[0] == "Zusammenhang"
    # without a word list an ordinary hyphen is left as it is (unless the rules say join)
    assert dehyphenate("re-\nport", None, rules)[0] == "re-\nport"
    assert dehyphenate("re-\nport", None, DehyphenRules(unknown="join"))[0] == "report"


def test_dehyphenation_of_real_german_pages(gt):
    page = gt_pages(gt, "goethe", 1)[0]
    assert "Gesell-\nschaft" in page and "freund-\nlich" in page
    cleaned = clean_records(recs("g", [page]))[0]
    assert cleaned.extra("clean")["language"] == "de" and cleaned.extra("clean")["dehyphenated"] >= 5
    assert "Gesellschaft" in cleaned.text and "freundlich" in cleaned.text
    assert "-\n" not in cleaned.text
    # no character is lost: only hyphens and line breaks change
    squeeze = lambda s: s.replace("-", "").replace("\n", "").replace(" ", "")  # noqa: E731
    assert squeeze(cleaned.text) == squeeze(page)


def test_record_language_wins_over_the_guess():
    text = "the com-\nmittee met"
    assert clean_records(recs("d", [text], fields={"language": "en"}))[0].text == "the committee\nmet"
    de = clean_records(recs("d", [text], fields={"language": "German"}))[0]
    assert de.extra("clean")["language"] == "de"


# --- page rules ----------------------------------------------------------------------------


def test_grounding_tags_fences_nfc_loops():
    raw = ("```markdown\n<|ref|>title<|/ref|><|det|>[[12, 30, 500, 60]]<|/det|>\n# Report\n\n"
           "<|det|>text [[1, 2, 3, 4]]<|/det|>Cafe\u0301 opened.<|grounding|>\n```")
    assert clean_text(raw) == "# Report\n\nCafé opened."
    assert strip_grounding("<|ref|>Hello there<|/ref|><|det|>[[1,2,3,4]]<|/det|>") == "Hello there"
    assert strip_grounding("<doctag><loc_12><loc_40>x") == "<doctag>x"
    looped = "Intro line.\n" + "| 1 | 2 | 3 |\n" * 60
    out, n = collapse_repetition(looped)
    assert n == 1 and out.count("| 1 | 2 | 3 |") == 1 and out.startswith("Intro line.")
    assert clean_text(looped) == out.strip()


def test_cleaning_strips_grounding_as_reading_the_answer_does(monkeypatch):
    monkeypatch.delenv("VLMOCR_PROFILE_PATH", raising=False)
    # One parser: a grounded answer left in a record cleans to the text post-processing gives.
    raw = ("Preamble\n<|ref|>title<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\n# Heading\n"
           "<|ref|>Signed<|/ref|><|det|>[[5, 6, 7, 8]]<|/det|>\n"
           "<|det|>text [[9, 10, 11, 12]]<|/det|>Body\n<|ref|>note<|/ref|> aside <|ref|>image<|/ref|>")
    read, _, _ = postprocess(load_profile("deepseek-ocr"), raw)
    assert read == "Preamble\n\n# Heading\n\nSigned\n\nBody\nnote aside"
    assert strip_grounding(raw) == read
    assert clean_text(raw) == read


def test_optional_quotes_dashes_paragraphs():
    text = "„Ja“ – sagte er — «oui».\nZweite Zeile\nder Absatz.\n\n# Titel\n- a\n- b"
    assert clean_text(text) == text  # off by default
    rules = CleanRules(normalize_quotes=True, normalize_dashes=True, join_paragraphs=True)
    assert clean_text(text, rules) == '"Ja" - sagte er - "oui". Zweite Zeile der Absatz.\n\n# Titel\n- a\n- b'


def test_page_rules_are_idempotent(gt):
    for set_name, n in (("goethe", 5), ("grenzboten", 5), ("ehri_en", 4), ("tapus", 5), ("zonaras", 6),
                        ("ehri_cs", 5)):
        once = clean_records(recs(set_name, gt_pages(gt, set_name, n)))
        twice = clean_records(once)
        assert [r.text for r in twice] == [r.text for r in once], set_name


# --- rules ---------------------------------------------------------------------------------


def test_default_rules_file_matches_the_model_and_hash_changes_with_rules(tmp_path):
    assert load_rules() == CleanRules()
    assert tomllib.loads(default_rules_text())["headers"]["min_pages"] == 3
    h = CleanRules().hash
    assert len(h) == 64 and h == load_rules().hash
    f = tmp_path / "r.toml"
    f.write_text("normalize_quotes = true\n[headers]\nmin_pages = 4\n", encoding="utf-8")
    custom = load_rules(f)
    assert custom.normalize_quotes and custom.headers.min_pages == 4 and custom.headers.top_lines == 2
    assert custom.hash != h
    with pytest.raises(UsageError, match="headers.min_pagez"):
        parse_rules("[headers]\nmin_pagez = 4\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        parse_rules("x = = 1")
    with pytest.raises(UsageError):
        load_rules(tmp_path / "absent.toml")


# --- the cleaned layer ---------------------------------------------------------------------


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_clean_run_writes_a_layer_and_never_touches_pages_jsonl(gt, tmp_path):
    pages = gt_pages(gt, "goethe", 4)
    records = lines_of("goethe", pages)
    records.insert(1, {**records[0], "text": "an earlier attempt", "attempt": 1})  # superseded below
    records[0]["attempt"] = 1
    records[2:2] = []
    run = write_run(tmp_path / "run", [records[1]] + records[0:1] + records[2:] + lines_of("other", ["Kurz."]))
    raw = run / "pages.jsonl"
    before, mtime = sha(raw), raw.stat().st_mtime_ns

    res = cli("clean", str(run))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Cleaned 5 pages in 2 docs (rules ")
    assert sha(raw) == before and raw.stat().st_mtime_ns == mtime
    layer = run / "clean"
    lines = [json.loads(x) for x in (layer / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["doc_id"], r["page"]) for r in lines] == [("goethe", 1), ("goethe", 2), ("goethe", 3), ("goethe", 4),
                                                         ("other", 1)]
    assert lines[0]["text"].startswith(pages[0].split("\n")[1].split()[0])  # page number gone, last record used
    info = json.loads((layer / "rules.json").read_text(encoding="utf-8"))
    assert info["rules_hash"] == CleanRules().hash == lines[0]["clean"]["rules"]
    assert info["raw"]["sha256"] == before and info["rules"]["headers"]["min_pages"] == 3
    md = (layer / "docs" / "goethe.md").read_text(encoding="utf-8")
    assert md.startswith("<!-- page 1 | ok | test -->") and "Gesellschaft" in md

    # idempotent: cleaning again gives the same bytes
    snapshot = {p.relative_to(layer): p.read_bytes() for p in layer.rglob("*") if p.is_file()}
    assert cli("clean", str(run)).returncode == 0
    assert {p.relative_to(layer): p.read_bytes() for p in layer.rglob("*") if p.is_file()} == snapshot
    assert sha(raw) == before

    # other rules: another hash, recorded
    rules = tmp_path / "r.toml"
    rules.write_text("[headers]\nenabled = false\n", encoding="utf-8")
    res = cli("clean", str(run), "--rules", str(rules), "--json")
    data = json.loads(res.stdout)
    assert data["rules_hash"] != CleanRules().hash and data["removed_lines"] == 0
    assert json.loads((layer / "rules.json").read_text())["rules_hash"] == data["rules_hash"]
    assert sha(raw) == before


def test_clean_cli_usage(tmp_path):
    res = cli("clean", "--show-rules")
    assert res.returncode == 0 and tomllib.loads(res.stdout)["dehyphenate"]["enabled"] is True
    assert cli("clean", str(tmp_path / "nope")).returncode == 3
    bad = tmp_path / "bad.toml"
    bad.write_text("unknown_rule = 1\n", encoding="utf-8")
    run = write_run(tmp_path / "run", lines_of("d", ["x"]))
    res = cli("clean", str(run), "--rules", str(bad))
    assert res.returncode == 3 and "unknown_rule" in res.stderr
