"""The real `vlmocr` command, run in this process by default (a subprocess costs a second of
imports; OCRmyPDF's tests run most of their CLI calls in-process too), or in a subprocess where a
test needs a real process of its own (`process=True`: signals, kill -9, the interpreter's exit, a
SLURM job's view) or `VLMOCR_TEST_CLI=subprocess` for the whole suite. Also the runs and publishes
the library tests repeat."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import multiprocessing.forkserver
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

IN_PROCESS = os.environ.get("VLMOCR_TEST_CLI", "in-process") != "subprocess"
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
# Variables vlmocr reads where it uses them, which a command in this process therefore sees as a
# process of its own would. Any other (HF_*, PATH, HOME, TMPDIR, SLURM_*, TESSDATA_PREFIX …) may
# have been read once already — by a library at import, by a cache — so a command given one runs
# in a subprocess.
_READ_WHEN_USED = ("VLMOCR_", "OPENAI_API_KEY")
_KILLS = {"VLMOCR_KILL_AT"}  # the command SIGKILLs its own process (files.kill_point): never this one
_UNREAD = {"PYTEST_CURRENT_TEST"}  # pytest's name of the test running: no command reads it


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300,
            process: bool = False) -> subprocess.CompletedProcess:
    """`vlmocr ARGS…` with `env` over this process's environment, in `cwd`: its exit code, stdout
    and stderr as a subprocess.CompletedProcess."""
    if process or not IN_PROCESS or any(not k.startswith(_READ_WHEN_USED) or k in _KILLS for k in env or {}):
        full_env = {**os.environ, **(env or {})}
        return subprocess.run([sys.executable, "-m", "vlmocr", *args], capture_output=True, text=True, cwd=cwd,
                              env=full_env, timeout=timeout)
    with _environment(env or {}), _folder(cwd), _signals_kept():
        return cli_in_process(*args)


def cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """The real `vlmocr` command in this process: what it writes to stdout and stderr captured (as
    text, with a byte buffer beneath for what writes bytes), its exit code from SystemExit. The
    forkserver its worker pool starts is kept for the next command unless that one's environment,
    folder or preloads differ (_forkserver_as_now)."""
    from vlmocr.cli import main

    out, err = _TextCapture(), _TextCapture()
    # A process of its own has no logging handler: a warning reaches stderr as its bare message
    # (logging.lastResort). Under pytest the root logger has pytest's, so the command gets one.
    said = logging.StreamHandler(err)
    said.setLevel(logging.WARNING)
    logging.getLogger().addHandler(said)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # type: ignore[type-var]
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        logging.getLogger().removeHandler(said)
    return subprocess.CompletedProcess(["vlmocr", *args], code, out.text(), err.text())


def _forkserver_as_now(ensure_running: Callable[[Any], None]) -> Callable[[Any], None]:
    """multiprocessing's ForkServer.ensure_running, restarting the forkserver when this process's
    environment or folder differs from the one it was started in, or it lacks a module now to be
    preloaded: a command's workers (the forkserver's children) then see its environment, folder and
    preloads as a process of its own would, and the commands of a test that change none of them
    share one forkserver instead of starting one each (~0.4 s of CPU a command)."""

    lock = threading.Lock()

    def ensure(self: Any) -> None:
        now = (tuple(sorted((k, v) for k, v in os.environ.items() if k not in _UNREAD)), os.getcwd())
        wanted = frozenset(self._preload_modules or ())
        with lock:
            started = getattr(self, "_vlmocr_started", None)
            if self._forkserver_pid is not None and started is not None and (started[0] != now or not wanted <= started[1]):
                self._stop()
            before = self._forkserver_pid
            ensure_running(self)
            if self._forkserver_pid != before:  # started now (a first, after a stop, or after it died)
                self._vlmocr_started = (now, wanted)

    return ensure


_fs = multiprocessing.forkserver.ForkServer
_fs.ensure_running = _forkserver_as_now(_fs.ensure_running)  # type: ignore[method-assign]


class _TextCapture(io.TextIOWrapper):
    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8", errors="backslashreplace")  # type: ignore[attr-defined]


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _folder(cwd: Path | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    here = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(here)


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in _SIGNALS}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def textlayer_run(out: Path, *inputs: Path | str, extra: tuple[str, ...] = (), expect: int = 0) -> None:
    """A run reading born-digital inputs by their text layer; every page ok (exit 0) unless the
    test expects another outcome and says which."""
    proc = run_cli("run", *[str(i) for i in inputs], "--out", str(out), "--engine", "textlayer", "--workers", "1",
                   *extra)
    assert proc.returncode == expect, (proc.returncode, proc.stderr)


def publish_cli(*args: str) -> tuple[int, dict]:
    proc = run_cli("publish", *args, "--json")
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])
