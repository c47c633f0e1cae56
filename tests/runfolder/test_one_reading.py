"""Issue 27, point 1: one folder, one truth. `run --out R` (auto), then `run --out R --engine
tesseract`, then the first command again printed `Nothing to do … ok=15` while docs/, evaluate,
report and export gave Tesseract's text: an A/B test would ship the wrong text. A run folder now
holds one reading: other settings are refused (exit 3) naming both readings and the two ways on, and
--reread makes the new one the folder's — every document rebuilt from it, also when its records
were already there — so what the folder shows is always the reading run.json names."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import run_cli
from support.documents import make_scan_pdf
from support.records import read_records
from vlmocr.exceptions import ExitCode

LINES = [["The meeting of the council was held on Monday morning", "and the members agreed on the budget"],
         ["The second page tells of the harvest and the market", "where the farmers sold their grain"]]


def shown(run: Path) -> tuple[str, str]:
    """(the engine docs/ shows, run.json's reading key)."""
    md = (run / "docs" / "scan.md").read_text(encoding="utf-8")
    engines = {line.rsplit("|", 1)[1].strip(" ->") for line in md.splitlines() if line.startswith("<!-- page")}
    assert len(engines) == 1, md
    return engines.pop(), json.loads((run / "run.json").read_text())["key"]


def cer_of(run: Path, truth: Path) -> float:
    res = run_cli("evaluate", str(run), "--truth", str(truth), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["corpus"]["cer"]


def test_a_second_engine_in_one_folder_never_shows_one_reading_under_anothers_name(tmp_path):
    from support.tessdata import need_tesseract

    need_tesseract("eng")
    (tmp_path / "in").mkdir()
    pdf = make_scan_pdf(tmp_path / "in" / "scan.pdf", LINES)
    (tmp_path / "in" / "scan.txt").write_text("\f".join("\n".join(p) for p in LINES), encoding="utf-8")
    run = tmp_path / "R"
    first = ("run", str(pdf), "--out", str(run), "--workers", "1", "--lang", "eng")

    assert run_cli(*first).returncode == 0
    auto_engine, auto_key = shown(run)
    auto_cer = cer_of(run, tmp_path / "in")
    assert auto_engine == "rapidocr"

    res = run_cli(*first, "--engine", "tesseract")
    assert res.returncode == ExitCode.usage and f"holds the reading {auto_key[:12]}" in res.stderr
    assert "--out" in res.stderr and "--reread" in res.stderr and "tesseract" in res.stderr
    assert len(read_records(run)) == 2 and shown(run) == (auto_engine, auto_key)  # nothing touched

    assert run_cli(*first, "--engine", "tesseract", "--reread").returncode == 0
    tess_engine, tess_key = shown(run)
    assert tess_engine == "tesseract" and tess_key != auto_key

    res = run_cli(*first)  # the first command again: not "Nothing to do" over Tesseract's text
    assert res.returncode == ExitCode.usage and f"holds the reading {tess_key[:12]}" in res.stderr
    res = run_cli(*first, "--reread")
    assert res.returncode == 0 and "Nothing to do" in res.stderr + res.stdout  # its records were there
    assert shown(run) == (auto_engine, auto_key)  # … and now docs/ and run.json are that reading's
    assert cer_of(run, tmp_path / "in") == auto_cer
    assert len(read_records(run)) == 4  # both readings kept in the raw layer
    # What evaluate, clean and grid read is the folder's reading, not the last record of any.
    from vlmocr.evaluation import run_records
    from vlmocr.runfolder.rundir import RunDir

    records, _ = run_records(run)
    assert {r.engine for r in records.values()} == {"rapidocr"} == {r.engine for r in RunDir(run).reading().values()}
    res = run_cli("clean", str(run))
    assert res.returncode == 0, res.stderr
    assert f"reading {auto_key[:12]} (engine auto, reader rapidocr" in res.stderr  # each says which it reads
    cleaned = [json.loads(x) for x in (run / "clean" / "pages.jsonl").read_text().splitlines()]
    assert {r["engine"] for r in cleaned} == {"rapidocr"}
    # … and so do report and export: Tesseract's records (the last written for each page) are
    # history, not shown under the folder's reading (the report had shown them).
    res = run_cli("report", str(run), "--out", str(tmp_path / "rep"))
    assert res.returncode == 0 and f"reading {auto_key[:12]}" in res.stderr, res.stderr
    chunk = (tmp_path / "rep" / "data" / "c" / "0.js").read_text(encoding="utf-8")
    pages = json.loads(chunk[chunk.index("{"):chunk.rindex("}") + 1])["pages"]
    assert {p["engine"] for p in pages} == {"rapidocr"} and len(pages) == 2
    assert {p["text"] for p in pages} == {r.text for r in records.values()}
    assert "2 records" not in chunk and all(p["tries"] == 1 for p in pages)
    res = run_cli("export", str(run), "--format", "jsonl", "--out", str(tmp_path / "e.jsonl"))
    assert res.returncode == 0 and f"reading {auto_key[:12]}" in res.stderr, res.stderr
    res = run_cli("evaluate", str(run), "--truth", str(tmp_path / "in"))
    assert res.returncode == 0 and f"reading {auto_key[:12]}" in res.stderr, res.stderr
    exported = [json.loads(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert {s["engine"] for doc in exported for s in doc["page_spans"]} == {"rapidocr"}, exported
