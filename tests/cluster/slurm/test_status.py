"""`vlmocr slurm status` when SLURM's queue has forgotten the jobs (no SLURM needed: squeue and sacct
are stand-ins)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.slurm import cli, coded_corpus, write_exe
from vlmocr.cluster.slurm.jobs import record_job
from vlmocr.cluster.slurm.submit import stage_documents, staged_documents
from vlmocr.inputs.sources import shard_of

pytestmark = pytest.mark.timeout(300)


def test_status_falls_back_to_the_task_files_and_sacct_c(tmp_path):
    """squeue has forgotten the jobs (MinJobAge); a task killed without its end record is looked
    up in sacct, and with accounting off (sacct exits 1) in the completion log (sacct -c)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_exe(bin_dir / "squeue", "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n")
    write_exe(bin_dir / "sacct", """#!/bin/sh
case " $* " in
  *" -c "*) echo "31|vlmocr-bulk-run|TIMEOUT|0:0|00:01:30" ;;
  *) echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1 ;;
esac
""")
    coded_corpus(tmp_path / "in", docs=3, pages=1)
    run = tmp_path / "run"
    stage_documents(run, "bulk", [str(tmp_path / "in")])
    record_job(run, {"kind": "bulk", "job_id": "30", "array": "1-2", "shards": 2})
    tasks = run / "slurm" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "bulk-1.json").write_text(json.dumps({"task": "bulk-1", "job_id": "31", "state": "RUNNING"}))
    (tasks / "bulk-2.json").write_text(json.dumps({"task": "bulk-2", "job_id": "32", "state": "FINISHED",
                                                   "exit_code": 0}))
    res = cli("slurm", "status", str(run), "--json", cwd=tmp_path, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    jobs = {r["shard"]: r["job"] for r in st["shards"]}
    assert (jobs[1]["state"], jobs[1]["source"]) == ("TIMEOUT", "sacct -c")
    assert (jobs[2]["state"], jobs[2]["source"]) == ("COMPLETED", "task file")
    # Nothing read yet: no shard started, so no PDF was opened to count its pages (seed 000).
    assert st["not_started"] == [1, 2] and st["totals"]["final"] == 0
    assert [r["pages"] for r in st["shards"]] == [None, None]


def test_status_reads_the_shards_summary_not_their_records(tmp_path):
    """Seed 000, "nothing heavy on the login node": a shard's counts come from the summary.json its
    run keeps (the records are not parsed, unstarted PDFs not opened); a run older than summary.json
    is counted from its records, and status says so."""
    coded_corpus(tmp_path / "in", docs=6, pages=2)
    (tmp_path / "in" / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    run = tmp_path / "run"
    stage_documents(run, "bulk", [str(tmp_path / "in")])
    record_job(run, {"kind": "bulk", "job_id": "30", "array": "1-3", "shards": 3})
    manifest = str(run / "staged" / "bulk.csv")
    for k in (1, 2):
        res = cli("run", "--manifest", manifest, "--shard", f"{k}/3", "--engine", "textlayer",
                  "--out", str(run / "shards" / str(k)), cwd=tmp_path)
        # Image pages read by their (missing) text layer are `empty`: review, exit 2, whether or
        # not the shard also holds the broken file (an unreadable input is the outcome only
        # when nothing else is owed).
        assert res.returncode == 2, res.stderr
    env = {"PATH": f"{_no_squeue(tmp_path)}:{os.environ['PATH']}"}
    slow = json.loads(cli("slurm", "status", str(run), "--json", cwd=tmp_path, env=env).stdout)
    # What the run wrote equals what the records say (the slow path, forced by removing the summaries).
    summaries = {k: (run / "shards" / str(k) / "summary.json").read_text() for k in (1, 2)}
    for k in (1, 2):
        assert json.loads(summaries[k])["state"] == "finished"
        (run / "shards" / str(k) / "summary.json").unlink()
    old = json.loads(cli("slurm", "status", str(run), "--json", cwd=tmp_path, env=env).stdout)
    assert old["from_records"] == [1, 2] and slow["from_records"] == []
    keys = ("pages", "final", "ok", "fallback", "review", "failed", "missing", "exit_code")
    assert [{k: r[k] for k in keys} for r in slow["shards"][:2]] == [{k: r[k] for k in keys} for r in old["shards"][:2]]
    # Two pages per coded PDF, one (page 0, bad_input) for the broken file, in shards 1 and 2.
    started = [d for d in staged_documents(run, "bulk") if shard_of(d.doc_id, 3) in (1, 2)]
    broken = sum(1 for d in started if Path(d.path).resolve().name == "broken.pdf")
    assert slow["totals"]["pages"] == 2 * (len(started) - broken) + broken
    assert slow["totals"]["final"] == slow["totals"]["pages"] > 0
    assert slow["totals"]["bad_inputs"] == broken
    # Fast path: the records are not read. Garbage in pages.jsonl changes nothing once the summary is back.
    for k in (1, 2):
        (run / "shards" / str(k) / "summary.json").write_text(summaries[k])
        (run / "shards" / str(k) / "pages.jsonl").write_text("not json\n")
    fast = json.loads(cli("slurm", "status", str(run), "--json", cwd=tmp_path, env=env).stdout)
    assert fast["totals"] == slow["totals"] and fast["from_records"] == []
    assert fast["not_started"] == [3] and fast["shards"][2]["pages"] is None
    text = cli("slurm", "status", str(run), cwd=tmp_path, env=env).stdout
    assert "not started, pages not counted yet: shard(s) 3" in text and "slow" not in text


def _no_squeue(tmp_path):
    """squeue and sacct that know no job (the queue forgot them): status from the run's files only."""
    bin_dir = tmp_path / "bin-empty"
    bin_dir.mkdir(exist_ok=True)
    write_exe(bin_dir / "squeue", "#!/bin/sh\nexit 0\n")
    write_exe(bin_dir / "sacct", "#!/bin/sh\nexit 0\n")
    return bin_dir
