"""Issue 30, point 1: a VLM as the last tier. `run --engine tesseract --vlm-tier --endpoint URL`
reads every page with Tesseract and sends only the pages whose reading fails its signal to the VLM;
the better reading by the signal is the page's record, `tiers` lists both. A VLM tier that reads
well is adopted; one that answers fluent invented text is `suspect`, never `ok` (its words are
not in the CPU reading of the same page). Real Tesseract on real pages (tests/data/gt), a real
HTTP server speaking the OpenAI protocol."""

from __future__ import annotations

import json
import shutil

import pytest

from support.cli import run_cli
from support.components import GT, need
from support.documents import save_tier_scans
from support.records import finals, read_records
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

ENGLISH = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"
ART_OF_WAR = ("Sun Tzu said: The art of war is of vital importance to the State. It is a matter of life and "
              "death, a road either to safety or to ruin. Hence it is a subject of inquiry which can on no "
              "account be neglected. The art of war, then, is governed by five constant factors, to be taken "
              "into account in one's deliberations, when seeking to determine the conditions obtaining in the field.")
TRUTH = ENGLISH.with_suffix(".txt").read_text(encoding="utf-8")
NO_KEY = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    return save_tier_scans(GT, tmp_path_factory.mktemp("tiers"))


def _run(scans, out, srv, *more):
    return run_cli("run", str(scans), "--out", str(out), "--engine", "tesseract", "--lang", "eng", "--vlm-tier",
                   "--endpoint", srv.url, "--workers", "1", "--request-timeout", "30", *more, env=NO_KEY)


def test_the_vlm_reads_only_the_pages_the_cpu_fails_and_a_good_reading_is_kept(scans, tmp_path):
    run = tmp_path / "run"
    # A VLM that reads well: it answers the page's transcription.
    with serve_in_process(ServerConfig(answer="static", static_text=TRUTH)) as srv:
        res = _run(scans, run, srv)
        asked = len(srv.requests())
        again = _run(scans, run, srv)
        asked_again = len(srv.requests())
    assert res.returncode == 0, res.stderr
    recs = {doc: rec for (doc, _), rec in finals(run).items()}
    assert asked == 1  # the GPU saw one page of three
    for doc in ("clear", "blank"):
        assert recs[doc]["engine"] == "tesseract" and recs[doc]["status"] == "ok", recs[doc]
        assert "tiers" not in recs[doc] or [t["engine"] for t in recs[doc]["tiers"]] == ["tesseract"]
    english = recs["english"]
    assert [t["engine"] for t in english["tiers"]] == ["tesseract", "openai"]
    assert english["tiers"][0]["status"] == "suspect" and english["tiers"][1]["status"] == "ok"
    assert (english["engine"], english["status"]) == ("openai", "ok")
    assert english["engine_choice"].startswith("openai: tier 2 of 2, tesseract failed the signal; ")
    assert english["text"].strip() == TRUTH.strip()
    # Every tier's reading stays in the raw layer: the one not kept with its text.
    assert english["tiers"][0]["text"].strip() and "text" not in english["tiers"][1]
    info = json.loads((run / "run.json").read_text())
    assert info["summary"]["statuses"] == {"ok": 3}
    # Resumed: every page final, nothing read or sent again.
    assert again.returncode == 0 and asked_again == asked and len(read_records(run)) == 3, again.stderr


def test_invented_text_from_the_vlm_tier_is_never_ok(scans, tmp_path):
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="static", static_text=ART_OF_WAR)) as srv:
        res = _run(scans, run, srv, "--no-retry")
    assert res.returncode == 2, res.stderr  # the English page is for review
    english = {doc: rec for (doc, _), rec in finals(run).items()}["english"]
    assert english["status"] == "suspect"
    vlm = english["tiers"][1]
    assert vlm["engine"] == "openai" and vlm["status"] == "suspect"
    assert not any(r["status"] == "ok" and "Sun Tzu" in r["text"] for r in read_records(run))
    # The CPU's reading is kept: the answer's words are not on the page as Tesseract read it.
    assert english["engine"] == "tesseract" and "Sun Tzu" not in english["text"]
    assert any(f.startswith("vlm_tier_unsupported_by_tesseract:") for f in english["flags"]), english["flags"]
    assert "Sun Tzu" in english["tiers"][1]["text"] and "text" not in english["tiers"][0]  # kept, as it was answered


def test_the_vlm_tier_follows_a_cpu_engine(scans, tmp_path):
    res = run_cli("run", str(scans), "--out", str(tmp_path / "run"), "--engine", "openai", "--vlm-tier",
                  "--endpoint", "http://127.0.0.1:9/v1", env=NO_KEY)
    assert res.returncode == 3 and "--vlm-tier makes a VLM the last tier after a CPU engine" in res.stderr, res.stderr


def test_the_vlm_tier_as_a_pass_of_its_own_reads_only_what_the_cpu_run_left(scans, tmp_path):
    """Seed 000: "move a slow retry pass to an A100". A CPU run first (no endpoint); then the VLM
    tier over it with `--cpu-tiers-from`: the GPU sees the one page the CPU left for review, no
    page is read by the CPU again, and the folder is the one an inline `--vlm-tier` run writes."""
    cpu, tier, inline = tmp_path / "cpu", tmp_path / "tier", tmp_path / "inline"
    first = run_cli("run", str(scans), "--out", str(cpu), "--engine", "tesseract", "--lang", "eng",
                    "--workers", "1", env=NO_KEY)
    assert first.returncode == 2, first.stderr  # the English page is for review
    with serve_in_process(ServerConfig(answer="static", static_text=TRUTH)) as srv:
        res = _run(scans, tier, srv, "--cpu-tiers-from", str(cpu))
        asked = len(srv.requests())
        info = json.loads((tier / "run.json").read_text())
        again = _run(scans, tier, srv, "--cpu-tiers-from", str(cpu))
        asked_again = len(srv.requests())
        ref = _run(scans, inline, srv)
    assert res.returncode == 0, res.stderr
    assert asked == 1 and asked_again == 1 and again.returncode == 0, again.stderr
    assert info["current"]["reader"]["vlm_tier"]["cpu_tiers_from"] == {"run": str(cpu), "taken": 3, "read_again": 0}
    assert info["current"]["key"] == json.loads((inline / "run.json").read_text())["current"]["key"]
    cpu_recs, recs, ref_recs = finals(cpu), finals(tier), finals(inline)
    assert ref.returncode == 0 and set(recs) == set(ref_recs) == set(cpu_recs), ref.stderr
    for page, rec in recs.items():
        assert (rec["status"], rec["engine"], rec["text"]) == (ref_recs[page]["status"], ref_recs[page]["engine"],
                                                              ref_recs[page]["text"]), page
        assert rec["key"] == ref_recs[page]["key"] != cpu_recs[page]["key"]
    assert "warning: --cpu-tiers-from" not in res.stderr  # the same CPU tiers: nothing to say
    english = recs[("english", 1)]
    assert (english["engine"], english["status"]) == ("openai", "ok")
    # The CPU reading in its tiers is the CPU run's own, not a second reading.
    assert english["tiers"][0]["text"] == cpu_recs[("english", 1)]["text"]
    assert english["tiers"][0]["seconds"] == cpu_recs[("english", 1)]["seconds"]


def test_a_cpu_run_of_other_settings_is_read_again_and_bad_sources_are_refused(scans, tmp_path):
    cpu = tmp_path / "cpu"
    first = run_cli("run", str(scans), "--out", str(cpu), "--engine", "tesseract", "--lang", "eng+deu",
                    "--workers", "1", env=NO_KEY)
    assert first.returncode in (0, 2), first.stderr
    tier = tmp_path / "tier"
    with serve_in_process(ServerConfig(answer="static", static_text=TRUTH)) as srv:
        res = _run(scans, tier, srv, "--cpu-tiers-from", str(cpu))  # --lang eng: another CPU reading
        assert res.returncode == 0, res.stderr
        stats = json.loads((tier / "run.json").read_text())["current"]["reader"]["vlm_tier"]["cpu_tiers_from"]
        assert (stats["taken"], stats["read_again"]) == (0, 3)
        # Said before any page: reading again is right, only slow (bench_cascade.py once ran
        # its VLM tier after `tesseract,rapidocr` without --engine and re-read 100 pages).
        assert (f"warning: --cpu-tiers-from {cpu} was read with tesseract (--lang eng+deu), this run's CPU tiers "
                "read with tesseract (--lang eng): none of its readings can be taken") in " ".join(res.stderr.split())
        assert all(r["language"] == "eng" for r in finals(tier).values())
        own = _run(scans, tier, srv, "--cpu-tiers-from", str(tier))
        empty = tmp_path / "empty"
        empty.mkdir()
        nothing = _run(scans, tmp_path / "t2", srv, "--cpu-tiers-from", str(empty))
    assert own.returncode == 3 and "is the run's own folder" in own.stderr, own.stderr
    assert nothing.returncode == 3 and "no page records there" in nothing.stderr, nothing.stderr
    alone = run_cli("run", str(scans), "--out", str(tmp_path / "t3"), "--engine", "tesseract",
                    "--cpu-tiers-from", str(cpu), env=NO_KEY)
    assert alone.returncode == 3 and "give --vlm-tier" in alone.stderr, alone.stderr


@pytest.mark.parametrize("column, value, went_on, why", [
    ("language", "rus", "no data for rus", "has no data for the document's language rus"),
    ("hard", "tables", "hard: tables", "marked hard (tables)"),
])
def test_a_document_the_cpu_cannot_be_trusted_with_goes_to_the_vlm(scans, tmp_path, column, value, went_on, why):
    """Issue 30, point 1: a page goes on when the signal rejects it, or when the first tier lacks the
    document's script (its manifest's language: Russian, no Tesseract data here), or a person marked
    it hard (the manifest's `hard`: handwriting, tables … no signal of a CPU reading sees). The clear
    page, read with English data, passes its signal and still goes to the VLM, whose reading is kept."""
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"doc_id,path,{column}\nclear,{scans / 'clear.jpg'},{value}\nblank,{scans / 'blank.png'},\n",
                        encoding="utf-8")
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="static", static_text=TRUTH)) as srv:
        res = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--engine", "tesseract", "--lang", "eng",
                      "--vlm-tier", "--endpoint", srv.url, "--workers", "1", "--request-timeout", "30", env=NO_KEY)
        asked = len(srv.requests())
    assert res.returncode == 0, res.stderr
    recs = {doc: rec for (doc, _), rec in finals(run).items()}
    assert asked == 1  # the clear page only: the blank one passed, and is neither
    clear = recs["clear"]
    assert [t["engine"] for t in clear["tiers"]] == ["tesseract", "openai"]
    assert clear["tiers"][0]["status"] == "ok" and clear["tiers"][0]["went_on"] == went_on
    assert (clear["engine"], clear["status"]) == ("openai", "ok")
    assert why in clear["engine_choice"], clear["engine_choice"]
    assert recs["blank"]["engine"] == "tesseract"


def test_an_invented_passage_beside_the_page_s_text_is_never_ok(scans, tmp_path):
    """Issue 30, point 2: the VLM tier answers the page's transcription and goes on past the
    page's end with a passage Tesseract's reading has no trace of. Most of its words are the
    page's, so the share rule passes it; the passage does not."""
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="static", static_text=TRUTH + "\n" + ART_OF_WAR)) as srv:
        res = _run(scans, run, srv, "--no-retry")
    assert res.returncode == 2, res.stderr
    recs = read_records(run)
    english = {doc: rec for (doc, _), rec in finals(run).items()}["english"]
    assert english["status"] == "suspect" and english["tiers"][1]["status"] == "suspect"
    assert not any(r["status"] == "ok" and "Sun Tzu" in r["text"] for r in recs)
    # The answer is still the better reading of the page (Tesseract's failed its signal): kept,
    # for review, the flag saying why.
    assert english["engine"] == "openai", english["engine_choice"]
    (flag,) = [f for f in english["flags"] if f.startswith("unsupported_passage_by_tesseract:")]
    assert int(flag.rsplit(":", 1)[1]) >= 40
