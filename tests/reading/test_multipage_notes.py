"""Multi-page reading says what it does (issue 17, point 3): on vLLM, once, the serving recipe's
advice ("Use vLLM multi-page for clean docs; reach for SGLang for hard scans."); and when the
context estimate sends fewer pages per request than asked, once, with the dpi at which the pages
asked for would fit — a dpi the next run can take, and the largest that works."""

from __future__ import annotations

import json
import re

from support.cli import run_cli
from support.records import finals
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf

NO_KEY = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}
ADVICE = "Use vLLM multi-page for clean docs; reach for SGLang for hard scans."


def read(tmp_path, name: str, pdf, max_model_len: int, *args: str):
    with serve_in_process(ServerConfig(page_separator="\n<PAGE>\n", max_model_len=max_model_len)) as srv:
        res = run_cli("run", str(pdf), "--out", str(tmp_path / name), "--endpoint", srv.url, "--profile",
                      "unlimited-ocr", "--workers", "2", "--request-timeout", "10", *args, env=NO_KEY)
        log = srv.requests()
    assert res.returncode == 0, res.stderr
    notes = json.loads((tmp_path / name / "run.json").read_text())["current"]["reader"].get("notes", [])
    return res.stderr, log, notes


def fit_notes(notes: list[str]) -> list[str]:
    return [n for n in notes if "per request fit" in n]


def test_multi_page_on_vllm_gives_the_recipes_advice_once(tmp_path):
    pdf = make_coded_pdf(tmp_path / "a.pdf", list(range(1, 7)))
    err, log, notes = read(tmp_path, "vllm", pdf, 200_000, "--pages-per-request", "3")
    assert err.count(ADVICE) == 1
    said = next(line for line in err.splitlines() if ADVICE in line)
    assert said.startswith("--pages-per-request 3 on vLLM:") and "--server-kind sglang" in said
    assert notes == [said]
    assert sorted(r["n_images"] for r in log) == [3, 3]
    # one <image> per page in the text (point 1), as the server received it
    assert all(r["prompt"].count("<image>") == 3 for r in log)

    err, log, notes = read(tmp_path, "sglang", pdf, 200_000, "--pages-per-request", "3", "--server-kind", "sglang")
    assert ADVICE not in err and notes == []
    err, log, notes = read(tmp_path, "single", pdf, 200_000)
    assert ADVICE not in err and notes == []


def test_a_context_that_holds_one_page_is_said_with_the_dpi_that_holds_n(tmp_path):
    """Unlimited-OCR's 32 768-token context at its 300 dpi: a letter page costs ~10 900 image
    tokens + 8 192 for its answer, so two do not fit; the note names the dpi at which they do."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    pdf = make_coded_pdf(inputs / "a.pdf", list(range(1, 5)))
    make_coded_pdf(inputs / "b.pdf", [5, 6])
    err, log, notes = read(tmp_path, "r", inputs, 32_768, "--pages-per-request", "2")
    assert [r["n_images"] for r in log] == [1] * 6  # singles, as before — but said, once for both documents
    lines = [line for line in err.splitlines() if "per request fit" in line]
    assert len(lines) == 1 and fit_notes(notes) == lines, err
    line = lines[0]
    assert line.startswith("--pages-per-request 2: at 300 dpi a page costs ~10,856 image tokens + 8,192 for its "
                           "answer, so 1 page per request fits the 32,768-token context (the server's "
                           "max_model_len), not 2; 2 pages fit at "), line
    dpi = int(re.search(r"2 pages fit at (\d+) dpi or less \(--dpi (\d+)\)", line).group(1))
    assert 200 < dpi < 300

    # The dpi named is the largest at which two pages go together.
    _, log, notes = read(tmp_path, "at", pdf, 32_768, "--pages-per-request", "2", "--dpi", str(dpi))
    assert [r["n_images"] for r in log] == [2, 2] and fit_notes(notes) == []
    err, log, _ = read(tmp_path, "above", pdf, 32_768, "--pages-per-request", "2", "--dpi", str(dpi + 1))
    assert [r["n_images"] for r in log] == [1] * 4 and f"fit at {dpi} dpi" in err
    recs = finals(tmp_path / "at")
    assert all(r["text"] == expected_text(p) for (_, p), r in recs.items())


def test_when_the_answers_alone_fill_the_context_no_dpi_is_promised(tmp_path):
    pdf = make_coded_pdf(tmp_path / "a.pdf", list(range(1, 5)))
    err, log, notes = read(tmp_path, "r", pdf, 32_768, "--pages-per-request", "4")
    line = next(line for line in err.splitlines() if "per request fit" in line)
    assert line.endswith("their answers alone (4 × 8,192 tokens) fill it at any size: --pages-per-request 3 at most")
    assert fit_notes(notes) == [line] and all(r["n_images"] == 1 for r in log)
