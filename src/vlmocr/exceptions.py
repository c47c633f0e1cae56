"""The one place exit codes and user-facing errors live (cf. OCRmyPDF's exceptions.py)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    ok = 0  # every page ok or fallback
    incomplete = 1  # pages missing or error: resubmit
    review = 2  # only review pages (loop, truncated, empty, suspect, refused) remain
    usage = 3  # bad arguments or configuration; never 2 (click's default is changed)
    gate_failed = 4  # measured quality did not pass the gate
    unavailable = 5  # the endpoint is unreachable or does not serve the model
    locked = 6  # another process holds the run directory
    internal = 7  # a bug: please report it
    storage = 8  # the run directory cannot be written (disk full, read-only): fix it, resubmit
    # Finished, but some inputs cannot be read (RUN/bad_inputs.csv lists them): a resubmit reads
    # them no better, so SLURM and `slurm submit` count it done; fix the files, run --force-bad.
    bad_inputs = 9
    interrupted = 130  # SIGINT/SIGTERM: stopped taking pages; resubmit to resume


def outcome(*, unfinished: bool, review: bool, interrupted: bool = False, unavailable: bool = False,
            bad_inputs: bool = False) -> ExitCode:
    """The exit code of a run over pages or figures: `unfinished` = some missing or failed (not
    counting unreadable inputs: `bad_inputs`, the outcome only when nothing else is owed)."""
    if unavailable:
        return ExitCode.unavailable
    if interrupted:
        return ExitCode.interrupted
    if unfinished:
        return ExitCode.incomplete
    if review:
        return ExitCode.review
    if bad_inputs:
        return ExitCode.bad_inputs
    return ExitCode.ok


# Outcomes after which a resubmit of the same command has nothing to do (SLURM's job script and
# `slurm submit` count them done): every page final, the unreadable ones listed.
SETTLED = frozenset({ExitCode.ok, ExitCode.bad_inputs})


class VlmocrError(Exception):
    """An error with a clear message for the user and an exit code."""

    exit_code: ExitCode = ExitCode.internal

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(VlmocrError):
    exit_code = ExitCode.usage


class EndpointUnavailable(VlmocrError):
    exit_code = ExitCode.unavailable


class RunLocked(VlmocrError):
    exit_code = ExitCode.locked


class StoreFailed(VlmocrError):
    """A record could not be written: reading on would only throw the results away."""

    exit_code = ExitCode.storage


class BadInput(Exception):
    """A document or page that cannot be read; becomes a `bad_input` record, never a crash."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
