"""`vlmocr slurm submit --part NAME`: one RUN, several bulk jobs live at once, each with its own
documents, shards (RUN/shards/NAME-K), partition and options (issue 18, point 4).

Seed 000: "When the preferred partition is busy, split the manifest: in the 2026 run, the main
books ran on gpu_lucdh while the elementary books ran on a public A100 at the same time"; "In 2026
the last shard was split three ways, two parts on A100s and one on the A40s, so no part started
late and ran alone for hours"; "two were later moved to a free public A100 so they ran in parallel
with the first".

Real jobs on the private test cluster, reading coded PDFs from the test OpenAI server."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from support.slurm import cli, coded_corpus, records, submit_json
from vlmocr.inputs.sources import shard_of
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_png

pytestmark = pytest.mark.timeout(300)


def _manifest(path: Path, ids: list[str]) -> Path:
    path.write_text("doc_id,path\n" + "".join(f"{d},in/{d}.pdf\n" for d in ids))
    return path


def _cancel(*jobs: str | None) -> None:
    subprocess.run(["scancel", *[j for j in jobs if j]], capture_output=True)


def test_two_parts_run_at_once_and_merge_reads_every_page_once(slurm, tmp_path):
    """The main books as one part, the elementary books as another, submitted while the first
    waits held: both are live, both run, status lists both, merge holds every page once."""
    truth = coded_corpus(tmp_path / "in", docs=6, pages=2)
    main = _manifest(tmp_path / "main.csv", ["doc0", "doc1", "doc2", "doc3"])
    elementary = _manifest(tmp_path / "elementary.csv", ["doc4", "doc5"])
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(latency=0.02)) as srv:
        common = ("--out", str(run), "--time", "10", "--profile", "generic", "--endpoint", srv.url,
                  "--workers", "1")
        main_args = ("--manifest", str(main), "--part", "main", "--shards", "2", *common)
        first = submit_json(*main_args, "--hold", cwd=tmp_path)
        second = None
        try:
            assert first["part"] == "main" and first["held"]
            assert slurm.info(first["job_id"])["Reason"] == "JobHeldUser"
            # The first part is live (held): another part of the same RUN is accepted beside it.
            second = submit_json("--manifest", str(elementary), "--part", "elementary", "--shards", "1", *common,
                                 cwd=tmp_path)
            assert second["job_id"] and second["job_id"] != first["job_id"]
            assert slurm.state(first["job_id"]) == "PENDING"
            # … but not the same part twice (two writers per shard).
            again = cli("slurm", "submit", *main_args, cwd=tmp_path)
            assert again.returncode == 3
            assert f"previous bulk job of part main {first['job_id']} is still PENDING" in again.stderr
            # A document may be in one part only: refused, naming it and the part that holds it.
            both = _manifest(tmp_path / "both.csv", ["doc5"])
            refused = cli("slurm", "submit", "--manifest", str(both), "--part", "a100", "--shards", "1", *common,
                          cwd=tmp_path)
            assert refused.returncode == 3, refused.stderr
            message = refused.stderr.strip().splitlines()
            assert len(message) == 1 and "'doc5'" in message[0] and "part elementary" in message[0], message
            assert not (run / "staged" / "bulk-a100.csv").exists()
            # … the bulk without --part too.
            plain = cli("slurm", "submit", "--manifest", str(main), "--shards", "1", *common, cwd=tmp_path)
            assert plain.returncode == 3 and "'doc0' is already in part main" in plain.stderr
            subprocess.run(["scontrol", "release", first["job_id"]], check=True, capture_output=True)
            assert slurm.wait(first["job_id"], timeout=120) == "COMPLETED", slurm.task_states(first["job_id"])
            assert slurm.wait(second["job_id"], timeout=120) == "COMPLETED", slurm.task_states(second["job_id"])
        finally:
            _cancel(first["job_id"], second and second["job_id"])
        # Each part's shards read its own documents, in its own directories.
        for part, ids, n in (("main", {"doc0", "doc1", "doc2", "doc3"}, 2), ("elementary", {"doc4", "doc5"}, 1)):
            read = set()
            for k in range(1, n + 1):
                recs = records(run / "shards" / f"{part}-{k}")
                assert all(shard_of(r["doc_id"], n) == k for r in recs)
                read |= {r["doc_id"] for r in recs}
            assert read == ids
        assert not (run / "shards" / "1").exists()
        st = json.loads(cli("slurm", "status", str(run), "--json", cwd=tmp_path).stdout)
        assert [(p["part"], p["shards"], p["docs"], p["final"], p["pages"]) for p in st["parts"]] == [
            ("main", 2, 4, 8, 8), ("elementary", 1, 2, 4, 4)]
        assert [r["name"] for r in st["shards"]] == ["main-1", "main-2", "elementary-1"]
        assert [r["job"]["state"] for r in st["shards"]] == ["COMPLETED"] * 3
        assert st["totals"]["final"] == st["totals"]["pages"] == st["totals"]["ok"] == 12
        assert st["not_started"] == []
        table = cli("slurm", "status", str(run), cwd=tmp_path).stdout
        assert "part main: job" in table and "part elementary: job" in table and "elementary-1" in table
        merged = cli("merge", str(run), "--json", cwd=tmp_path)
        assert merged.returncode == 0, merged.stderr
        assert json.loads(merged.stdout)["duplicates"] == 0
        pages = Counter((r["doc_id"], r["page"]) for r in records(run / "merged"))
        assert pages == Counter({(d, p): 1 for d, ps in truth.items() for p in ps})
        texts = {(r["doc_id"], r["page"]): r["text"] for r in records(run / "merged")}
        assert texts == {(d, p): t for d, ps in truth.items() for p, t in ps.items()}
        assert {r["source"] for r in records(run / "merged")} == {str(tmp_path / "in" / f"{d}.pdf") for d in truth}
        # A part's resubmit resumes that part only: its complete shards are left out, the other
        # part's shards are not touched.
        before = (run / "shards" / "elementary-1" / "run.json").stat().st_mtime_ns
        resumed = submit_json(*main_args, cwd=tmp_path)
        assert resumed["job_id"] is None and resumed["skipped_shards"] == [1, 2]
        assert (run / "shards" / "elementary-1" / "run.json").stat().st_mtime_ns == before


def test_a_part_resubmitted_on_another_partition_reads_only_its_unfinished_shard(slurm, tmp_path):
    """Moving a part (seed 000: "two were later moved to a free public A100") is resubmitting it
    under its own name with other SLURM options: the complete shard stays out, the other resumes."""
    coded_corpus(tmp_path / "in", docs=4, pages=1)
    ids = ["doc0", "doc1", "doc2", "doc3"]
    manifest = _manifest(tmp_path / "last.csv", ids)
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(latency=0.02)) as srv:
        args = ("--manifest", str(manifest), "--part", "last", "--shards", "2", "--out", str(run), "--time", "10",
                "--profile", "generic", "--endpoint", srv.url, "--workers", "1")
        first = submit_json(*args, cwd=tmp_path)
        try:
            assert slurm.wait(first["job_id"], timeout=120) == "COMPLETED"
        finally:
            _cancel(first["job_id"])
        # Shard 2 is made to owe its pages again (its run interrupted: exit 130 in run.json).
        info_path = run / "shards" / "last-2" / "run.json"
        info = json.loads(info_path.read_text())
        info["summary"]["exit_code"] = 130
        info_path.write_text(json.dumps(info))
        shard1 = (run / "shards" / "last-1" / "pages.jsonl").read_bytes()
        moved = submit_json(*args, "--partition", slurm.partition, cwd=tmp_path)
        try:
            assert moved["skipped_shards"] == [1] and moved["array"] == "2"
            assert slurm.wait(moved["job_id"], timeout=120) == "COMPLETED"
        finally:
            _cancel(moved["job_id"])
    assert (run / "shards" / "last-1" / "pages.jsonl").read_bytes() == shard1
    merged = cli("merge", str(run), "--json", cwd=tmp_path)
    pages = Counter((r["doc_id"], r["page"]) for r in records(run / "merged"))
    assert json.loads(merged.stdout)["duplicates"] == 0 and pages == Counter({(d, 1): 1 for d in ids})


def test_the_gate_releases_a_part_submitted_held_after_it_and_cancels_it_on_failure(slurm, tmp_path):
    """A part added held (--hold) after `slurm gate` waits for the gate's decision with the gate's
    own bulk: released with it when the gate passes, cancelled with it when it fails."""
    gt = tmp_path / "gt"
    gt.mkdir()
    for code in (11, 12):
        make_coded_png(gt / f"g{code}.png", code)
        (gt / f"g{code}.txt").write_text(expected_text(code), encoding="utf-8")
    coded_corpus(tmp_path / "in", docs=4, pages=1)
    bulk = _manifest(tmp_path / "bulk.csv", ["doc0", "doc1"])
    extra = _manifest(tmp_path / "extra.csv", ["doc2", "doc3"])
    jobs: list[str] = []
    for outcome, config in (("passed", ServerConfig(latency=0.02)),
                            ("FAILED", ServerConfig(answer="static", static_text="not this page at all"))):
        run = tmp_path / f"run-{outcome}"
        with serve_in_process(config) as srv:
            common = ("--out", str(run), "--shards", "1", "--time", "10", "--profile", "generic",
                      "--endpoint", srv.url, "--workers", "1")
            res = cli("slurm", "gate", "--gate", "gt", "--truth", "gt", "--max-cer", "0.05", "--release-by-hand",
                      "--bulk-manifest", str(bulk), *common, "--json", cwd=tmp_path)
            assert res.returncode == 0, res.stderr
            sub = json.loads(res.stdout)
            jobs += [sub["gate_job"], sub["bulk_job"]]
            try:
                part = submit_json("--manifest", str(extra), "--part", "extra", "--hold", *common, cwd=tmp_path)
                jobs.append(part["job_id"])
                assert slurm.info(part["job_id"])["Reason"] == "JobHeldUser"
                decided = cli("slurm", "release", str(run), "--wait", "60", cwd=tmp_path)
                assert f"held part(s) extra (job {part['job_id']})" in decided.stdout, decided.stdout + decided.stderr
                decision = json.loads((run / "slurm" / "gate.json").read_text())["decision"]
                assert decision["held_parts"] == [{"part": "extra", "job_id": part["job_id"]}]
                if outcome == "passed":
                    assert decided.returncode == 0 and decision["action"] == "released"
                    assert slurm.wait(sub["bulk_job"], timeout=120) == "COMPLETED"
                    assert slurm.wait(part["job_id"], timeout=120) == "COMPLETED"
                else:
                    assert decided.returncode == 4 and decision["action"] == "cancelled"
                    assert slurm.wait(sub["bulk_job"], timeout=30) == "CANCELLED"
                    assert slurm.wait(part["job_id"], timeout=30) == "CANCELLED"
            finally:
                _cancel(*jobs)
        if outcome == "passed":
            assert cli("merge", str(run), cwd=tmp_path).returncode == 0
            assert {(r["doc_id"], r["page"]) for r in records(run / "merged")} == {(f"doc{d}", 1) for d in range(4)}
        else:
            assert not (run / "shards").exists()  # neither the bulk nor the part ever ran
