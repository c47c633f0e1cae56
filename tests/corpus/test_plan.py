"""`vlmocr plan`: the numbers from a triage CSV, the recommendation, and a rate measured against
the test OpenAI server through `vlmocr.reading.scheduler`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from support.cli import run_cli
from support.corpora import build_corpus
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

OCR_DOCS = {"scan", "mixed", "book", "symbols", "photo", "multi"}  # readable, unique, pages without text


@pytest.fixture(scope="module")
def triaged(tmp_path_factory) -> Path:
    from vlmocr.corpus.triage import triage

    base = tmp_path_factory.mktemp("plan")
    out = base / "triage.csv"
    triage([str(build_corpus(base / "corpus"))], out, workers=1)
    return out


def test_corpus_totals(triaged):
    from vlmocr.corpus.plan import load_corpus

    c = load_corpus(triaged)
    assert (c.docs, c.planned_docs, c.duplicates, c.duplicate_pages, c.unreadable) == (15, 10, 1, 2, 4)
    # born 2 + deutsch 1 + francais 1 + perm 1 + mixed 3 text pages; scans, blank, symbols to OCR
    assert (c.pages, c.text_pages, c.ocr_pages) == (20, 8, 12)
    assert (c.image_only_pages, c.blank_pages, c.pages_checked, c.sampled) == (10, 1, 20, False)


def test_text_pages_are_extrapolated_from_checked_pages(tmp_path):
    from vlmocr.corpus.plan import load_corpus
    from vlmocr.corpus.triage import COLUMNS

    path = tmp_path / "t.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        base = {c: "" for c in COLUMNS}
        w.writerow({**base, "doc_id": "a", "path": "/a.pdf", "status": "ok", "pages": 100, "pages_checked": 10,
                    "text_pages": 4})
        w.writerow({**base, "doc_id": "b", "path": "/b.pdf", "status": "ok", "pages": 7, "pages_checked": 7,
                    "text_pages": 7})
    c = load_corpus(path)
    assert (c.pages, c.text_pages, c.ocr_pages, c.sampled) == (107, 47, 60, True)


@pytest.mark.parametrize("rate,gpus,hours,words", [
    (10, "1,2,4", {"1": 1.56, "2": 0.78, "4": 0.39}, "Run it locally overnight"),
    (1, "1,2,4,8", {"1": 15.6, "2": 7.8, "4": 3.9, "8": 1.95}, "with 2 GPUs they take 7.8 h"),
    (0.1, "1,2,4,8", {"1": 156.0, "2": 78.0, "4": 39.0, "8": 19.5}, "About 13 GPUs would finish in one"),
])
def test_plan_numbers_and_recommendation(triaged, rate, gpus, hours, words):
    res = run_cli("plan", "--triage", str(triaged), "--pages-per-hour", str(rate), "--gpus", gpus, "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["hours"] == hours  # 12 pages to OCR × 1.3 ÷ rate ÷ GPUs
    assert plan["corpus"]["ocr_pages"] == 12 and plan["corpus"]["text_pages"] == 8
    assert plan["pages_per_hour"] == rate and plan["retry_overhead"] == 0.3
    assert words in plan["recommendation"]
    res = run_cli("plan", "--triage", str(triaged), "--pages-per-hour", str(rate), "--gpus", gpus)
    assert res.returncode == 0, res.stderr
    assert "to OCR:                  12" in res.stdout and "served by the text layer: 8 (40%" in res.stdout
    assert "Recommendation: " in res.stdout and words in res.stdout


def test_nothing_to_ocr(tmp_path):
    from support.documents import make_text_pdf
    from vlmocr.corpus.plan import load_corpus, make_plan
    from vlmocr.corpus.triage import triage

    make_text_pdf(tmp_path / "a.pdf", [["A page of text with enough characters to count as a text layer."]])
    triage([str(tmp_path / "a.pdf")], tmp_path / "t.csv")
    plan = make_plan(load_corpus(tmp_path / "t.csv"), 100)
    assert plan.hours == {1: 0.0, 2: 0.0, 4: 0.0, 8: 0.0}
    assert plan.recommendation.startswith("Nothing needs a GPU")


def test_usage_errors(triaged, tmp_path):
    assert run_cli("plan", "--triage", str(triaged)).returncode == 3
    assert run_cli("plan", "--triage", str(triaged), "--measure").returncode == 3
    assert run_cli("plan", "--triage", str(triaged), "--pages-per-hour", "5", "--gpus", "0").returncode == 3
    res = run_cli("plan", "--triage", str(tmp_path / "nope.csv"), "--pages-per-hour", "5")
    assert res.returncode == 3 and "not found" in res.stderr
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    res = run_cli("plan", "--triage", str(tmp_path / "other.csv"), "--pages-per-hour", "5")
    assert res.returncode == 3 and "not a triage CSV" in res.stderr


def test_sample_pages_come_from_documents_to_ocr(triaged):
    from vlmocr.trials.rate import sample_pages

    picks = sample_pages(triaged, 5)
    assert sum(len(p) for _, _, p in picks) == 5 and {d for d, _, _ in picks} <= OCR_DOCS
    assert picks == sample_pages(triaged, 5)  # deterministic
    every = sample_pages(triaged, 100)  # more than there are: every page of every OCR document once
    assert {d: p for d, _, p in every} == {"scan": [1, 2, 3], "mixed": [1, 2, 3, 4, 5], "book": [1, 2, 3],
                                           "symbols": [1], "photo": [1], "multi": [1, 2]}


def test_measure_against_the_test_server(triaged):
    latency, slots = 0.3, 2
    with serve_in_process(ServerConfig(latency=latency, slots=slots, answer="static")) as srv:
        res = run_cli("plan", "--triage", str(triaged), "--measure", "--endpoint", srv.url, "--sample", "6",
                      "--concurrency", "2", "--gpus", "1,2", "--json",
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
        requests = srv.requests()
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    m = plan["measurement"]
    assert m["pages"] == 6 and m["statuses"] == {"ok": 6} and len(requests) == 6
    assert all(r["n_images"] == 1 and r["outcome"] == "ok" for r in requests)
    # the server cannot do better than slots ÷ latency; start-up is not counted but slow pages are
    ceiling = slots / latency * 3600
    assert 0.05 * ceiling < m["pages_per_hour"] <= ceiling * 1.05
    assert m["run_seconds"] >= m["seconds"] > 0
    assert plan["pages_per_hour"] == m["pages_per_hour"]
    assert plan["hours"]["1"] == round(12 * 1.3 / m["pages_per_hour"], 2)
    assert "measured now: 6 pages" in plan["rate_source"]
    # a dead endpoint: exit 5, as for `vlmocr run`
    res = run_cli("plan", "--triage", str(triaged), "--measure", "--endpoint", "http://127.0.0.1:9/v1",
                  "--sample", "2", env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode == 5, res.stderr


def test_measure_a_cpu_engine_per_core_with_the_slurm_cpu_job(triaged, tmp_path):
    """Issue 26, point 5: `plan --measure` with a CPU engine reads a sample of the corpus's own pages on
    this machine and gives pages/h per core, the hours on N cores, and a SLURM CPU array line that
    `slurm submit` accepts as it stands."""
    import shutil

    from support.components import need

    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    # A night of under a second: the corpus is too long for this machine.
    res = run_cli("plan", "--triage", str(triaged), "--measure", "--engine", "tesseract", "--sample", "3",
                  "--workers", "2", "--cores", "1,16", "--cores-per-task", "4", "--overnight-hours", "0.0002",
                  "--run", str(tmp_path / "RUN"), "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    m = plan["measurement"]
    assert plan["unit"] == "core" and m["engine"] == "tesseract" and m["read_by"] == ["tesseract"]
    assert m["pages"] == 3 and m["workers"] == 2 and m["worker_mb"] > 0
    # The rate per core is the pool's rate over its workers; the hours follow from it.
    assert plan["pages_per_hour"] == round(m["pages_per_hour"] / 2, 1)
    assert plan["hours"]["1"] == round(12 * 1.3 / plan["pages_per_hour"], 2)
    assert plan["hours"]["16"] == round(12 * 1.3 / plan["pages_per_hour"] / 16, 2)
    assert set(plan["hours"]) >= {"1", "16"}  # and this machine's cores
    job = plan["cpu_job"]
    core_hours = 12 * 1.3 / plan["pages_per_hour"]
    assert job["tasks"] == max(1, -(-core_hours // (4 * 0.0002))) and job["cores_per_task"] == 4
    assert job["command"] in plan["recommendation"] and plan["recommendation"].startswith("Use a CPU cluster")
    # The proposed line is a real `slurm submit` command: it writes the CPU array script.
    manifest = tmp_path / "m.csv"
    assert run_cli("manifest", "--triage", str(triaged), "--out", str(manifest)).returncode == 0
    argv = job["command"].replace("MANIFEST", str(manifest)).split()[1:]
    sep = argv.index("--")
    sub = run_cli(*argv[:sep], "--dry-run", *argv[sep:])
    assert sub.returncode == 0, sub.stderr
    script = (tmp_path / "RUN" / "slurm" / "bulk.sbatch").read_text()
    assert "#SBATCH --cpus-per-task=4" in script and f"#SBATCH --mem={job['mem']}" in script
    assert f"#SBATCH --time={job['time_limit']}" in script and "--workers 4" in script
    assert "--gpus" not in script

    # A night long enough: run it here, no cluster.
    res = run_cli("plan", "--triage", str(triaged), "--measure", "--engine", "tesseract", "--sample", "2")
    assert res.returncode == 0, res.stderr
    assert "pages/h per core" in res.stdout and "Recommendation: Run it here overnight" in res.stdout


def test_cpu_measure_usage_errors(triaged):
    res = run_cli("plan", "--triage", str(triaged), "--measure", "--engine", "tesseract",
                  "--endpoint", "http://127.0.0.1:9/v1")
    assert res.returncode == 3 and "leave out --endpoint" in res.stderr
    res = run_cli("plan", "--triage", str(triaged), "--engine", "tesseract", "--pages-per-hour", "5")
    assert res.returncode == 3 and "--engine goes with --measure" in res.stderr
    res = run_cli("plan", "--triage", str(triaged), "--measure")
    assert res.returncode == 3 and "--engine ENGINE" in res.stderr
