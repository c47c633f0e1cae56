"""The quality signal on real pages read by real engines: a garbled reading is `suspect` (review,
exit 2), a good one stays `ok`, good polytonic Greek and Fraktur are not flagged for their
script, a fallback that fails the rule is `suspect`, and a VLM's suspect answer climbs the
retry ladder. Pages: tests/data/gt (real scans with human transcriptions; README there)."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from support.cli import run_cli
from support.records import finals, read_records
from support.tessdata import need_tesseract
from vlmocr.evaluation.score import cer
from vlmocr.runfolder.record import STATUS_CODE, Status
from vlmocr.testing.fake_config import GOOD_LOGPROB
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf
from vlmocr.text import signal

DATA = Path(__file__).resolve().parents[1] / "data" / "gt"
GREEK = DATA / "zonaras" / "zonaras_0054.png"
FRAKTUR = DATA / "goethe" / "goethe_0014.png"




def truth(image: Path) -> str:
    return image.with_suffix(".txt").read_text(encoding="utf-8")


def ocr_run(tmp_path: Path, name: str, image: Path, lang: str) -> tuple[subprocess.CompletedProcess, dict]:
    res = run_cli("run", str(image), "--out", str(tmp_path / name), "--engine", "tesseract", "--lang", lang,
                  "--workers", "1")
    recs = finals(tmp_path / name)
    assert len(recs) == 1, res.stderr
    return res, next(iter(recs.values()))


@pytest.mark.tesseract
def test_greek_read_as_english_is_suspect_and_read_as_greek_is_ok(tmp_path):
    need_tesseract("eng", "grc")
    res, garbled = ocr_run(tmp_path, "eng", GREEK, "eng")
    assert cer(garbled["text"], truth(GREEK)) > 0.5  # really garbled: Greek letters read as Latin
    assert garbled["status"] == "suspect" and res.returncode == 2, res.stderr
    assert "review=1" in res.stdout and "ok=0" in res.stdout
    q = garbled["quality"]
    assert q["score"] < q["threshold"] and q["script"] == "Latn" and 0 < q["confidence"] < 1

    res, good = ocr_run(tmp_path, "grc", GREEK, "grc")
    assert cer(good["text"], truth(GREEK)) < 0.10
    # Good polytonic Greek: a modern word list knows only half its words, yet it is not flagged.
    assert good["status"] == "ok" and res.returncode == 0, (good["quality"], res.stderr)
    q = good["quality"]
    assert q["script"] == "Grek" and q["language"] == "grc" and q["known_words"] < 0.8
    assert q["score"] >= q["threshold"] > garbled["quality"]["score"]
    # The record keeps its field order: the signal right after the text.
    line = (tmp_path / "grc" / "pages.jsonl").read_text(encoding="utf-8")
    assert line.index('"text":') < line.index('"quality":') < line.index('"engine":')


@pytest.mark.tesseract
def test_good_fraktur_is_not_flagged_for_its_script(tmp_path):
    need_tesseract("frk")
    res, rec = ocr_run(tmp_path, "frk", FRAKTUR, "frk")
    assert cer(rec["text"], truth(FRAKTUR)) < 0.10
    assert rec["status"] == "ok" and res.returncode == 0, (rec["quality"], res.stderr)
    assert rec["quality"]["script"] == "Latf" and rec["quality"]["language"] == "de"


def test_rapidocr_records_its_line_confidences(tmp_path):
    res = run_cli("run", str(FRAKTUR), "--out", str(tmp_path / "r"), "--engine", "rapidocr", "--workers", "1")
    rec = next(iter(finals(tmp_path / "r").values()))
    q = rec["quality"]
    assert 0.5 < q["confidence"] <= 1 and q["text_vs_ink"] is not None and q["words"] > 20
    # The status it should have is told by the truth, not by the signal's own score: RapidOCR
    # reads this Fraktur page at ~6 % CER, a good reading, so it is `ok` and the run exits 0.
    assert cer(rec["text"], truth(FRAKTUR)) < 0.10
    assert rec["status"] == "ok" and res.returncode == 0, (q, res.stderr)
    assert q["score"] >= q["threshold"]


def vlm_fallback_run(tmp_path: Path, name: str, lang: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    # Every answer loops: the ladder runs out and the page falls back to Tesseract.
    with serve_in_process(ServerConfig(faults={"loop": {"rate": 1.0}})) as srv:
        res = run_cli("run", str(GREEK), "--out", str(tmp_path / name), "--endpoint", srv.url, "--engine", "openai",
                      "--ocr-engine", "tesseract", "--lang", lang, "--workers", "1", "--request-timeout", "10",
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    return res, read_records(tmp_path / name)


@pytest.mark.tesseract
def test_fallback_that_fails_the_rule_is_suspect_not_fallback(tmp_path):
    need_tesseract("eng", "grc")
    res, recs = vlm_fallback_run(tmp_path, "eng", "eng")
    last = recs[-1]
    assert [r["status"] for r in recs[:-1]] == ["loop"] * (len(recs) - 1)
    assert last["engine"] == "tesseract" and "fallback" in last["flags"]
    assert last["status"] == "suspect" and last["quality"]["score"] < last["quality"]["threshold"]
    assert res.returncode == 2 and "fallback=0" in res.stdout and "review=1" in res.stdout, res.stdout

    res, recs = vlm_fallback_run(tmp_path, "grc", "grc")
    assert recs[-1]["status"] == "fallback" and res.returncode == 0, res.stderr
    assert "fallback=1" in res.stdout


def test_vlm_ladder_climbs_a_suspect_answer(tmp_path):
    pdf = make_coded_pdf(tmp_path / "coded.pdf", [1, 2, 3])
    with serve_in_process(ServerConfig(faults={"garble": {"pages": [2], "times": 1}})) as srv:
        res = run_cli("run", str(pdf), "--out", str(tmp_path / "r"), "--endpoint", srv.url, "--workers", "1",
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
        asked = [r["extra"].get("logprobs") for r in srv.requests()]
    assert res.returncode == 0, res.stderr
    assert asked and all(asked)  # a vLLM server is asked for token log-probabilities
    recs = read_records(tmp_path / "r")
    p2 = [r for r in recs if r["page"] == 2]
    assert [r["status"] for r in p2] == ["suspect", "ok"]
    assert p2[0]["quality"]["confidence"] < 0.2 and p2[0]["quality"]["garbage_lines"] > 0.5
    assert p2[1]["text"] == expected_text(2) and "ladder:1" in p2[1]["flags"]
    assert p2[1]["quality"]["confidence"] == pytest.approx(math.exp(GOOD_LOGPROB), abs=1e-3)


def test_suspect_is_a_review_status_with_a_stable_code():
    assert Status.suspect.group == "review"
    # Appended last: the resume index's one-byte codes of existing runs keep their meaning.
    assert list(STATUS_CODE.values()) == list(range(1, len(Status) + 1))
    assert STATUS_CODE[Status.suspect] == len(Status) and STATUS_CODE[Status.bad_input] == 8


def test_signal_script_and_thresholds_come_from_the_data_file():
    rule = signal.load_thresholds()
    assert signal.script_of("grc") == "Grek" and signal.script_of("de", "frk") == "Latf"
    assert signal.script_of("en") == "Latn"
    assert rule.threshold("textlayer", "Latn") is None  # the text layer is not judged
    # VLM answers have their own rule (bench_signal_vlm.py); an engine with none gets the default
    assert rule.threshold("openai", "Latn") == rule.thresholds["openai"]["any"]
    assert rule.threshold("some-new-engine", "Latn") == rule.thresholds["default"]["any"]
    for engine in ("rapidocr", "tesseract"):
        assert rule.threshold(engine, "Latn") is not None and rule.threshold(engine, "Hebr") is not None
