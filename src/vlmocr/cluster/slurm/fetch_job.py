"""Model downloads as a CPU SLURM job: `vlmocr slurm fetch` (seed 000: "download weights once, in a
CPU job, into a shared cache, at a pinned revision"; nothing heavy, no download, on a login node).

On the login node this only checks and writes: the repo id, the pin (a 40-hex commit unless
``--allow-branch``; with a profile name, the profile's ``model`` and pinned ``revision``), the
endpoint URL and the destination (new, empty, or an earlier fetch of the same repo and commit),
all with ``vlmocr.settings.models.check_fetch_request`` and without a network call. The job runs
``vlmocr models fetch`` on a compute node with no GPU, online (``HF_HUB_OFFLINE=0``: a cluster-
wide offline setting would refuse the one job meant to download), with huggingface_hub's own
cache beside DIR unless ``HF_HOME`` / ``HF_HUB_CACHE`` are set::

    PARENT/DIR/                                   the model, and DIR/.vlmocr-model.json (the manifest)
    PARENT/.hf-home/                              HF_HOME when unset (same storage as DIR, not $HOME)
    PARENT/slurm/vlmocr-fetch-DIR.sbatch          the script (self-contained, values shell-quoted)
    PARENT/slurm/logs/vlmocr-fetch-DIR_%j.out     its log
    PARENT/slurm/jobs.json                        every fetch submitted from here (kind "fetch")

Its ``#SBATCH`` lines come from ``SlurmOptions.directives()`` (the values checked as for every
other job); no GPU, no signal (a fetch stopped at its limit resumes when submitted again)."""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from ...credentials import url_credentials
from ...exceptions import UsageError
from ...files import check_output_path
from ...redact import public_argv, public_url
from ...runfolder.record import JsonObject, now_iso
from ...settings.models import MANIFEST_NAME, check_fetch_request, is_commit
from .jobs import SLURM, active_tasks, load_jobs, record_job
from .layout import SLURM_DIR
from .script import SlurmOptions, job_name_for, safe_sbatch_value
from .submit import vlmocr_commit

FETCH_KIND = "fetch"
HF_HOME_NAME = ".hf-home"  # huggingface_hub's cache beside DIR when HF_HOME is unset


@dataclass
class FetchTarget:
    """What to fetch: a repo at a revision, and the profile they came from (if any)."""

    repo: str
    revision: str
    profile: str | None = None


def resolve_target(target: str, revision: str | None) -> FetchTarget:
    """``target`` is a repo id (ORG/NAME) or a profile (a name, or a .toml path): a profile gives
    its ``model`` and pinned ``revision``; one without a pin needs ``revision``. UsageError
    otherwise (an unknown profile, a profile naming no model, a --revision that contradicts the
    profile's pin)."""
    text = target.strip()
    if "/" in text and not text.endswith(".toml") and not os.path.isfile(text):
        if not revision:
            raise UsageError(f"--revision is required for the repo {text!r} (a full 40-hex commit)")
        return FetchTarget(text, revision)
    from ...profiles import load_profile

    try:
        profile = load_profile(text)
    except UsageError as exc:
        raise UsageError(f"{exc} (or give a repo id, ORG/NAME)") from None
    if not profile.model:
        raise UsageError(f"profile {profile.name!r} names no model: give the repo id instead of the profile")
    pinned = (profile.revision or "").strip()
    if not pinned and not revision:
        raise UsageError(f"profile {profile.name!r} pins no revision for {profile.model}: give --revision COMMIT")
    if pinned and revision and revision.strip().lower() != pinned.lower():
        raise UsageError(f"--revision {revision!r} differs from the revision profile {profile.name!r} pins "
                         f"({pinned}): give the repo id {profile.model} to fetch another revision")
    by_path = text.endswith(".toml") or os.sep in text  # as load_profile tells a path from a name
    return FetchTarget(profile.model, pinned or str(revision), os.path.abspath(text) if by_path else profile.name)


@dataclass
class FetchJob:
    repo: str
    revision: str
    dest: Path
    script: Path
    log: Path  # with %j for the job id
    hf_home: Path  # the default HF_HOME the job uses when none is set
    command: list[str]  # argv after the python
    profile: str | None = None
    job_id: str | None = None
    submission: list[str] = field(default_factory=list)  # the sbatch command, as typed in the script's folder

    def follow_up(self) -> list[str]:
        """What to run once the job has ended."""
        q = shlex.quote
        pin = self.revision if is_commit(self.revision) else "COMMIT"  # a branch: the manifest has the commit
        lines = [f"vlmocr models status {q(str(self.dest))} --verify"]
        serve = self.profile or "PROFILE"
        lines.append(f"VLMOCR_SERVE_MODEL_PATH={q(str(self.dest))} VLMOCR_SERVE_REVISION={pin} "
                     f"vlmocr slurm submit … --serve {q(serve)}")
        return lines

    def as_dict(self) -> JsonObject:
        return {"job_id": self.job_id, "repo": self.repo, "revision": self.revision, "profile": self.profile,
                "dir": str(self.dest), "manifest": str(self.dest / MANIFEST_NAME), "script": str(self.script),
                "log": str(self.log), "hf_home": str(self.hf_home), "command": self.command, "sbatch": self.submission,
                "next": self.follow_up()}


def fetch_command(repo: str, revision: str, dest: Path, *, endpoint: str | None, include: Sequence[str],
                  allow_branch: bool) -> list[str]:
    """The `vlmocr models fetch` argv (after ``python -m vlmocr``) the job runs."""
    cmd = ["models", "fetch", repo, "--revision", revision, "--to", str(dest)]
    if endpoint:
        cmd += ["--endpoint", endpoint]
    for pattern in include:
        cmd += ["--include", pattern]
    if allow_branch:
        cmd.append("--allow-branch")
    return cmd


def render_fetch_script(job: FetchJob, options: SlurmOptions, python: str, job_name: str) -> str:
    """The sbatch script: the checked ``#SBATCH`` lines of ``options`` (a CPU job: no GPU, no
    signal) and one `vlmocr models fetch`; every other value shell-quoted."""
    q = shlex.quote
    cpu_only = replace(options, gpus_per_task=None, signal_lead=0, max_running=None)
    commit = re.sub(r"[^0-9a-f]", "", vlmocr_commit() or "")[:40] or "unknown"
    lines = ["#!/bin/bash",
             f"# vlmocr fetch job, written by `vlmocr slurm fetch` at {now_iso('seconds')} (vlmocr commit "
             f"{commit}):",
             "# downloads one model at a pinned revision on a CPU node; GPU jobs then serve it offline.",
             "# To submit it again (it resumes), `sbatch` this file from its own directory (the log path is relative).",
             f"#SBATCH --job-name={safe_sbatch_value('--job-name', job_name)}",
             f"#SBATCH --output=logs/{safe_sbatch_value('--output', job.log.name)}",
             "#SBATCH --open-mode=append"]
    lines += [f"#SBATCH {directive}" for directive in cpu_only.directives()]
    argv = " ".join(q(a) for a in job.command)
    lines += [
        "set -u",
        f"PYTHON={q(python)}",
        f"DEFAULT_HF_HOME={q(str(job.hf_home))}",
        "export PYTHONUNBUFFERED=1 HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1 HF_HUB_DISABLE_PROGRESS_BARS=1",
        "# The one job meant to reach the Hub: a cluster-wide HF_HUB_OFFLINE=1 would refuse it.",
        "export HF_HUB_OFFLINE=0 TRANSFORMERS_OFFLINE=0",
        "# huggingface_hub's cache (locks, partial downloads) on DIR's storage, not a small $HOME, unless set.",
        'export HF_HOME="${HF_HOME:-$DEFAULT_HF_HOME}"',
        'export HF_HUB_CACHE="${HF_HUB_CACHE:-$HF_HOME/hub}"',
        'echo "== vlmocr fetch: job ${SLURM_JOB_ID:-?} on $(hostname) at $(date -Is); HF_HOME=$HF_HOME"',
        f'echo "== "{q(f"{job.repo}@{job.revision} -> {job.dest}")}',
        f'"$PYTHON" -m vlmocr {argv}',
        "rc=$?",
        'echo "== $(date -Is) vlmocr models fetch exited $rc"',
        'if [ "$rc" -eq 0 ]; then',
        *[f"  echo {q('== next: ' + line)}" for line in job.follow_up()],
        "fi",
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"


def _check_not_fetching(parent: Path, dest: Path) -> None:
    """Refuse a second job into the same DIR while the first is queued or running."""
    jobs = [j for j in load_jobs(parent)["jobs"]
            if j.get("kind") == FETCH_KIND and j.get("dir") == str(dest) and j.get("job_id")]
    if jobs and (live := active_tasks(jobs[-1]["job_id"])):
        raise UsageError(f"fetch job {jobs[-1]['job_id']} into {dest} is still {live[0]['state']}: wait for it "
                         f"or cancel it (scancel {jobs[-1]['job_id']})")


def submit_fetch(target: str, dest: str | os.PathLike[str], *, revision: str | None = None,
                 endpoint: str | None = None, include: Sequence[str] = (), allow_branch: bool = False,
                 options: SlurmOptions | None = None, python: str | None = None, dry_run: bool = False,
                 argv: Sequence[str] | None = None) -> FetchJob:
    """Check the fetch here, write PARENT/slurm/<job name>.sbatch, submit it (unless ``dry_run``)
    and record it in PARENT/slurm/jobs.json; return the job. No network call: the Hub is the
    job's business. Raises UsageError (exit 3) before anything is written or submitted."""
    options = options or SlurmOptions()
    if options.gpus_per_task:
        raise UsageError("--gpus-per-task: a fetch is a CPU job (no GPU)")
    if endpoint and url_credentials(endpoint) is not None:
        # The Hub client takes a token (HF_TOKEN), not a password in a URL: one in --endpoint would
        # only land in the job script, on shared storage.
        raise UsageError(f"--endpoint {public_url(endpoint)}: a user and password in the URL would be written into "
                         "the job script; give the Hub token through HF_TOKEN in the job's environment instead")
    goal = resolve_target(target, revision)
    req = check_fetch_request(goal.repo, goal.revision, dest, endpoint=endpoint, allow_branch=allow_branch)
    check_output_path(req.dest, "--to", folder=True)
    parent = req.dest.parent
    slurm_dir = parent / SLURM_DIR
    check_output_path(slurm_dir, "--to (its parent's slurm folder)", folder=True)
    job_name = job_name_for(req.dest, FETCH_KIND)
    command = fetch_command(req.repo, req.revision, req.dest, endpoint=endpoint and req.endpoint,
                            include=list(include), allow_branch=allow_branch)
    job = FetchJob(repo=req.repo, revision=req.revision, dest=req.dest, script=slurm_dir / f"{job_name}.sbatch",
                   log=slurm_dir / "logs" / f"{job_name}_%j.out", hf_home=parent / HF_HOME_NAME,
                   command=command, profile=goal.profile)
    text = render_fetch_script(job, options, python or sys.executable, job_name)  # checks the #SBATCH values
    if not dry_run:
        _check_not_fetching(parent, req.dest)
    (slurm_dir / "logs").mkdir(parents=True, exist_ok=True)
    job.script.write_text(text, encoding="utf-8")
    job.script.chmod(0o755)
    job.submission = SLURM.submission(job.script)
    if dry_run:
        return job
    job.job_id = SLURM.submit(job.script)
    job.log = job.log.with_name(job.log.name.replace("%j", job.job_id))
    record_job(parent, {
        "kind": FETCH_KIND, "job_id": job.job_id, "repo": job.repo, "revision": job.revision,
        "profile": job.profile, "dir": str(job.dest), "endpoint": endpoint and req.endpoint,
        "include": list(include) or None, "script": str(job.script.relative_to(parent)),
        "log": str(job.log.relative_to(parent)), "submitted_at": now_iso("seconds"), "sbatch": job.submission,
        "argv": public_argv(list(argv if argv is not None else sys.argv[1:])), "cwd": str(Path.cwd()),
    })
    return job
