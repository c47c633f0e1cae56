"""`vlmocr slurm status` when SLURM's queue has forgotten the jobs (no SLURM needed: squeue and sacct
are stand-ins)."""

from __future__ import annotations

import json
import os

import pytest

from support.slurm import cli, coded_corpus, write_exe
from vlmocr.cluster.slurm.jobs import record_job
from vlmocr.cluster.slurm.submit import stage_documents

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
    assert st["totals"]["pages"] == 3 and st["totals"]["missing"] == 3  # nothing read yet: all owed
