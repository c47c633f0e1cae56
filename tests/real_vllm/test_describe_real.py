"""`vlmocr describe RUN --serve qwen3-vl` with the released vLLM: the describing model's own server
started with the profile's recipe (its args file included) on a tiny Qwen3-VL, every figure crop
sent through the release's processor, each description recorded under the served name, and the
server stopped after."""

from __future__ import annotations

import json

from support.cli import run_cli
from support.figures import SERVED, grounded_run
from support.real_vllm import model_dir, the_lane
from vlmocr.runfolder.rundir import FIGURES_FILE
from vlmocr.testing.real_vllm import server_environ
from vlmocr.testing.tiny_models import ANSWER


def test_describe_serve_describes_every_figure_through_the_release(tmp_path):
    python = the_lane()
    run = grounded_run(tmp_path)  # a page run with figure blocks (deepseek-ocr's answers, from the stand-in)
    env = {**server_environ(python), "VLMOCR_SERVE_MODEL_PATH": str(model_dir("qwen3_vl")),
           "VLMOCR_SERVE_ARGS": "--max-model-len 4096 --enforce-eager --max-num-seqs 4",
           "VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}
    res = run_cli("describe", str(run), "--serve", "qwen3-vl", "--workers", "2", env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().splitlines()[-1].startswith("Described: 3 figures"), res.stdout
    recs = [json.loads(line) for line in (run / FIGURES_FILE).read_text().splitlines() if line.strip()]
    assert len(recs) == 3 and {r["model"] for r in recs} == {SERVED}
    assert all(ANSWER.split(".")[0] in r["description"] for r in recs), recs
    (log,) = (run / "logs").glob("server-*.log")
    text = log.read_text(errors="replace")
    assert "vllm.entrypoints.openai.api_server" in text.splitlines()[0] and "--config" in text.splitlines()[0]
    assert "[shutdown] API server: shutdown triggered" in text and "stopped" in res.stderr
