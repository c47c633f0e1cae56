"""Every profile read through the released vLLM against a tiny model of its own architecture
(testing/tiny_models.py): its processor, chat template and server flags, not Qwen2.5-VL's. Those
whose architecture cannot be built here are listed with the reason in docs/servers.md
("The real-server lane"); tests/real_vllm/test_profiles_real.py covers the Qwen2.5-VL ones, and
test_serve_real.py reads paddleocr-vl by `run --serve` (its --trust-remote-code recipe)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from support.cli import run_cli
from support.records import read_records
from vlmocr.testing.pagecode import make_coded_pdf
from vlmocr.testing.tiny_models import ANSWER

# profile → the architecture family its model is (model cards and config.json architectures), and
# the profile whose serving recipe that family's server is started with (flags, args file: e.g.
# gemma-4's --mm-processor-kwargs max_soft_tokens, read by the release's Gemma 4 processor).
READ_THROUGH = {
    "qwen3-vl": ("qwen3_vl", "qwen3-vl"),
    "chandra": ("qwen3_vl", "qwen3-vl"),
    "gemma-4": ("gemma4", "gemma-4"),
    "granite-docling": ("idefics3", "granite-docling"),
    # LightOnOCR-3-1B has LightOnOCR-2's architecture; one server, started with -3's recipe.
    "lightonocr-2": ("lightonocr", "lightonocr-3"),
    "lightonocr-3": ("lightonocr", "lightonocr-3"),
    "glm-ocr": ("glm_ocr", "glm-ocr"),
}


@pytest.fixture(scope="module", autouse=True)
def servers_stopped_after(lane_servers):
    yield
    lane_servers.close_others()


@pytest.mark.parametrize("profile", sorted(READ_THROUGH, key=lambda p: (READ_THROUGH[p], p)))
def test_the_profile_reads_through_a_server_of_its_architecture(tmp_path, lane_servers, profile):
    server = lane_servers.get(*READ_THROUGH[profile])
    doc = make_coded_pdf(tmp_path / "d.pdf", [1])
    res = run_cli("run", str(doc), "--out", str(tmp_path / "r"), "--endpoint", server.url, "--model", server.model,
                  "--profile", profile, "--workers", "2", "--engine", "openai",
                  env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}, timeout=600)
    recs = read_records(tmp_path / "r")
    first = recs[0]
    assert first["status"] not in ("error", "bad_input"), (first.get("error"), res.stderr[-2000:])
    assert first["tokens_in"] > 100 and first["server"] == "vllm 0.32.0"  # the image went through its processor
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["current"]["reader"]["outcomes"].get("ok", 0) >= 1
    if profile == "gemma-4":
        # The recipe's --mm-processor-kwargs max_soft_tokens = 1120 reached the release's Gemma 4
        # processor: a 200-dpi page takes 1120 soft tokens, not the default 280. vLLM drops a
        # keyword its processor does not take (a misspelt one) with a warning, so this is where
        # such a typo fails.
        assert first["tokens_in"] > 1120, first["tokens_in"]
    if profile == "glm-ocr":
        # The recipe's --speculative-config (MTP, one token) ran: the tiny model's MTP layer drafted
        # and the release verified the drafts.
        metrics = urllib.request.urlopen(server.url.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
        drafted = [line for line in metrics.splitlines() if line.startswith("vllm:spec_decode_num_draft_tokens_total")]
        assert drafted and float(drafted[0].rsplit(" ", 1)[1]) > 0, drafted
    if json.loads((server.model_dir / "tiny-model.json").read_text())["shape"] == "text":
        assert ANSWER.split(".")[0] in first["text"] and first["finish_reason"] == "stop"
