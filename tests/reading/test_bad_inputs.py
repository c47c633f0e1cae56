"""Unreadable inputs are an outcome of their own (exit 9, RUN/bad_inputs.csv), and a run that owes
nothing decides so before it asks the endpoint (reading/bad_inputs.py, reading/settled.py)."""

from __future__ import annotations

import csv
import json
import shutil

from support.cli import run_cli
from support.records import finals, read_records
from vlmocr.exceptions import ExitCode
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf

DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, any request fails (exit 5)


def vlm(corpus, run, url, *extra):
    return run_cli("run", str(corpus), "--out", str(run), "--engine", "openai", "--endpoint", url,
                   "--model", "test-model", "--profile", "generic", "--request-timeout", "3", "--max-retries", "1",
                   "--workers", "1", *extra, env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})


def test_a_corrupt_file_among_good_ones_finishes_with_its_own_outcome_and_a_list(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    make_coded_pdf(corpus / "good.pdf", [1, 2])
    make_coded_pdf(corpus / "other.pdf", [3])
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4 not really a PDF")
    run = tmp_path / "run"
    with serve_in_process(ServerConfig()) as srv:
        res = vlm(corpus, run, srv.url)
        assert res.returncode == ExitCode.bad_inputs == 9, res.stderr
        asked = len(srv.requests())
    assert asked == 3  # the good pages; the broken file is never sent
    assert "failed=1 bad_input=1 (listed in bad_inputs.csv) missing=0" in res.stdout
    rows = list(csv.DictReader((run / "bad_inputs.csv").open(encoding="utf-8")))
    assert [(r["doc_id"], r["page"], r["path"]) for r in rows] == [("broken", "0", str(corpus / "broken.pdf"))]
    assert rows[0]["reason"] and rows[0]["reason"] == finals(run)[("broken", 0)]["error"]
    assert json.loads((run / "run.json").read_text())["summary"]["exit_code"] == 9

    # Resumed with the endpoint down: nothing is owed, so nothing is asked and the outcome stays 9
    # (before: the preflight of /v1/models failed first, exit 5).
    n = len(read_records(run))
    again = vlm(corpus, run, DEAD)
    assert again.returncode == 9, again.stderr
    assert "nothing owed" in again.stderr and "failed=1 bad_input=1" in again.stdout
    assert len(read_records(run)) == n
    assert (run / "bad_inputs.csv").is_file()

    # A person fixes the file. Without --force-bad the record stays final (still 9, nothing
    # asked); --force-bad reads it, and the list goes.
    shutil.copy(corpus / "other.pdf", corpus / "broken.pdf")
    assert vlm(corpus, run, DEAD).returncode == 9
    assert vlm(corpus, run, DEAD, "--force-bad").returncode == ExitCode.unavailable  # now owed: asks, finds none
    with serve_in_process(ServerConfig()) as srv:
        fixed = vlm(corpus, run, srv.url, "--force-bad")
        assert fixed.returncode == 0, fixed.stderr
        assert [r["page"] for r in srv.requests()] == [3]  # only the fixed document's page
    assert finals(run)[("broken", 1)]["text"] == expected_text(3)
    assert not (run / "bad_inputs.csv").exists()


def test_other_settings_or_pages_left_still_ask_the_endpoint(tmp_path):
    """Only a run that owes nothing skips the preflight: a missing page or another model does not."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    make_coded_pdf(corpus / "good.pdf", [1])
    run = tmp_path / "run"
    with serve_in_process(ServerConfig()) as srv:
        assert vlm(corpus, run, srv.url).returncode == 0
    assert vlm(corpus, run, DEAD).returncode == 0  # settled: the endpoint is not asked
    other = run_cli("run", str(corpus), "--out", str(run), "--engine", "openai", "--endpoint", DEAD,
                    "--model", "another-model", "--profile", "generic", "--max-retries", "1", "--workers", "1")
    assert other.returncode == 5, other.stderr  # other settings: pages owed, the endpoint must answer
    make_coded_pdf(corpus / "new.pdf", [2])
    assert vlm(corpus, run, DEAD).returncode == 5  # a new document is owed
