"""The openai engine against a real HTTP server on 127.0.0.1 that behaves as vLLM does and
injects faults. Its answers depend on the page image (a drawn page code), so a wrong,
swapped or dropped page shows up as wrong text."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from support.cli import run_cli
from support.documents import make_text_pdf
from support.records import finals, read_records
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf


@pytest.fixture
def coded(tmp_path) -> Path:
    return make_coded_pdf(tmp_path / "coded.pdf", list(range(1, 13)))


def vlm_run(doc: Path, run: Path, url: str, *extra: str, env: dict | None = None):
    return run_cli("run", str(doc), "--out", str(run), "--endpoint", url, "--request-timeout", "3",
                   "--workers", "2", *extra, env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", **(env or {})})


def test_every_page_read_with_its_own_text(tmp_path, coded):
    with serve_in_process(ServerConfig()) as srv:
        res = vlm_run(coded, tmp_path / "r", srv.url, "--profile", "generic")
        assert res.returncode == 0, res.stderr
        log = srv.requests()
    recs = finals(tmp_path / "r")
    assert len(recs) == 12
    for (doc, page), rec in recs.items():
        assert rec["status"] == "ok" and rec["engine"] == "openai" and rec["model"] == "test-model"
        assert rec["text"] == expected_text(page), page
        assert rec["tokens_in"] > 0 and rec["tokens_out"] > 0 and rec["finish_reason"] == "stop"
        assert rec["prompt_id"] and len(rec["image_sha256"]) == 64
    assert Counter(r["page"] for r in log) == Counter(range(1, 13))
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["key_material"]["reader"] == "openai" and info["key_material"]["server_kind"] == "vllm"
    assert info["current"]["reader"]["http_requests"] == 12


def test_unserved_model_and_dead_endpoint_exit_unavailable(tmp_path, coded):
    with serve_in_process(ServerConfig()) as srv:
        res = vlm_run(coded, tmp_path / "r", srv.url, "--model", "other-model")
    assert res.returncode == 5 and "does not serve model 'other-model'" in res.stderr
    res = vlm_run(coded, tmp_path / "r2", "http://127.0.0.1:9/v1")
    assert res.returncode == 5 and "unavailable" in res.stderr
    assert not (tmp_path / "r2" / "pages.jsonl").exists() or not read_records(tmp_path / "r2")


def test_transient_faults_are_retried_and_no_page_is_lost(tmp_path, coded):
    faults = {"429": {"rate": 0.15}, "500": {"rate": 0.1}, "drop": {"rate": 0.05}, "malformed": {"rate": 0.05},
              "timeout": {"pages": [4], "times": 1}}
    with serve_in_process(ServerConfig(faults=faults, hang_seconds=10, retry_after=0)) as srv:
        res = vlm_run(coded, tmp_path / "r", srv.url)
        stats = srv.stats()
    assert res.returncode == 0, res.stderr
    recs = finals(tmp_path / "r")
    assert sorted(p for _, p in recs) == list(range(1, 13))
    assert all(r["text"] == expected_text(p) and r["status"] == "ok" for (_, p), r in recs.items())
    # the faults were there to survive: the server answered some requests with them
    assert sum(n for outcome, n in stats["counts"].items() if outcome != "ok") > 0, stats["counts"]
    assert any("http_tries" in f for r in recs.values() for f in r["flags"])
    assert len(read_records(tmp_path / "r")) == 12  # transient faults never make extra records


def test_loop_climbs_the_ladder_then_succeeds(tmp_path, coded):
    faults = {"loop": {"pages": [3], "times": 2}, "truncate": {"pages": [7], "times": 1},
              "empty": {"pages": [9], "times": 1}}
    with serve_in_process(ServerConfig(faults=faults)) as srv:
        res = vlm_run(coded, tmp_path / "r", srv.url)
        temps = {(r.get("page"), r.get("temperature")) for r in srv.requests()}
    assert res.returncode == 0, res.stderr
    recs = read_records(tmp_path / "r")
    p3 = [r for r in recs if r["page"] == 3]
    assert [r["status"] for r in p3] == ["loop", "loop", "ok"]
    assert [r["attempt"] for r in p3] == [1, 2, 3]
    assert "ladder:2" in p3[-1]["flags"] and p3[-1]["text"] == expected_text(3)
    assert [r["status"] for r in recs if r["page"] == 7] == ["truncated", "ok"]
    assert [r["status"] for r in recs if r["page"] == 9] == ["empty", "ok"]
    assert (3, 0.3) in temps  # the second ladder step ran at the profile's second temperature
    md = (tmp_path / "r" / "docs" / "coded.md").read_text()
    assert md.count("<!-- page ") == 12 and "| loop |" not in md


def test_ladder_exhausted_falls_back_to_embedded_engine(tmp_path):
    pdf = make_coded_pdf(tmp_path / "c.pdf", [1, 2], with_text_layer=True)
    with serve_in_process(ServerConfig(faults={"loop": {"pages": [2]}})) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--engine", "openai")
    assert res.returncode == 0, res.stderr
    recs = read_records(tmp_path / "r")
    p2 = [r for r in recs if r["page"] == 2]
    assert [r["status"] for r in p2] == ["loop"] * 5 + ["fallback"]
    assert p2[-1]["engine"] == "textlayer" and "fallback" in p2[-1]["flags"]
    assert "fallback=1" in res.stdout
    assert "1 document(s) over --max-fallback 20% fallback pages: c" in res.stderr
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["summary"]["fallback_docs"] == ["c"]


def test_no_retry_then_retry_only_continues_the_ladder(tmp_path, coded):
    with serve_in_process(ServerConfig(faults={"loop": {"pages": [5], "times": 1}})) as srv:
        first = vlm_run(coded, tmp_path / "r", srv.url, "--no-retry")
        assert first.returncode == 2 and "review=1" in first.stdout
        n = len(srv.requests())
        second = vlm_run(coded, tmp_path / "r", srv.url, "--retry-only")
        assert second.returncode == 0, second.stderr
        assert len(srv.requests()) == n + 1  # only the review page was read again
    p5 = [r for r in read_records(tmp_path / "r") if r["page"] == 5]
    assert [(r["status"], r["attempt"]) for r in p5] == [("loop", 1), ("ok", 2)]


def test_a_final_refusal_is_review_not_a_resubmit_forever(tmp_path, coded):
    # Seed 000: "The client exits 2 when only review pages remain". A refusal whose ladder is
    # spent (here: --no-retry) asks a person, not SLURM: the same command again reads nothing
    # and must not say "resubmit" (exit 1) a second time.
    with serve_in_process(ServerConfig(faults={"refuse": {"pages": [5]}})) as srv:
        first = vlm_run(coded, tmp_path / "r", srv.url, "--no-retry")
        assert first.returncode == 2 and "review=1" in first.stdout and "failed=0" in first.stdout, first.stdout
        n = len(srv.requests())
        again = vlm_run(coded, tmp_path / "r", srv.url, "--no-retry")
        assert again.returncode == 2, again.stderr
        assert len(srv.requests()) == n  # nothing read again
    p5 = [r for r in read_records(tmp_path / "r") if r["page"] == 5]
    assert [r["status"] for r in p5] == ["refused"]


def test_oversized_prompt_fails_the_page_with_the_server_message(tmp_path):
    pdf = make_coded_pdf(tmp_path / "c.pdf", [1])
    prof = tmp_path / "tiny.toml"
    prof.write_text(
        'name = "tiny"\nprompt = "Read."\nmax_tokens = 100\n[image]\ndpi = 200\n[retry]\nshrink_on_overflow = false\n',
        encoding="utf-8")
    with serve_in_process(ServerConfig(max_model_len=500)) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", str(prof))
    assert res.returncode == 1
    (rec,) = finals(tmp_path / "r").values()
    # vLLM 0.32's words for a prompt alone over the context (api_utils.get_max_tokens).
    assert rec["status"] == "error" and "exceeds model's maximum context length (500)" in rec["error"]
    assert "context_overflow" in rec["flags"]


@pytest.mark.parametrize("rule,context", [("release", 1000), ("sum", 1300)])
def test_oversized_prompt_retries_once_smaller(tmp_path, rule, context):
    # 100 dpi letter page = 850x1100 px ≈ 1240 image tokens. vLLM 0.32 refuses the prompt alone
    # over a context of 1000; earlier releases refuse prompt + max_tokens over 1300, leaving the
    # answer 60 of the 200 tokens asked: under half, so the image shrinks rather than the answer.
    pdf = make_coded_pdf(tmp_path / "c.pdf", [1])
    prof = tmp_path / "small.toml"
    prof.write_text('name = "small"\nprompt = "Read."\nmax_tokens = 200\n[image]\ndpi = 100\n'
                    '[retry]\nshrink_on_overflow = true\nshrink_factor = 0.6\n', encoding="utf-8")
    with serve_in_process(ServerConfig(max_model_len=context, context_rule=rule)) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", str(prof))
    assert res.returncode == 0, res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert "shrunk_for_context" in rec["flags"] and rec["text"] == expected_text(1)


def test_a_page_far_over_the_context_is_shrunk_by_what_the_server_says_once(tmp_path):
    # Found by the lane's full sweep: unlimited-ocr's 300-dpi pages on a 4096-token server were
    # shrunk once by the profile's 0.75 (still 6053 tokens) and ended `error`, page after page and
    # resubmit after resubmit. The refusal says the prompt's size and the context: one retry, sized
    # to fit. 100 dpi ≈ 1240 image tokens; a context of 500: 0.75 leaves ~700, the fitted size ~400.
    pdf = make_coded_pdf(tmp_path / "c.pdf", [1])
    prof = tmp_path / "big.toml"
    prof.write_text('name = "big"\nprompt = "Read."\nmax_tokens = 60\n[image]\ndpi = 100\n'
                    '[retry]\nshrink_on_overflow = true\nshrink_factor = 0.75\n', encoding="utf-8")
    with serve_in_process(ServerConfig(max_model_len=500)) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", str(prof))
        log = srv.requests()
    assert res.returncode in (0, 2), res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["status"] != "error" and "shrunk_for_context" in rec["flags"], rec
    assert [r["status"] for r in log] == [400, 200]  # one retry, and it fitted


def test_a_budget_over_the_servers_context_is_capped_not_an_error_on_every_page(tmp_path):
    # vLLM 0.32 refuses max_tokens over max_model_len for every page alike (olmOCR 2's 8000 on a
    # 4096 server ended every page `error`, and the resubmit the same): asked for what fits, said once.
    pdf = make_coded_pdf(tmp_path / "c.pdf", [1, 2, 3])
    prof = tmp_path / "long.toml"
    prof.write_text('name = "long"\nprompt = "Read."\nmax_tokens = 8000\n[image]\ndpi = 72\n', encoding="utf-8")
    with serve_in_process(ServerConfig(max_model_len=4096)) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", str(prof))
        asked = {r["max_tokens"] for r in srv.requests()}
    assert res.returncode == 0, res.stderr
    assert asked == {4096} and all(r["status"] == "ok" for r in finals(tmp_path / "r").values())
    assert res.stderr.count("max_model_len) is 4096") == 1
    notes = json.loads((tmp_path / "r" / "run.json").read_text())["current"]["reader"]["notes"]
    assert any("asks for answers of up to 8000 tokens" in n for n in notes)


def test_a_budget_the_server_says_is_too_long_is_fitted_to_the_room_it_names(tmp_path):
    # A server that refuses prompt + max_tokens over its context and names the prompt's tokens
    # (vLLM before 0.32, SGLang): the page is asked once more with the room left; not a smaller image.
    pdf = make_coded_pdf(tmp_path / "c.pdf", [1])
    prof = tmp_path / "room.toml"
    prof.write_text('name = "room"\nprompt = "Read."\nmax_tokens = 3500\n[image]\ndpi = 72\n', encoding="utf-8")
    with serve_in_process(ServerConfig(max_model_len=4096, context_rule="sum")) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", str(prof))
        log = srv.requests()
    assert res.returncode == 0, res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["status"] == "ok" and "answer_fitted_to_context" in rec["flags"] and "shrunk_for_context" not in rec["flags"]
    assert [r["status"] for r in log] == [400, 200] and log[1]["max_tokens"] == 4096 - log[0]["prompt_tokens"]


def test_a_lone_surrogate_escape_in_an_answer_is_replaced_and_the_page_kept(tmp_path):
    # Valid JSON ("\\ud800" escaped), which orjson refuses: it was retried 7 times and recorded as
    # `error: not JSON` (issue 46, point 7). Now U+FFFD stands in its place, the page is read, and
    # the record says so.
    pdf = make_coded_pdf(tmp_path / "c.pdf", [1])
    answer = expected_text(1) + " \ud800 end"
    with serve_in_process(ServerConfig(answer="script", script={1: answer})) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", "generic")
        log = srv.requests()
    assert res.returncode in (0, 2), res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert len(log) == 1 and rec["status"] in ("ok", "suspect")
    assert rec["text"].endswith("\ufffd end") and "lone_surrogates_replaced" in rec["flags"]


def test_api_key_is_sent_but_never_written(tmp_path, coded):
    secret = "sk-test-very-secret-123"
    with serve_in_process(ServerConfig(api_key=secret)) as srv:
        res = vlm_run(coded, tmp_path / "r", srv.url, env={"VLMOCR_API_KEY": secret})
        assert res.returncode == 0, res.stderr
        bad = vlm_run(coded, tmp_path / "r2", srv.url, env={"VLMOCR_API_KEY": "wrong"})
        assert bad.returncode == 5
    for f in (tmp_path / "r").rglob("*"):
        if f.is_file():
            assert secret not in f.read_text(encoding="utf-8", errors="replace")
    assert secret not in res.stdout + res.stderr


def test_auto_uses_text_layer_and_sends_only_scans(tmp_path):
    digital = make_text_pdf(tmp_path / "digital.pdf", [["A born-digital page that needs no model at all, thanks."]])
    coded = make_coded_pdf(tmp_path / "scan.pdf", [1, 2])
    with serve_in_process(ServerConfig()) as srv:
        res = run_cli("run", str(digital), str(coded), "--out", str(tmp_path / "r"), "--endpoint", srv.url)
        assert res.returncode == 0, res.stderr
        assert len(srv.requests()) == 2
    recs = finals(tmp_path / "r")
    assert recs[("digital", 1)]["engine"] == "textlayer" and recs[("scan", 2)]["engine"] == "openai"


def test_changed_prompt_rereads(tmp_path, coded):
    with serve_in_process(ServerConfig()) as srv:
        assert vlm_run(coded, tmp_path / "r", srv.url).returncode == 0
        assert vlm_run(coded, tmp_path / "r", srv.url, "--concurrency", "3").returncode == 0
        assert len(srv.requests()) == 12
        # Another prompt is another reading: refused, naming the way on, until --reread (issue 27).
        refused = vlm_run(coded, tmp_path / "r", srv.url, "--profile", "qwen3-vl")
        assert refused.returncode == 3 and "--reread" in refused.stderr and len(srv.requests()) == 12
        assert vlm_run(coded, tmp_path / "r", srv.url, "--profile", "qwen3-vl", "--reread").returncode == 0
        assert len(srv.requests()) == 24
    keys = {r["key"] for r in read_records(tmp_path / "r")}
    assert len(keys) == 2


def test_grounded_output_becomes_blocks_and_clean_text(tmp_path):
    pdf = make_coded_pdf(tmp_path / "g.pdf", [1])
    grounded = ("<|ref|>title<|/ref|><|det|>[[100, 50, 900, 120]]<|/det|>\n# A Title\n\n"
                "<|ref|>image<|/ref|><|det|>[[120, 200, 880, 640]]<|/det|>\n\n"
                "<|ref|>text<|/ref|><|det|>[[100, 660, 900, 950]]<|/det|>\nBody text of the page.")
    with serve_in_process(ServerConfig(answer="script", script={1: grounded})) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", "deepseek-ocr", "--engine", "openai")
        body = srv.requests()[-1]
    assert res.returncode == 0, res.stderr
    assert body["finish_reason"] == "stop"
    (rec,) = finals(tmp_path / "r").values()
    assert "<|ref|>" not in rec["text"] and "<|det|>" not in rec["text"]
    assert "# A Title" in rec["text"] and "Body text of the page." in rec["text"]
    types = [(b["type"], b["bbox"]) for b in rec["blocks"]]
    assert ("image", [120, 200, 880, 640]) in types and ("title", [100, 50, 900, 120]) in types


def test_olmocr_front_matter_becomes_record_fields(tmp_path):
    pdf = make_coded_pdf(tmp_path / "o.pdf", [1])
    # (An answer saying the page is not upright is asked again turned: tests/reading/test_rotation_answer.py.)
    answer = ("---\nprimary_language: de\nis_rotation_valid: true\nrotation_correction: 0\n"
              "is_table: true\nis_diagram: false\n---\nEine Tabelle.")
    with serve_in_process(ServerConfig(answer="script", script={1: answer})) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", "olmocr-2", "--engine", "openai")
        req = srv.requests()[-1]
    assert res.returncode == 0, res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["text"] == "Eine Tabelle."
    assert rec["fields"]["language"] == "de" and rec["fields"]["rotation"] == 0 and rec["fields"]["rotation_valid"]
    assert rec["fields"]["is_table"] is True
    assert max(req["image_sizes"][0]) == 1288  # olmOCR's longest side


@pytest.mark.slow
def test_no_page_lost_under_a_mix_of_all_faults(tmp_path):
    codes = list(range(1, 61))
    pdfs = [make_coded_pdf(tmp_path / f"d{i}.pdf", codes[i * 15:(i + 1) * 15]) for i in range(4)]
    faults = {k: {"rate": 0.06} for k in ("429", "500", "drop", "malformed", "loop", "truncate", "empty", "refuse",
                                           "repetition")}
    faults["timeout"] = {"rate": 0.02}
    with serve_in_process(ServerConfig(faults=faults, hang_seconds=6, retry_after=0, slots=16, seed=7)) as srv:
        res = run_cli("run", *map(str, pdfs), "--out", str(tmp_path / "r"), "--endpoint", srv.url,
                      "--request-timeout", "2", "--concurrency", "16", "--max-retries", "8")
    assert res.returncode in (0, 2), res.stderr
    recs = read_records(tmp_path / "r")
    final = finals(tmp_path / "r")
    assert len(final) == 60
    page_of = {f"d{i}": codes[i * 15:(i + 1) * 15] for i in range(4)}
    for (doc, page), rec in final.items():
        code = page_of[doc][page - 1]
        if rec["status"] == "ok":
            assert rec["text"] == expected_text(code)
        else:
            assert rec["status"] in ("fallback", "loop", "truncated", "empty", "refused")
    attempts = Counter((r["doc_id"], r["page"]) for r in recs)
    for key, n in attempts.items():
        assert [r["attempt"] for r in recs if (r["doc_id"], r["page"]) == key] == list(range(1, n + 1))
    assert sum(1 for r in final.values() if r["status"] == "ok") >= 50


def test_adaptive_concurrency_shrinks_a_deep_queue_and_grows_into_free_slots(tmp_path):
    codes = list(range(1, 61))
    pdf = make_coded_pdf(tmp_path / "many.pdf", codes, size=(300, 400))
    with serve_in_process(ServerConfig(slots=2, latency=0.25)) as srv:
        # 24 requests queued on 2 slots wait up to 3 s before the gauges shrink the queue: more
        # on a loaded machine, so not the 3 s timeout of the other tests (CI met it once).
        res = vlm_run(pdf, tmp_path / "small", srv.url, "--concurrency", "24", "--request-timeout", "30")
    assert res.returncode == 0, res.stderr
    conc = json.loads((tmp_path / "small" / "run.json").read_text())["current"]["reader"]["concurrency"]
    assert conc["adaptive"] and conc["start"] == 24 and conc["min"] <= 8 and conc["final"] < 24, conc
    with serve_in_process(ServerConfig(slots=32, latency=0.25)) as srv:
        res = vlm_run(pdf, tmp_path / "big", srv.url, "--concurrency", "2")
    assert res.returncode == 0, res.stderr
    conc = json.loads((tmp_path / "big" / "run.json").read_text())["current"]["reader"]["concurrency"]
    assert conc["max"] > 4, conc
    with serve_in_process(ServerConfig(slots=2, latency=0.05)) as srv:
        res = vlm_run(pdf, tmp_path / "fixed", srv.url, "--concurrency", "24", "--fixed-concurrency")
    conc = json.loads((tmp_path / "fixed" / "run.json").read_text())["current"]["reader"]["concurrency"]
    assert not conc["adaptive"] and conc["final"] == 24


def test_multi_page_requests_split_on_the_separator(tmp_path):
    pdf = make_coded_pdf(tmp_path / "mp.pdf", list(range(1, 8)))
    with serve_in_process(ServerConfig(page_separator="\n<PAGE>\n", max_model_len=200_000)) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", "unlimited-ocr", "--pages-per-request", "3")
        log = srv.requests()
    assert res.returncode == 0, res.stderr
    assert [r["n_images"] for r in log] == [3, 3, 1] or sorted(r["n_images"] for r in log) == [1, 3, 3]
    recs = finals(tmp_path / "r")
    for (_, page), rec in recs.items():
        assert rec["text"] == expected_text(page) and rec["status"] == "ok"
    assert "multipage:3" in recs[("mp", 2)]["flags"]


def test_multi_page_split_mismatch_rereads_one_by_one(tmp_path):
    pdf = make_coded_pdf(tmp_path / "mp.pdf", [1, 2, 3, 4])
    with serve_in_process(ServerConfig(page_separator="\n\n", max_model_len=200_000)) as srv:  # no <PAGE>
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", "unlimited-ocr", "--pages-per-request", "4")
        log = srv.requests()
        single = vlm_run(pdf, tmp_path / "x", srv.url, "--profile", "generic", "--pages-per-request", "2")
    assert single.returncode == 3 and "at most 1 page(s) per request" in single.stderr
    assert res.returncode == 0, res.stderr
    assert sorted(r["n_images"] for r in log) == [1, 1, 1, 1, 4]
    recs = finals(tmp_path / "r")
    assert all(r["text"] == expected_text(p) and "multipage_split_mismatch" in r["flags"] for (_, p), r in recs.items())


def test_endpoint_going_away_stops_the_run_without_error_records(tmp_path):
    import signal as _signal
    import subprocess
    import sys
    import time

    pdf = make_coded_pdf(tmp_path / "many.pdf", list(range(1, 31)), size=(300, 400))
    server = subprocess.Popen([sys.executable, "-m", "vlmocr.testing.openai_server",
                               "--port", "0", "--slots", "2", "--latency", "0.3"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = server.stdout.readline().strip()
    run = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "vlmocr", "run", str(pdf), "--out", str(run), "--endpoint", url,
                             "--max-retries", "2", "--concurrency", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while (not (run / "pages.jsonl").exists() or len(read_records(run)) < 4) and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    server.send_signal(_signal.SIGKILL)
    server.wait()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, err
    recs = read_records(run)
    assert 4 <= len(recs) < 30 and all(r["status"] == "ok" for r in recs)
    assert "stopped answering" in err and "missing=" in out
    info = json.loads((run / "run.json").read_text())
    assert info["summary"]["attempts"] == {"1": len(recs)}


def test_multi_page_groups_fit_the_served_context(tmp_path):
    pdf = make_coded_pdf(tmp_path / "mp.pdf", list(range(1, 7)))
    with serve_in_process(ServerConfig(page_separator="\n<PAGE>\n", max_model_len=40_000)) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--profile", "unlimited-ocr", "--pages-per-request", "6")
        log = srv.requests()
    assert res.returncode == 0, res.stderr
    # 300 dpi letter pages cost ~10 700 image tokens + the output budget: two fit in 40 000.
    assert sorted(r["n_images"] for r in log) == [2, 2, 2]
    assert all(r.get("status", 200) == 200 for r in log)
    recs = finals(tmp_path / "r")
    assert all(r["text"] == expected_text(p) and "multipage:2" in r["flags"] for (_, p), r in recs.items())


def test_concurrency_counts_requests_at_the_server_while_pages_render_ahead(tmp_path):
    """--concurrency K means K requests at the server, no more (the render-ahead window
    holds encoded pages back), and K are reached."""
    pdf = make_coded_pdf(tmp_path / "many.pdf", list(range(1, 41)), size=(300, 400))
    with serve_in_process(ServerConfig(slots=64, latency=0.2)) as srv:
        res = vlm_run(pdf, tmp_path / "r", srv.url, "--concurrency", "4", "--fixed-concurrency")
        stats = srv.stats()
    assert res.returncode == 0, res.stderr
    assert stats["total"] == 40 and stats["max_present"] == 4, stats["max_present"]
    conc = json.loads((tmp_path / "r" / "run.json").read_text())["current"]["reader"]["concurrency"]
    assert conc["start"] == conc["final"] == 4 and conc["render_ahead"] == 4  # two per worker
