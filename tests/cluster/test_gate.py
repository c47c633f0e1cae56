"""The quality gate: `vlmocr slurm gate` submits a gate run, the bulk array held, and a release job
after the gate (afterany) that scores the gate (CER against truth) and releases or cancels the bulk, as
`vlmocr slurm release RUN` does by hand. Seed 000: nothing heavy on the login node — the submit command
returns at once and nothing of it stays behind waiting for the gate.

Matching truth to gate documents and scoring are tested without SLURM; the pass and fail paths with real
jobs against the test OpenAI server (pagecode answers = perfect reader; static answers = garbage)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.slurm import submit_side_processes
from vlmocr.cluster.slurm import gate
from vlmocr.evaluation import TruthPage, load_truth
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf, make_coded_png

pytestmark = pytest.mark.timeout(300)


def cli(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vlmocr", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})


def records(run: Path) -> list[dict]:
    path = run / "pages.jsonl"
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def gate_folder(folder: Path, codes: list[int]) -> dict[str, str]:
    """name.png + name.txt side by side (the layout of tests/data/gt); returns {doc_id: truth}."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for code in codes:
        make_coded_png(folder / f"g{code}.png", code)
        (folder / f"g{code}.txt").write_text(expected_text(code), encoding="utf-8")
        out[f"g{code}"] = expected_text(code)
    return out


def bulk_folder(folder: Path, codes: list[int]) -> set[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for code in codes:
        make_coded_pdf(folder / f"b{code}.pdf", [code])
    return {f"b{code}" for code in codes}


# ================================================================== without SLURM


def test_gate_truth_matches_gate_documents_and_names_the_rest(tmp_path):
    # The one truth loader (tests/evaluation/test_truth.py has its shapes); here: its pages put
    # under the gate's doc ids, by image path, doc_id or file stem, and what matched nothing.
    t = tmp_path / "truth"
    (t / "set").mkdir(parents=True)
    make_coded_png(t / "set" / "one.png", 1)
    (t / "set" / "one.txt").write_text("first page")
    (t / "two.txt").write_text("page one of two")
    (t / "two.p2.txt").write_text("page two of two")
    (t / "memo.txt").write_text("a memo")
    (t / "orphan.txt").write_text("no gate document")
    docs = [  # originals.csv rows of the gate
        {"doc_id": "anything", "original": str(t / "set" / "one.png")},
        {"doc_id": "two", "original": "/elsewhere/two.pdf"},
        {"doc_id": "m", "original": "/elsewhere/memo.png"},
        {"doc_id": "x", "original": "/elsewhere/unrelated.png"},
    ]
    matched, unmatched = gate.gate_truth(load_truth(t), docs)
    assert sorted((p.doc_id, p.page, p.text) for p in matched) == [
        ("anything", 1, "first page"), ("m", 1, "a memo"), ("two", 1, "page one of two"), ("two", 2, "page two of two")]
    assert unmatched == [str(t / "orphan.txt")]
    # an inline truth in a `truth` cell (a text, not a file) is truth for the gate too
    (tmp_path / "inline.csv").write_text("doc_id,page,truth\ntwo,1,page one of two\n")
    matched, _ = gate.gate_truth(load_truth(tmp_path / "inline.csv"), docs)
    assert [(p.doc_id, p.text) for p in matched] == [("two", "page one of two")]


def test_score_counts_missing_and_failed_pages_as_cer_1(tmp_path):
    run = tmp_path / "gate"
    run.mkdir()
    key = "k1"
    recs = [
        {"doc_id": "a", "page": 1, "key": key, "status": "ok", "text": "hello  world"},
        {"doc_id": "b", "page": 1, "key": key, "status": "error", "text": ""},
        {"doc_id": "c", "page": 1, "key": key, "status": "ok", "text": "abcd"},
        {"doc_id": "c", "page": 1, "key": "old", "status": "ok", "text": "zzzz"},  # other settings: ignored
    ]
    (run / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run / "run.json").write_text(json.dumps({"keys": [key]}))
    truth = [
        TruthPage("a", 1, "hello world"),  # whitespace collapsed: exact
        TruthPage("b", 1, "0123456789"),  # failed: CER 1
        TruthPage("c", 1, "abce"),  # 1 error in 4
        TruthPage("d", 1, "12345"),  # missing: CER 1
    ]
    score = gate.score_gate(run, truth, checks=["missing<=0", "cer_macro<=0.2"])
    assert (score.pages, score.missing, score.failed) == (4, 1, 1)
    assert score.errors == 0 + 10 + 1 + 5 and score.chars == 11 + 10 + 4 + 5
    assert score.cer == round(16 / 30, 5)  # the gate's number: missing pages count as wrong
    assert score.cer_scored == round(11 / 25, 5)  # over the pages that have a record
    assert score.statuses == {"ok": 2, "error": 1, "missing": 1}
    assert score.worst[0]["cer"] == 1.0
    assert [(c["gate"], c["passed"]) for c in score.checks] == [("missing<=0", False), ("cer_macro<=0.2", False)]


def test_release_without_a_gate_is_a_usage_error(tmp_path):
    (tmp_path / "run" / "slurm").mkdir(parents=True)
    res = cli("slurm", "release", str(tmp_path / "run"), cwd=tmp_path)
    assert res.returncode == 3 and "no gate" in res.stderr


# ================================================================== real SLURM


def _cancel(*jobs):
    subprocess.run(["scancel", *[j for j in jobs if j]], capture_output=True)


def _release_job_queued_after_the_gate(slurm, run: Path, sub: dict) -> str:
    """The release step is a SLURM job that waits on the gate; nothing of the submit command is
    left on this (the submitting) side."""
    release_job = sub["release_job"]
    assert release_job and release_job not in (sub["gate_job"], sub["bulk_job"])
    assert f"#SBATCH --dependency=afterany:{sub['gate_job']}" in (run / "slurm" / "release.sbatch").read_text()
    info = slurm.info(release_job)
    if info["JobState"] == "PENDING":
        assert f"afterany:{sub['gate_job']}" in info.get("Dependency", ""), info
    assert submit_side_processes(str(run)) == []
    return release_job


def test_gate_pass_releases_the_held_bulk(slurm, tmp_path):
    truth = gate_folder(tmp_path / "gt", [11, 12])
    (tmp_path / "gate.csv").write_text("path\n" + "".join(f"gt/{d}.png\n" for d in truth))
    bulk = bulk_folder(tmp_path / "bulk", [21, 22, 23, 24])
    run = tmp_path / "run"
    # The gate's pages are held by the server until the test has seen the gate still running
    # (a fixed latency raced the test's own steps on a busy machine).
    with serve_in_process(ServerConfig(latency=600.0)) as srv:
        res = cli("slurm", "gate", "--manifest", "gate.csv", "--truth", "gt", "--max-cer", "0.05",
                  "--require", "cer_hi<=0.05",
                  "--out", str(run), "--shards", "2", "bulk", "--time", "10", "--json",
                  "--profile", "generic", "--endpoint", srv.url, "--workers", "1", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        sub = json.loads(res.stdout)
        gate_job, bulk_job = sub["gate_job"], sub["bulk_job"]
        release_job = _release_job_queued_after_the_gate(slurm, run, sub)
        try:
            assert sub["truth_pages"] == 2
            info = slurm.info(bulk_job)
            assert (info["JobState"], info["Reason"]) == ("PENDING", "JobHeldUser")
            # The bulk is queued (held): submitting it again would run two writers per shard.
            again = cli("slurm", "submit", "bulk", "--out", str(run), "--shards", "2", "--profile", "generic",
                        "--endpoint", srv.url, cwd=tmp_path)
            assert again.returncode == 3 and f"previous bulk job {bulk_job} is still PENDING" in again.stderr
            # Too early: the gate is still running, nothing is decided.
            early = cli("slurm", "release", str(run), cwd=tmp_path)
            assert early.returncode == 1 and "still" in early.stderr, early.stderr
            assert slurm.info(bulk_job)["Reason"] == "JobHeldUser"
            srv.configure(latency=0.0)  # the gate's pages are answered now
            # The release job decides once the gate has ended; no one polls squeue on this side.
            assert slurm.wait(release_job, timeout=120) == "COMPLETED", slurm.info(release_job)
            decision = json.loads((run / "slurm" / "gate.json").read_text())["decision"]
            assert decision["passed"] and decision["action"] == "released" and decision["bulk_job"] == bulk_job
            assert decision["score"]["cer"] == 0.0 and decision["score"]["pages"] == 2
            assert decision["score"]["missing"] == 0 and decision["score"]["checks"][0]["passed"]
            assert "gate passed: CER 0.0000 ≤ 0.05 over 2 page(s)" in decision["message"]
            assert slurm.wait(bulk_job, timeout=120) == "COMPLETED", slurm.task_states(bulk_job)
        finally:
            _cancel(gate_job, bulk_job, release_job)
    assert slurm.info(gate_job)["JobState"] == "COMPLETED"
    assert submit_side_processes(str(run)) == []
    gate_recs = records(run / "gate")
    # Ids as `vlmocr run --manifest` derives them (gt/g11.png -> gt__g11); truth matched by image path.
    assert {r["doc_id"]: r["text"] for r in gate_recs} == {f"gt__{d}": t for d, t in truth.items()}
    read = {r["doc_id"] for k in (1, 2) for r in records(run / "shards" / str(k))}
    assert read == bulk
    st = json.loads(cli("slurm", "status", str(run), "--json", cwd=tmp_path).stdout)
    assert st["gate"]["decision"]["action"] == "released"
    assert st["totals"]["final"] == st["totals"]["pages"] == 4
    events = json.loads((run / "slurm" / "jobs.json").read_text())["events"]
    assert events[-1]["action"] == "released" and events[-1]["cer"] == 0.0


def test_gate_fail_cancels_the_held_bulk_and_exits_4(slurm, tmp_path):
    gate_folder(tmp_path / "gt", [31, 32])
    bulk = bulk_folder(tmp_path / "bulk", [41, 42, 43])
    (tmp_path / "bulk.csv").write_text("path\n" + "".join(f"bulk/{d}.pdf\n" for d in sorted(bulk)))
    run = tmp_path / "run"
    garbage = ServerConfig(answer="static", static_text="lorem ipsum, but not this page at all")
    with serve_in_process(garbage) as srv:
        res = cli("slurm", "gate", "--gate", "gt", "--truth", "gt", "--max-cer", "0.1", "--after-gate",
                  "--bulk-manifest", "bulk.csv", "--out", str(run), "--shards", "3", "--time", "10", "--json",
                  "--profile", "generic", "--endpoint", srv.url, "--workers", "1", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        sub = json.loads(res.stdout)
        gate_job, bulk_job = sub["gate_job"], sub["bulk_job"]
        release_job = _release_job_queued_after_the_gate(slurm, run, sub)
        try:
            assert f"afterany:{gate_job}" in slurm.info(bulk_job).get("Dependency", "")
            assert slurm.wait(release_job, timeout=120) == "COMPLETED", slurm.info(release_job)
            log = (run / "slurm" / "logs" / f"release_{release_job}.out").read_text()
            assert "gate FAILED: CER" in log and "> 0.1 over 2 page(s)" in log
            assert f"cancelled bulk job {bulk_job}" in log
            assert slurm.wait(bulk_job, timeout=30) == "CANCELLED"
        finally:
            _cancel(gate_job, bulk_job, release_job)
    assert submit_side_processes(str(run)) == []
    assert slurm.info(gate_job)["JobState"] == "COMPLETED"  # the gate ran fine; its text was bad
    assert not (run / "shards").exists()  # the bulk never ran
    gate = json.loads((run / "slurm" / "gate.json").read_text())
    assert gate["decision"]["action"] == "cancelled" and gate["decision"]["score"]["cer"] > 0.5
    st = cli("slurm", "status", str(run), cwd=tmp_path)
    assert st.returncode == 0 and "gate FAILED" in st.stdout
