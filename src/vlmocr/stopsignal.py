"""A stop asked for before the run listens for it.

`vlmocr run` installs its graceful SIGTERM/SIGINT handlers once the event loop runs, after
Python has imported its modules and asked the endpoint for its models: a second or more. A
signal in that window (SLURM's --signal=B:TERM@lead can come seconds after a job starts)
would kill the process with no run.json. `listen_early()` notes such a signal instead. The
batch shell, signalled before vlmocr has a handler at all (before it launched it, or while
Python itself starts), writes the file named by VLMOCR_STOP_FILE instead of signalling. Either
way the scheduler stops before the first page and records an interrupted run (exit 130),
exactly as for a signal a minute later."""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Any

ENV = "VLMOCR_STOP_FILE"  # a path: if the file exists, a stop was asked for before vlmocr listened
_noted: list[int] = []
_previous: dict[int, Any] = {}


def _note(signum: int, frame: FrameType | None) -> None:
    _noted.append(signum)


def listen_early() -> None:
    """Note SIGTERM/SIGINT from now until the scheduler's own handlers replace these."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(sig) is not _note:
            try:
                previous = signal.signal(sig, _note)
            except ValueError:
                return  # not the main thread (vlmocr called as a library): nothing to keep
            _previous[sig] = previous


def stop_listening() -> None:
    """Put back the handlers listen_early replaced, where they are still ours (a command
    that ended before its scheduler ran, or vlmocr called as a library)."""
    for sig, handler in list(_previous.items()):
        if signal.getsignal(sig) is _note:
            signal.signal(sig, handler)
        del _previous[sig]
    _noted.clear()


def pending() -> int | None:
    """The signal that asked this process to stop before it could act on it, if any."""
    if _noted:
        return _noted[0]
    path = os.environ.get(ENV)
    if path and os.path.exists(path):
        return int(signal.SIGTERM)
    return None
