"""The real `vlmocr` command: in a subprocess (as a user runs it) or in this process (a
subprocess costs a second of imports), and the runs and publishes the library tests repeat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "vlmocr", *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=timeout
    )


def cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """The real `vlmocr` command in this process (a subprocess costs a second of imports)."""
    import contextlib
    import io

    from vlmocr.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(["vlmocr", *args], code, out.getvalue(), err.getvalue())


def textlayer_run(out: Path, *inputs: Path | str, extra: tuple[str, ...] = ()) -> None:
    proc = run_cli("run", *[str(i) for i in inputs], "--out", str(out), "--engine", "textlayer", "--workers", "1",
                   *extra)
    assert proc.returncode in (0, 1, 9), proc.stderr  # 9: some inputs unreadable


def publish_cli(*args: str) -> tuple[int, dict]:
    proc = run_cli("publish", *args, "--json")
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])
