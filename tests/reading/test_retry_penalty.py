"""The retry ladder's request bodies, as the server receives them (issue 17, point 4): dots.mocr
retries with no repetition penalty, as the production run's client did ("the image before the
prompt (CLIENT_ARGS="--image-first --retry-penalty 0")"), and so does dots.ocr, its
predecessor with the same layout JSON and serving. The fake vLLM server logs every body."""

from __future__ import annotations

import pytest

from support.cli import run_cli
from support.records import read_records
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import make_coded_pdf

NO_KEY = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}


def bodies_of_page(tmp_path, profile: str, page: int = 2) -> tuple[list[dict], list[dict]]:
    """Run `profile` over a 3-page document whose page `page` loops once; the server's log of
    that page's requests (first pass, then the retry) and the page's records."""
    pdf = make_coded_pdf(tmp_path / f"{profile}.pdf", [1, 2, 3])
    run = tmp_path / profile
    with serve_in_process(ServerConfig(faults={"loop": {"pages": [page], "times": 1}})) as srv:
        res = run_cli("run", str(pdf), "--out", str(run), "--endpoint", srv.url, "--profile", profile,
                      "--workers", "1", "--request-timeout", "10", env=NO_KEY)
        log = srv.requests()
    assert res.returncode == 0, res.stderr
    return [r for r in log if r["page"] == page], [r for r in read_records(run) if r["page"] == page]


@pytest.mark.parametrize("profile", ["dots-mocr", "dots-ocr"])
def test_dots_retries_without_a_repetition_penalty(tmp_path, profile):
    sent, records = bodies_of_page(tmp_path, profile)
    assert [r["status"] for r in records] == ["loop", "ok"]
    first, retry = sent
    assert (first["temperature"], retry["temperature"]) == (0.1, 0.3)  # the ladder's first step
    for body in (first, retry):
        assert "repetition_penalty" not in body["extra"], body["extra"]
        assert body["extra"]["top_p"] == 0.9
    assert retry["max_tokens"] == 24576 > first["max_tokens"]
    # and the image goes before the prompt ("--image-first")
    assert retry["parts"] == ["user:image_url", "user:text"]


def test_the_log_shows_a_penalty_where_a_profile_sets_one(tmp_path):
    """The same run with the generic profile (retry.extra_body repetition_penalty = 1.05): the
    server's log would show a penalty on dots' retries if one were sent."""
    sent, _ = bodies_of_page(tmp_path, "generic")
    assert "repetition_penalty" not in sent[0]["extra"] and sent[1]["extra"]["repetition_penalty"] == 1.05
