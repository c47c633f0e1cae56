"""Issue 25, point 6: a gate for a pilot nobody has typed truth for. Seed 000: "afterok only means
the gate job finished; it knows nothing about CER thresholds or spelling counts." The spelling count
(`unknown_words`: the share of words not in a real word list of their page's language, wordfreq's
lists) gates the bulk alone when there is no truth; `evaluate --no-truth --gate` measures it too.
The test server's page-code answers are English sentences (a faithful reader); its static answer
here is letter soup (a reader gone wrong)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import run_cli
from vlmocr.cluster.slurm.gate import release
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import make_coded_pdf

pytestmark = pytest.mark.timeout(300)
# Letter soup that does not repeat (a repeated line would be a loop, not a reading).
SOUP = " ".join("".join("bcdfghjklmnpqrstvwxz"[(i * 7 + j * 3) % 20] for j in range(4 + i % 5)) for i in range(90))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vlmocr", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=240, env={**os.environ, "VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})


def read_gate_run(tmp_path: Path, config: ServerConfig) -> Path:
    """RUN/gate read by the test server, and a gate.json as `slurm gate --require …` writes it without truth."""
    run = tmp_path / "run"
    (run / "slurm").mkdir(parents=True)
    doc = make_coded_pdf(tmp_path / "pilot.pdf", [31, 32, 33])
    with serve_in_process(config) as srv:
        res = run_cli("run", str(doc), "--out", str(run / "gate"), "--endpoint", srv.url, "--engine", "openai",
                      "--profile", "generic", "--workers", "1", "--lang", "eng", "--no-retry",
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode in (0, 2), res.stderr
    (run / "slurm" / "gate.json").write_text(json.dumps({
        "truth": None, "max_cer": None, "checks": ["unknown_words<=0.1"], "gate_job": None, "bulk_job": None,
        "truth_pages": 0, "decision": None}))
    return run


def test_a_faithful_pilot_passes_on_its_spelling_count_alone(tmp_path):
    run = read_gate_run(tmp_path, ServerConfig())
    decision = release(run, dry_run=True)
    assert decision.passed and decision.max_cer is None and decision.score.cer is None
    assert decision.score.pages == 3 and decision.score.checks[0]["passed"]
    assert decision.score.checks[0]["measured"] < 0.1
    assert "gate passed: no truth: 3 page(s) read" in decision.message


def test_a_pilot_read_as_letter_soup_fails_without_anyone_typing_truth(tmp_path):
    run = read_gate_run(tmp_path, ServerConfig(answer="static", static_text=SOUP))
    decision = release(run, dry_run=True)
    assert not decision.passed and decision.score.checks[0]["measured"] > 0.5
    assert "gate FAILED" in decision.message and "unknown_words" in decision.message
    # evaluate says the same without a gate job: exit 4
    res = run_cli("evaluate", str(run / "gate"), "--no-truth", "--gate", "unknown_words<=0.1", "--json")
    assert res.returncode == 4 and not json.loads(res.stdout)["gates"][0]["passed"]


def test_slurm_gate_without_truth_needs_a_gate_that_needs_none(tmp_path):
    doc = make_coded_pdf(tmp_path / "g.pdf", [1])
    base = ("slurm", "gate", "--gate", str(doc), "--out", str(tmp_path / "run"), "--shards", "1", str(doc),
            "--dry-run")
    res = cli(*base, cwd=tmp_path)
    assert res.returncode == 3 and "--require 'unknown_words<=0.08'" in res.stderr
    res = cli(*base, "--max-cer", "0.05", cwd=tmp_path)
    assert res.returncode == 3 and "--max-cer needs --truth" in res.stderr
    res = cli(*base, "--require", "cer<=0.05", cwd=tmp_path)
    assert res.returncode == 3 and "needs --truth" in res.stderr
    res = cli(*base, "--require", "unknown_words<=0.08", "--", "--profile", "generic", "--endpoint",
              "http://127.0.0.1:9/v1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "no truth: its --require gates decide" in res.stdout


@pytest.mark.slurm
def test_the_release_job_decides_a_truthless_gate_on_the_cluster(slurm, tmp_path):
    doc = make_coded_pdf(tmp_path / "pilot.pdf", [41, 42])
    bulk = make_coded_pdf(tmp_path / "bulk.pdf", [43])
    run = tmp_path / "run"
    with serve_in_process(ServerConfig()) as srv:
        res = cli("slurm", "gate", "--gate", str(doc), "--require", "unknown_words<=0.1", "--out", str(run),
                  "--shards", "1", str(bulk), "--time", "10", "--json", "--profile", "generic", "--endpoint",
                  srv.url, "--workers", "1", "--lang", "eng", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        sub = json.loads(res.stdout)
        try:
            assert slurm.wait(sub["release_job"], timeout=180) == "COMPLETED", slurm.info(sub["release_job"])
            decision = json.loads((run / "slurm" / "gate.json").read_text())["decision"]
            assert decision["passed"] and decision["action"] == "released" and decision["max_cer"] is None
            assert slurm.wait(sub["bulk_job"], timeout=180) == "COMPLETED"
        finally:
            subprocess.run(["scancel", *[j for j in (sub["gate_job"], sub["bulk_job"], sub["release_job"]) if j]],
                           capture_output=True)


def test_a_gate_with_truth_can_require_the_spelling_count_too(tmp_path):
    """`slurm gate --truth T --max-cer X --require 'unknown_words<=…'`: the gate's own scorer
    (score_gate) measures the spelling count of the gate run as evaluate does."""
    from vlmocr.cluster.slurm.gate import score_gate
    from vlmocr.evaluation import TruthPage
    from vlmocr.testing.pagecode import expected_text

    run = read_gate_run(tmp_path, ServerConfig())
    truth = [TruthPage("pilot", page, expected_text(code)) for page, code in ((1, 31), (2, 32), (3, 33))]
    score = score_gate(run / "gate", truth, ["unknown_words<=0.1", "unknown_words<0"])
    assert score.cer == 0.0
    assert [c["passed"] for c in score.checks] == [True, False]
    assert score.checks[0]["measured"] is not None and score.checks[0]["measured"] <= 0.1
    assert "words on 3 of 3 page(s)" in score.checks[1]["message"]  # measured, not "no document named"
