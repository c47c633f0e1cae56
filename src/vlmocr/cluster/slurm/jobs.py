"""The batch system behind one small interface (`BatchSystem`; `SLURM`: sbatch, squeue, sacct,
scontrol release, scancel) and RUN/slurm/jobs.json, the record of every submission and decision."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Protocol, Sequence

from ...exceptions import ExitCode, UsageError, VlmocrError
from ...runfolder.record import now_iso
from .layout import JOBS_FILE, SLURM_DIR, read_json, write_json
from .script import safe_sbatch_value

#: Job states after which a job does not change any more.
TERMINAL_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
    "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED",
})


class SlurmError(VlmocrError):
    """sbatch/scontrol/scancel failed."""

    exit_code = ExitCode.unavailable


def _run(cmd: Sequence[str], timeout: float = 60, cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except FileNotFoundError:
        raise SlurmError(f"{cmd[0]} not found: is this a SLURM login node?") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(cmd[:2])} did not answer within {timeout:g} s") from None


class BatchSystem(Protocol):
    """What vlmocr asks of a cluster's batch system: the whole seam. Submit a script (an array of
    shards, held, after another job), see a job's live tasks and finished jobs' outcomes, release
    held jobs, cancel jobs. `Slurm` below is the one there is; the job scripts it runs are
    script.py's. Everything else in cluster/slurm/ (staging, shards, the gate, status) asks
    `SLURM` and runs no command itself (held by tests/test_spine_counts.py)."""

    def submission(self, script: Path, *, array: str | None = None, hold: bool = False,
                   dependency: str | None = None) -> list[str]: ...

    def submit(self, script: Path, *, array: str | None = None, hold: bool = False,
               dependency: str | None = None) -> str: ...

    def tasks(self, job_id: str) -> list[dict[str, str]]: ...

    def finished(self, job_ids: Sequence[str]) -> dict[str, dict[str, str]]: ...

    def release(self, job_ids: Sequence[str]) -> tuple[bool, str]: ...

    def cancel(self, job_ids: Sequence[str]) -> tuple[bool, str]: ...

    def version(self) -> str | None: ...


class Slurm:
    """SLURM's commands: sbatch, squeue, sacct, scontrol release, scancel."""

    def submission(self, script: Path, *, array: str | None = None, hold: bool = False,
                   dependency: str | None = None) -> list[str]:
        """The submission of `script`, as it is run in the script's own directory (and recorded
        in jobs.json, and shown by a dry run): `array` the shards to run (None: the script's
        own #SBATCH --array), `hold` held until released, `dependency` e.g. afterany:JOB."""
        args = [f"--array={array}"] if array else []
        if hold:
            args.append("--hold")
        if dependency:
            args.append(f"--dependency={safe_sbatch_value('--dependency', dependency)}")
        return ["sbatch", "--parsable", *args, script.name]

    def submit(self, script: Path, *, array: str | None = None, hold: bool = False,
               dependency: str | None = None) -> str:
        """Submit `script` from its own directory (relative log paths); return the job id."""
        proc = _run(self.submission(script, array=array, hold=hold, dependency=dependency), cwd=script.parent)
        if proc.returncode != 0:
            raise SlurmError(f"sbatch failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
        job_id = proc.stdout.strip().splitlines()[-1].split(";")[0] if proc.stdout.strip() else ""
        if not job_id.isdigit():
            raise SlurmError(f"unexpected sbatch output: {proc.stdout!r} {proc.stderr!r}")
        return job_id

    def tasks(self, job_id: str) -> list[dict[str, str]]:
        """One dict per job or array task that squeue knows ([] once SLURM forgot the job)."""
        try:
            proc = _run(["squeue", "-h", "-r", "-t", "all", "-j", str(job_id), "-o", "%i|%A|%F|%K|%T|%r|%M|%N"],
                        timeout=30)
        except SlurmError:
            return []
        if proc.returncode != 0:
            return []
        out = []
        for line in proc.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) < 8:
                continue
            jid, raw, array_id, task, state, reason, elapsed, nodes = parts[:8]
            if array_id not in (str(job_id), "N/A") and raw != str(job_id):
                continue
            out.append({"id": jid, "job_id": raw, "array_job_id": array_id if array_id != "N/A" else "",
                        "task": task if task != "N/A" else "", "state": state, "reason": reason,
                        "elapsed": elapsed, "nodes": nodes, "source": "squeue"})
        return out

    def finished(self, job_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """State and exit code of finished jobs: ``sacct``, or ``sacct -c`` (job completion log)
        when accounting is off (plain sacct then exits 1)."""
        ids = [str(j) for j in job_ids if str(j).isdigit()]
        if not ids:
            return {}
        fields = "JobID,JobName,State,ExitCode,Elapsed"
        out: dict[str, dict[str, str]] = {}
        for variant in (["sacct"], ["sacct", "-c"]):
            try:
                proc = _run([*variant, "-n", "-P", "-j", ",".join(ids), "-o", fields], timeout=30)
            except SlurmError:
                return out
            if proc.returncode != 0:
                continue
            for line in proc.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) < 5:
                    continue
                jid = parts[0].split(".")[0]
                if not jid.replace("_", "").isdigit():
                    continue
                # The completion log keeps old ids after a reset: the last line is the newest.
                out[jid] = {"name": parts[1], "state": parts[2].split()[0], "exit_code": parts[3],
                            "elapsed": parts[4], "source": " ".join(variant)}
            return out
        return out

    def release(self, job_ids: Sequence[str]) -> tuple[bool, str]:
        proc = _run(["scontrol", "release", *map(str, job_ids)])
        return proc.returncode == 0, (proc.stderr or proc.stdout).strip()

    def cancel(self, job_ids: Sequence[str]) -> tuple[bool, str]:
        proc = _run(["scancel", *map(str, job_ids)])
        return proc.returncode == 0, (proc.stderr or proc.stdout).strip()

    def version(self) -> str | None:
        """`slurm 23.11.4` (a job's log says what ran it); None when it cannot tell."""
        try:
            proc = _run(["sbatch", "--version"], timeout=10)
        except SlurmError:
            return None
        return proc.stdout.strip() or None


SLURM: BatchSystem = Slurm()


def active_tasks(job_id: str) -> list[dict[str, str]]:
    """A job's tasks not yet ended."""
    return [t for t in SLURM.tasks(job_id) if t["state"] not in TERMINAL_STATES]


def load_jobs(run_dir: Path) -> dict[str, Any]:
    data = read_json(Path(run_dir) / SLURM_DIR / JOBS_FILE, None)
    if not isinstance(data, dict):
        data = {"schema": 1, "run_dir": str(Path(run_dir).resolve()), "jobs": [], "events": []}
    data.setdefault("jobs", [])
    data.setdefault("events", [])
    return data


def save_jobs(run_dir: Path, data: dict[str, Any]) -> None:
    write_json(Path(run_dir) / SLURM_DIR / JOBS_FILE, data)


def record_job(run_dir: Path, entry: dict[str, Any]) -> None:
    data = load_jobs(run_dir)
    data["jobs"].append(entry)
    save_jobs(run_dir, data)


def record_event(run_dir: Path, event: dict[str, Any]) -> None:
    data = load_jobs(run_dir)
    data["events"].append({"at": now_iso("seconds"), **event})
    save_jobs(run_dir, data)


def latest_job(run_dir: Path, kind: str, part: str | None = None) -> dict[str, Any] | None:
    """The last submission of `kind` (of part `part`: None is the bulk without --part)."""
    jobs = [j for j in load_jobs(run_dir)["jobs"]
            if j.get("kind") == kind and j.get("job_id") and j.get("part") == part]
    return jobs[-1] if jobs else None


def bulk_parts(run_dir: Path) -> list[str | None]:
    """The bulk jobs' parts jobs.json names, in order of first submission (None: no --part)."""
    seen: list[str | None] = []
    for j in load_jobs(run_dir)["jobs"]:
        if j.get("kind") == "bulk" and j.get("job_id") and j.get("part") not in seen:
            seen.append(j.get("part"))
    return seen


def check_not_active(run_dir: Path, kind: str, part: str | None = None) -> None:
    prev = latest_job(run_dir, kind, part)
    if prev is None:
        return
    live = active_tasks(prev["job_id"])
    if live:
        states = ", ".join(sorted({t["state"] for t in live}))
        what = f"{kind} job" if part is None else f"{kind} job of part {part}"
        raise UsageError(
            f"the previous {what} {prev['job_id']} is still {states} in {run_dir}: wait for it "
            f"or cancel it (scancel {prev['job_id']}) before submitting again")
