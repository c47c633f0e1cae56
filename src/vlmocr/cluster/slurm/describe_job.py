"""`vlmocr slurm describe RUN|--library LIB --serve PROFILE`: one job (not an array) that describes
the figures of a run, or of a library's documents in the runs they came from, against the
describing model's own server, started on the node and stopped with the job: the job runs
`vlmocr describe … --serve PROFILE` in the harness of the other scripts (`submit.submit_single`:
offline environment, per-job caches, ``--signal=B:TERM@lead`` forwarded to vlmocr).

Everything the node would refuse is refused first, on the login node, before a file is
written: an ``--endpoint`` beside ``--serve``, an unknown profile, values out of range, a RUN that
is no run (here), a LIB without a catalog (by `vlmocr slurm describe`). Whether figures are owed is left to the node (it reads every
run's pages; nothing heavy runs on the login node): with none owed the job starts no server.

The script, its log and jobs.json go under HOME/slurm, HOME being ``--out DIR``, else RUN, else
LIB (a library's describe writes into it anyway: it publishes the described documents again)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ...exceptions import UsageError
from ...runfolder.record import JsonObject
from ...runfolder.rundir import RunDir
from ...runfolder.store import PAGES_FILE
from ...settings.figures import DescribeOptions
from .jobs import check_not_active
from .script import SlurmOptions
from .submit import submit_single

KIND = "describe"


def describe_home(run_dir: Path | None, library: Path | None, out: Path | None) -> Path:
    """Where the job's slurm/ folder goes: --out, else RUN, else LIB."""
    home = out or run_dir or library
    assert home is not None
    return Path(home).resolve()


def check_describe_job(run_dir: Path | None, library: Path | None, opts: DescribeOptions, serve: str) -> None:
    """What `vlmocr describe … --serve` on the node would refuse, refused now."""
    from ..serve.describing import served_options

    if (run_dir is None) == (library is None):
        raise UsageError("give a run directory or --library LIB (one of them)")
    served_options(opts, serve)
    if run_dir is not None and not RunDir(run_dir).pages.is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    # LIB's catalog is checked by the command (the library stands above the batch system).


def submit_describe(run_dir: Path | None, library: Path | None, opts: DescribeOptions, serve: str,
                    describe_args: Sequence[str], *, out: Path | None = None, options: SlurmOptions | None = None,
                    dry_run: bool = False, python: str | None = None) -> JsonObject:
    """Check, write HOME/slurm/describe.sbatch and submit it (recorded in HOME/slurm/jobs.json).

    ``describe_args`` are the `vlmocr describe` options as the job passes them (checked and
    written back by the CLI, paths absolute; ``--library`` among them for a library)."""
    check_describe_job(run_dir, library, opts, serve)
    home = describe_home(run_dir, library, out)
    command = ["describe", *([os.path.abspath(run_dir)] if run_dir is not None else []), *describe_args,
               "--serve", serve]
    if not dry_run:
        check_not_active(home, KIND)  # a second job would wait on the run's describe lock, then fail
    result = submit_single(home, KIND, command, options=options or SlurmOptions(), dry_run=dry_run, python=python,
                           run_args=command[1:], pass_out=False)
    result["home"] = str(home)
    result["command"] = command
    return result
