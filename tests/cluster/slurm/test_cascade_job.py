"""Issue 30: the CPU tiers (`--engine tesseract,rapidocr`), and a VLM as the last tier, as SLURM jobs — an array of two shards
on the single-node SLURM of scripts/slurm-up.sh, real Tesseract and RapidOCR on real pages
(tests/data/gt): each shard's records name the tiers that read their pages, `slurm status`
counts them, and resubmitting finds nothing left to read."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from support.components import GT, need
from support.slurm import cli, records, submit_json
from vlmocr.inputs.sources import shard_of
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

pytestmark = pytest.mark.timeout(400)


def _one_page_per_shard(tmp_path):
    """(scans folder, {doc_id: kind}, manifest): one document in each of two shards — a Fraktur page
    Tesseract reads well with German data (shard 1) and an English typescript read with German data
    (shard 2), which fails its signal."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = tmp_path / "in"
    scans.mkdir()
    docs = {}
    for i in range(40):
        for kind, page in (("fraktur", GT / "goethe" / "goethe_0014.png"),
                           ("english", GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg")):
            doc = f"{kind}{i}"
            if kind not in docs.values() and shard_of(doc, 2) == (1 if kind == "fraktur" else 2):
                docs[doc] = kind
                shutil.copy(page, scans / f"{doc}{page.suffix}")
    assert sorted(docs.values()) == ["english", "fraktur"]
    manifest = tmp_path / "m.csv"
    manifest.write_text("doc_id,path\n" + "".join(f"{d},in/{p.name}\n" for d in docs for p in scans.glob(f"{d}.*")))
    return scans, docs, manifest


def test_the_cascade_runs_as_an_array_of_shards(slurm, tmp_path):
    # Two documents in different shards: the Fraktur page (tier 1 only), the English one (on to tier 2).
    scans, docs, manifest = _one_page_per_shard(tmp_path)
    run = tmp_path / "run"
    args = ("--manifest", str(manifest), "--out", str(run), "--shards", "2", "--time", "10",
            "--engine", "tesseract,rapidocr", "--lang", "deu", "--workers", "1")
    job = submit_json(*args, cwd=scans)["job_id"]
    try:
        slurm.wait(job, timeout=300)
    finally:
        subprocess.run(["scancel", job], capture_output=True)
    # The English page ends for review after both tiers (German data): its task exits 2, "only
    # review pages remain", which SLURM calls FAILED; the Fraktur shard completes.
    assert slurm.task_states(job) == {"1": "COMPLETED", "2": "FAILED"}, slurm.task_states(job)
    log = next((run / "slurm" / "logs").glob("*_2.out")).read_text()
    assert "vlmocr exited 2: only review pages remain" in log, log[-2000:]
    tiers = {}
    for k in (1, 2):
        for rec in records(run / "shards" / str(k)):
            assert shard_of(rec["doc_id"], 2) == k
            tiers[docs[rec["doc_id"]]] = [t["engine"] for t in rec["tiers"]]
    assert tiers == {"fraktur": ["tesseract"], "english": ["tesseract", "rapidocr"]}
    status = json.loads(cli("slurm", "status", str(run), "--json", cwd=scans).stdout)
    totals = status["totals"]
    assert (totals["pages"], totals["final"], totals["ok"], totals["review"], totals["missing"]) == (2, 2, 1, 1, 0)
    # Resubmitted: nothing is owed — the complete shard, and the one whose review page a CPU
    # engine read (a VLM's review page may owe a retry ladder; a CPU reading is read no better
    # again: it used to be started again to read nothing).
    again = submit_json(*args, cwd=scans)
    assert again["skipped_shards"] == [1, 2] and again["job_id"] is None, again
    assert "nothing submitted" in again["note"] and "or 2 from a CPU reading" in again["note"]
    assert len(records(run / "shards" / "2")) == 1


def test_the_vlm_tier_runs_in_the_shards_and_sees_only_the_pages_the_cpu_fails(slurm, tmp_path):
    scans, docs, manifest = _one_page_per_shard(tmp_path)
    run = tmp_path / "run"
    # The VLM answers in German (the run's language): a reading that passes where Tesseract's did not.
    answer = "Sehr geehrter Herr, wir danken Ihnen für Ihren Brief vom 5. Mai und teilen Ihnen mit, dass " * 3
    with serve_in_process(ServerConfig(answer="static", static_text=answer)) as srv:
        res = submit_json("--manifest", str(manifest), "--out", str(run), "--shards", "2", "--time", "10",
                          "--engine", "tesseract", "--lang", "deu", "--vlm-tier", "--endpoint", srv.url,
                          "--workers", "1", cwd=scans)
        try:
            slurm.wait(res["job_id"], timeout=300)
        finally:
            subprocess.run(["scancel", res["job_id"]], capture_output=True)
        asked = len(srv.requests())
    assert asked == 1, slurm.task_states(res["job_id"])  # only the page Tesseract failed reached the GPU
    tiers = {docs[r["doc_id"]]: [t["engine"] for t in r.get("tiers") or [{"engine": r["engine"]}]]
             for k in (1, 2) for r in records(run / "shards" / str(k))}
    assert tiers == {"fraktur": ["tesseract"], "english": ["tesseract", "openai"]}


def test_the_vlm_tier_as_a_gpu_job_of_its_own_after_a_cpu_array(slurm, tmp_path):
    """Seed 000: "move a slow retry pass to an A100". The CPU array first (no endpoint), merged;
    then the VLM tier as a job of its own with `--cpu-tiers-from`: its shards take the CPU readings
    from the merged run (through the staged names of both runs), the GPU sees the one page the CPU
    failed, and no page is read by the CPU again."""
    scans, docs, manifest = _one_page_per_shard(tmp_path)
    cpu, tier = tmp_path / "cpu", tmp_path / "tier"
    common = ("--manifest", str(manifest), "--shards", "2", "--time", "10", "--engine", "tesseract", "--lang", "deu",
              "--workers", "1")
    first = submit_json(*common, "--out", str(cpu), cwd=scans)["job_id"]
    try:
        slurm.wait(first, timeout=300)
    finally:
        subprocess.run(["scancel", first], capture_output=True)
    merged = cli("merge", str(cpu), cwd=scans)
    assert merged.returncode in (0, 2), merged.stderr
    answer = "Sehr geehrter Herr, wir danken Ihnen für Ihren Brief vom 5. Mai und teilen Ihnen mit, dass " * 3
    with serve_in_process(ServerConfig(answer="static", static_text=answer)) as srv:
        res = submit_json(*common, "--out", str(tier), "--vlm-tier", "--endpoint", srv.url,
                          "--cpu-tiers-from", str(cpu), cwd=scans)
        try:
            slurm.wait(res["job_id"], timeout=300)
        finally:
            subprocess.run(["scancel", res["job_id"]], capture_output=True)
        asked = len(srv.requests())
    assert asked == 1, slurm.task_states(res["job_id"])
    taken = {}
    for k in (1, 2):
        info = json.loads((tier / "shards" / str(k) / "run.json").read_text())
        taken[k] = info["current"]["reader"]["vlm_tier"]["cpu_tiers_from"]
        assert (taken[k]["taken"], taken[k]["read_again"]) == (1, 0), taken
    recs = {docs[r["doc_id"]]: r for k in (1, 2) for r in records(tier / "shards" / str(k))}
    cpu_recs = {docs[r["doc_id"]]: r for k in (1, 2) for r in records(cpu / "shards" / str(k))}
    assert [t["engine"] for t in recs["english"]["tiers"]] == ["tesseract", "openai"]
    english = recs["english"]  # the CPU reading: in its tier entry, or the record's own when kept
    cpu_text = english["tiers"][0]["text"] if english["engine"] == "openai" else english["text"]
    assert cpu_text == cpu_recs["english"]["text"]
    assert english["tiers"][0]["seconds"] == cpu_recs["english"]["seconds"]
    assert recs["fraktur"]["text"] == cpu_recs["fraktur"]["text"] and recs["fraktur"]["engine"] == "tesseract"
