"""The check the SLURM tests end with: nothing a `vlmocr slurm` command started is left running on
the submitting side (support.slurm.submit_side_processes), while what runs inside a job is the
job's. It told them apart by walking up from each process to a `slurmstepd` — and stopped one step
short: slurmstepd is re-parented to init (its parent pid is 1), and the walk gave up at any
process whose parent is init before asking what it was. So a job's own process, while the job ran,
counted as left behind: tests/cluster/test_gate.py::test_gate_pass_releases_the_held_bulk failed
whenever the gate's `vlmocr run` had started by the time it looked (on a loaded machine, the
submitting command is slower and the job is running by then)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from support.slurm import submit_side_processes


def _stepd_parent_is_init() -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            if text[text.index("(") + 1:text.rindex(")")].startswith("slurmstepd"):
                return text[text.rindex(")") + 2:].split()[1] == "1"
    return False


def test_a_jobs_own_process_is_not_left_behind_but_one_on_this_side_is(slurm, tmp_path):
    marker = str(tmp_path / "run-marker")
    started = tmp_path / "started"
    job = slurm.submit(f"touch {started}\nexec {sys.executable} -c 'import time; time.sleep(60)' {marker}\n",
                       "--time", "2", cwd=tmp_path)
    try:
        end = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < end, slurm.info(job)
            time.sleep(0.1)
        time.sleep(0.5)  # the exec
        assert slurm.state(job) == "RUNNING"
        assert _stepd_parent_is_init()  # the case the walk missed
        assert submit_side_processes(marker) == []  # inside the job: the job's
        here = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
        try:
            end = time.monotonic() + 30
            while not (left_behind := submit_side_processes(marker)) and time.monotonic() < end:
                time.sleep(0.1)  # its command line is the new one a moment after exec
            (left,) = left_behind
            assert left.startswith(f"{here.pid}: ") and marker in left
        finally:
            here.kill()
            here.wait()
    finally:
        slurm.cancel(job)
