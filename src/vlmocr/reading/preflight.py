"""What `vlmocr run` checks before any work starts — before a run directory is made, a server
started or a worker forked: the inputs named on the command line exist, `--out` can be a run
directory, a `--profile` exists. Each failure is one line and exit 3 (`UsageError`).

Only inputs the user named are checked here: a file a manifest names but that is missing is
that document's `bad_input` record, and the other documents are read."""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..exceptions import UsageError
from ..files import check_output_path
from ..inputs.sources import printable
from ..settings.config import RunConfig


def missing_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The given paths with nothing at all behind them. A path that exists but cannot be read
    (no permission, a dangling link) is left to the run: its record says why."""
    missing: list[str] = []
    for given in paths:
        try:
            os.lstat(given)
        except (FileNotFoundError, NotADirectoryError):
            missing.append(printable(os.fspath(given)))
        except OSError:
            continue
    return missing


def check_inputs(paths: Iterable[str | os.PathLike[str]]) -> None:
    missing = missing_inputs(paths)
    if missing:
        raise UsageError(f"input{'s' if len(missing) > 1 else ''} not found: {', '.join(missing)}")


def check_run(cfg: RunConfig) -> None:
    """Everything about `cfg` that can be refused without reading a page."""
    check_inputs(cfg.inputs)
    if cfg.profile:  # unknown: one line listing the known profiles
        from ..profiles import load_profile

        load_profile(cfg.profile)
    if cfg.out is not None:
        check_output_path(cfg.out, "--out", folder=True)
