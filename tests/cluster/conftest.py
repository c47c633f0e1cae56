"""Fixtures for tests against the real single-node SLURM started by ``scripts/slurm-up.sh``.

That cluster is private to the tests: its own slurm.conf, ports and state under
``/tmp/vlmocr-slurm`` (``VLMOCR_SLURM_DIR``). Every slurm command here and in the ``vlmocr`` the
tests start finds it through ``SLURM_CONF`` (set by ``scripts/test.sh``; when unset, this conftest
sets it to the private conf, so a plain ``pytest`` never talks to a system cluster).

The session fixture ``slurm`` checks that ``sinfo`` answers and the node is usable; if not, the
tests that use it are skipped (or fail when ``VLMOCR_TEST_STRICT=1``, as in CI). It yields a
:class:`Slurm` helper::

    def test_x(slurm, tmp_path):
        job = slurm.submit("#!/bin/bash\\necho hi > out.txt\\n", "--chdir", str(tmp_path))
        assert slurm.wait(job, timeout=30) == "COMPLETED"

Accounting is off on the test cluster, so plain ``sacct`` does not work; the helper reads
``scontrol show job`` (finished jobs stay there for ``MinJobAge=300`` s) and falls back to
``squeue``. Jobs the helper submitted and that are still queued or running at the end of the
session are cancelled. See docs/slurm-testing.md for timings and pitfalls.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.components import need
from support.slurm import cluster_logs, use_test_cluster

SLURM_CONF = use_test_cluster()  # before any sbatch/squeue/scontrol, in this process and its children

#: States after which a job will not change any more.
TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)
#: Node states in which jobs can start (or are running).
USABLE_NODE_STATES = ("idle", "mixed", "allocated", "completing")

_HERE = Path(__file__).resolve().parent


def _run(*cmd: str, timeout: float = 30, check: bool = False, cwd: str | os.PathLike | None = None):
    return subprocess.run(
        list(cmd), capture_output=True, text=True, timeout=timeout, check=check, cwd=cwd
    )


def _parse_oneliner(line: str) -> dict[str, str]:
    """Parse one line of ``scontrol -o show job``: ``Key=value Key=value ...``.

    Values may contain spaces (``Command=``, ``WorkDir=`` of hostile paths), so a field only ends
    where the next `` Key=`` begins.
    """
    fields: dict[str, str] = {}
    parts = re.split(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)", line.strip())
    for part in parts:
        key, sep, value = part.partition("=")
        if sep:
            fields[key] = value
    return fields


class SlurmError(RuntimeError):
    pass


class Slurm:
    """Small helper around sbatch / scontrol / squeue for tests."""

    def __init__(self, workdir: Path, node: str, partition: str):
        self.workdir = workdir
        self.node = node
        self.partition = partition
        self.submitted: list[str] = []
        self._n = 0

    # -- submitting -------------------------------------------------------------------------
    def submit(self, script_text: str, *args: str, cwd: str | os.PathLike | None = None) -> str:
        """Write *script_text* to a file and ``sbatch`` it with *args*; return the job id.

        A ``#!/bin/bash`` line is added if the script has none. The job's working directory (and so
        the default ``slurm-%j.out``) is *cwd*, else a per-session directory — never the repo.
        For an array job the returned id is the array's id (``SLURM_ARRAY_JOB_ID``).
        """
        self._n += 1
        if not script_text.startswith("#!"):
            script_text = "#!/bin/bash\n" + script_text
        script = self.workdir / f"job-{os.getpid()}-{self._n}.sbatch"
        script.write_text(script_text)
        script.chmod(0o755)
        run_dir = Path(cwd) if cwd is not None else self.workdir
        proc = _run("sbatch", "--parsable", *args, str(script), cwd=run_dir)
        if proc.returncode != 0:
            raise SlurmError(f"sbatch {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        job_id = proc.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise SlurmError(f"unexpected sbatch output: {proc.stdout!r} {proc.stderr!r}")
        self.submitted.append(job_id)
        return job_id

    # -- inspecting -------------------------------------------------------------------------
    def jobs(self, job_id: str) -> list[dict[str, str]]:
        """``scontrol show job`` records for *job_id* (one per array task; [] once purged)."""
        proc = _run("scontrol", "-o", "show", "job", str(job_id))
        if proc.returncode != 0:
            return []
        return [_parse_oneliner(line) for line in proc.stdout.splitlines() if line.strip()]

    def info(self, job_id: str) -> dict[str, str]:
        """The ``scontrol show job`` record of a single job (or the first task of an array)."""
        recs = self.jobs(job_id)
        if not recs:
            raise SlurmError(f"job {job_id} unknown to scontrol")
        return recs[0]

    def state(self, job_id: str) -> str | None:
        """Current state of a job, e.g. ``PENDING``, ``RUNNING``, ``COMPLETED``, ``TIMEOUT``.

        For an array id, the state of the whole array: a non-terminal state while any task has
        one (RUNNING before PENDING), else ``COMPLETED`` if all tasks completed, else the first
        task's failure state. ``None`` if neither scontrol nor squeue knows the job.
        """
        states = [rec.get("JobState", "") for rec in self.jobs(job_id)]
        if not states:
            proc = _run("squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T")
            states = [s.strip() for s in proc.stdout.splitlines() if s.strip()] if proc.returncode == 0 else []
        if not states:
            return None
        active = [s for s in states if s not in TERMINAL_STATES]
        if active:
            for preferred in ("COMPLETING", "RUNNING", "CONFIGURING"):
                if preferred in active:
                    return preferred
            return active[0]
        failed = [s for s in states if s != "COMPLETED"]
        return failed[0] if failed else "COMPLETED"

    def task_states(self, job_id: str) -> dict[str, str]:
        """``{array task id: state}`` for an array job (pending ranges appear as e.g. ``2-3``)."""
        return {rec.get("ArrayTaskId", "?"): rec.get("JobState", "") for rec in self.jobs(job_id)}

    def wait(self, job_id: str, timeout: float = 60, poll: float = 0.25) -> str:
        """Poll until the job (all tasks of an array) reached a final state; return it.

        Raises ``TimeoutError`` with the job record and the daemons' log tails. (We poll ourselves:
        ``sbatch --wait`` backs off and returns up to ~30 s after the job ended.)
        """
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.state(job_id)
            if state in TERMINAL_STATES:
                return state
            time.sleep(poll)
        raise TimeoutError(
            f"job {job_id} still {state} after {timeout:g} s\n"
            f"{_run('scontrol', 'show', 'job', str(job_id)).stdout}\n{self.diagnostics()}"
        )

    # -- acting -----------------------------------------------------------------------------
    def release(self, job_id: str) -> None:
        _run("scontrol", "release", str(job_id), check=True)

    def cancel(self, job_id: str, *args: str) -> None:
        _run("scancel", *args, str(job_id), check=True)

    def diagnostics(self, lines: int = 20) -> str:
        out = [_run("sinfo", "-N", "-l").stdout]
        for log in cluster_logs():
            try:
                tail = Path(log).read_text(errors="replace").splitlines()[-lines:]
            except OSError as exc:
                tail = [f"(cannot read: {exc})"]
            out.append(f"--- {log}\n" + "\n".join(tail))
        return "\n".join(out)


def _unavailable(reason: str) -> None:
    msg = (f"SLURM test cluster not available: {reason} (SLURM_CONF={SLURM_CONF}; start it with: "
           "sudo scripts/slurm-up.sh)")
    need(False, msg)


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        _unavailable("sinfo/sbatch not on PATH")
    if not SLURM_CONF.is_file():
        _unavailable(f"no {SLURM_CONF}")
    # 'scontrol ping' answers at once; sinfo retries for ~9 s when slurmctld is down.
    try:
        ping = _run("scontrol", "ping", timeout=20)
    except subprocess.TimeoutExpired:
        _unavailable("'scontrol ping' did not answer within 20 s")
    if "is UP" not in ping.stdout:
        _unavailable(f"slurmctld not up: {(ping.stdout + ping.stderr).strip().splitlines()[:1]}")
    try:
        proc = _run("sinfo", "-h", "-N", "-o", "%N %T %P", timeout=20)
    except subprocess.TimeoutExpired:
        _unavailable("sinfo did not answer within 20 s")
    if proc.returncode != 0 or not proc.stdout.strip():
        _unavailable(f"sinfo failed: {proc.stderr.strip() or proc.stdout.strip() or proc.returncode}")
    node, state, partition = proc.stdout.split()[:3]
    partition = partition.rstrip("*")
    if not state.rstrip("*~#!%$@^-").startswith(USABLE_NODE_STATES):
        _unavailable(f"node {node} is {state}")

    workdir = tmp_path_factory.mktemp("slurm")
    # Jobs run as the submitting user, but make the directory traversable in case they do not.
    workdir.chmod(0o755)
    helper = Slurm(workdir, node, partition)
    yield helper

    # Cancel anything this session left queued or running.
    leftover = [j for j in helper.submitted if helper.state(j) not in TERMINAL_STATES | {None}]
    if leftover:
        _run("scancel", *leftover)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests that use the `slurm` fixture need the daemons: mark them even if a module forgets.
    # (serve/ and the script-generation tests run without SLURM.)
    for item in items:
        if _HERE in Path(item.path).resolve().parents and "slurm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
