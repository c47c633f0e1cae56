"""The gate's release step as a job (seed 000: nothing heavy on the login node), without SLURM: its
script, and a decision taken by hand standing. The job itself, on the real cluster: test_gate.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vlmocr.cluster.slurm.release_job import render_release_script
from vlmocr.cluster.slurm.script import SlurmOptions


def test_release_script_waits_on_the_gate_with_one_cpu_and_no_gpu(tmp_path):
    opts = SlurmOptions(partition="gpu-short", account="lucdh", qos="high", gpus_per_task="1", mem="64G",
                        time="8:00:00")
    text = render_release_script(tmp_path / "my run", "4711", opts, python="/opt/py env/bin/python")
    sbatch = [x for x in text.splitlines() if x.startswith("#SBATCH")]
    assert "#SBATCH --dependency=afterany:4711" in sbatch
    assert {"#SBATCH --partition=gpu-short", "#SBATCH --account=lucdh", "#SBATCH --qos=high",
            "#SBATCH --cpus-per-task=1", "#SBATCH --time=00:15:00"} <= set(sbatch)
    assert not any("gpus" in x or "--mem" in x or "8:00:00" in x for x in sbatch)
    assert f"exec '/opt/py env/bin/python' -m vlmocr.cluster.slurm.release_step '{tmp_path / 'my run'}'" in text
    # bash reads it: a syntax check of the generated script
    assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0


def test_a_decision_taken_by_hand_stands(tmp_path):
    """The job starts after someone ran `vlmocr slurm release` by hand: it says so and touches no
    job (here no scontrol/scancel exists on PATH: a call would fail the step)."""
    run = tmp_path / "run"
    (run / "slurm").mkdir(parents=True)
    decision = {"at": "2026-12-03T10:00:00+00:00", "action": "released", "message": "gate passed: by hand"}
    (run / "slurm" / "gate.json").write_text(json.dumps({"gate_job": "1", "bulk_job": "2", "max_cer": 0.1,
                                                         "truth": str(tmp_path), "decision": decision}))
    # the step's address, and its former one: release jobs submitted by an older vlmocr still
    # name vlmocr.cluster.release_step in their script and may start after an upgrade
    for module in ("vlmocr.cluster.slurm.release_step", "vlmocr.cluster.release_step"):
        res = subprocess.run([sys.executable, "-m", module, str(run)], capture_output=True,
                             text=True, check=False, env={"PATH": str(Path(sys.executable).parent)})
        assert res.returncode == 0, (module, res.stderr)
        assert "already decided at 2026-12-03T10:00:00+00:00: gate passed: by hand" in res.stdout
        assert json.loads((run / "slurm" / "gate.json").read_text())["decision"] == decision
