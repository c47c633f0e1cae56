"""Issue 25, point 2: a server that rejects every request alike is misconfigured, not each page
bad. vLLM >= 0.31 answers 400 to per-request mm_processor_kwargs unless it was started with
--trust-request-mm-kwargs (validate_request_mm_kwargs in vllm/entrypoints/generate/base/protocol.py);
the old gemma-4 recipe sent them with every page, so every page got an `error` record and the run
exited 1 for SLURM to resubmit forever. Now the run stops with the endpoint-unavailable exit and
the server's own message, and a page or two the server will not take still end as `error` alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import run_cli
from support.records import finals, read_records
from vlmocr.exceptions import ExitCode
from vlmocr.profiles import load_profile
from vlmocr.reading.client import SAME_REJECTIONS_STOP, rejection_kind
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def coded(tmp_path) -> Path:
    return make_coded_pdf(tmp_path / "coded.pdf", list(range(1, 13)))


def old_gemma(tmp_path: Path) -> Path:
    """gemma-4 as it was: the image-token budget sent with each request."""
    text = load_profile("gemma-4").source.read_text(encoding="utf-8")
    text = text.replace('name = "gemma-4"', 'name = "old-gemma"').replace(
        "chat_template_kwargs = { enable_thinking = false }\n",
        "chat_template_kwargs = { enable_thinking = false }\nmm_processor_kwargs = { max_soft_tokens = 1120 }\n", 1)
    path = tmp_path / "old-gemma.toml"
    path.write_text(text, encoding="utf-8")
    return path


def run(doc: Path, out: Path, url: str, *extra: str):
    return run_cli("run", str(doc), "--out", str(out), "--endpoint", url, "--engine", "openai", "--workers", "1",
                   "--concurrency", "2", "--request-timeout", "5", *extra,
                   env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})


def test_the_same_rejection_for_every_page_stops_the_run_with_the_servers_words(tmp_path, coded):
    released = ServerConfig(models="google/gemma-4-31B-it", trust_request_mm_kwargs=False)
    with serve_in_process(released) as srv:
        res = run(coded, tmp_path / "r", srv.url, "--profile", str(old_gemma(tmp_path)))
        asked = len(srv.requests())
    assert res.returncode == ExitCode.unavailable == 5, res.stderr
    assert "Per-request mm_processor_kwargs are disabled by default" in res.stderr
    assert f"rejected {SAME_REJECTIONS_STOP} requests in a row with the same answer (HTTP 400)" in res.stderr
    assert asked < 12  # it stopped: the rest of the pages were never sent
    # No page is counted as read: a resubmit after the fix reads every one.
    assert not [r for r in read_records(tmp_path / "r") if r["status"] == "ok"]


def test_gemma_4_now_reads_on_a_server_that_refuses_per_request_kwargs(tmp_path, coded):
    released = ServerConfig(models="google/gemma-4-31B-it", trust_request_mm_kwargs=False)
    with serve_in_process(released) as srv:
        res = run(coded, tmp_path / "r", srv.url, "--profile", "gemma-4")
        sent = srv.requests()
    assert res.returncode == 0, res.stderr
    assert all("mm_processor_kwargs" not in r["extra"] for r in sent)
    recs = finals(tmp_path / "r")
    assert {page: rec["text"] for (_d, page), rec in recs.items()} == {p: expected_text(p) for p in range(1, 13)}


def test_a_page_or_two_the_server_will_not_take_do_not_stop_the_run(tmp_path, coded):
    with serve_in_process(ServerConfig(faults={"400": {"pages": [3, 8]}})) as srv:
        res = run(coded, tmp_path / "r", srv.url, "--profile", "generic")
    assert res.returncode == ExitCode.incomplete == 1, res.stderr
    statuses = {page: rec["status"] for (_d, page), rec in finals(tmp_path / "r").items()}
    assert statuses.pop(3) == statuses.pop(8) == "error"
    assert set(statuses.values()) == {"ok"} and len(statuses) == 10


def test_rejections_alike_are_told_apart_from_different_ones():
    assert rejection_kind(400, "Failed to load the image of request 3") == \
        rejection_kind(400, "Failed to load the image of request 1234")
    assert rejection_kind(400, "a") != rejection_kind(422, "a")
    assert rejection_kind(400, "request id 9f2c4a1be3d5 failed") == rejection_kind(400, "request id 0badc0de1234 failed")
