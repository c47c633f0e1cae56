"""The gate's release step as a SLURM job: nothing waits on the login node (seed 000).

``vlmocr slurm gate`` submits, beside the gate and the held bulk, a one-CPU job that depends on
the gate (``--dependency=afterany:GATE``). When the gate has ended — passed, failed, timed out
or cancelled — SLURM starts it, and it does what ``vlmocr slurm release RUN`` does by hand:
score the gate and release the held bulk (``scontrol release``) or cancel it (``scancel``),
recording the decision in RUN/slurm/gate.json. A decision someone already took by hand stands.

    RUN/slurm/release.sbatch        the script (self-contained, values shell-quoted)
    RUN/slurm/logs/release_%j.out   its log: the decision, in words

The job runs ``python -m vlmocr.cluster.slurm.release_step RUN`` (release_step.py: the step itself,
which needs the gate; this module only writes the script, so the gate can import it)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ...runfolder.record import now_iso
from .layout import SLURM_DIR
from .script import SlurmOptions, job_name_for, safe_sbatch_value

RELEASE_SCRIPT = "release.sbatch"
# Scoring a gate of a few hundred pages takes seconds; the limit only guards a hung file system.
RELEASE_TIME = "00:15:00"
# SLURM starts the job once the gate is terminal, but squeue may still list the gate as
# COMPLETING for a moment: the release step waits for that here, on the compute node.
RELEASE_WAIT = 120.0


def render_release_script(run_dir: Path, gate_job: str, options: SlurmOptions, python: str | None = None) -> str:
    """The sbatch script of the release step: one CPU, the partition, account and QOS of the
    gate (a cluster may only accept jobs with them), none of its GPUs."""
    q = shlex.quote
    lines = ["#!/bin/bash",
             f"# vlmocr release step, written by `vlmocr slurm gate` at {now_iso('seconds')}: scores the gate",
             "# when it has ended and releases or cancels the held bulk (as `vlmocr slurm release RUN`).",
             f"#SBATCH --job-name={safe_sbatch_value('--job-name', job_name_for(run_dir, 'release'))}",
             "#SBATCH --output=logs/release_%j.out",
             "#SBATCH --open-mode=append",
             f"#SBATCH --dependency=afterany:{safe_sbatch_value('--dependency', str(gate_job))}",
             f"#SBATCH --time={RELEASE_TIME}",
             "#SBATCH --cpus-per-task=1"]
    for opt, value in (("--partition", options.partition), ("--account", options.account), ("--qos", options.qos)):
        if value:
            lines.append(f"#SBATCH {opt}={safe_sbatch_value(opt, str(value))}")
    lines += ["set -u",
              "export PYTHONUNBUFFERED=1",
              f"echo \"== vlmocr release step: job ${{SLURM_JOB_ID:-?}} on $(hostname) at $(date -Is), gate job {q(str(gate_job))}\"",
              f"exec {q(python or sys.executable)} -m vlmocr.cluster.slurm.release_step {q(str(run_dir))}"]
    return "\n".join(lines) + "\n"


def write_release_script(run_dir: Path, gate_job: str, options: SlurmOptions, python: str | None = None) -> Path:
    path = Path(run_dir) / SLURM_DIR / RELEASE_SCRIPT
    (path.parent / "logs").mkdir(parents=True, exist_ok=True)
    path.write_text(render_release_script(run_dir, gate_job, options, python), encoding="utf-8")
    return path
