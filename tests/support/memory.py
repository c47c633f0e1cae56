"""Peak memory of a piece of code, measured in a fresh interpreter running the code under test."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import vlmocr

SRC = Path(vlmocr.__file__).resolve().parents[1]  # the code under test, for the child process too


def peak_rss_mb(script: str) -> dict[str, float]:
    """Run `script` in a fresh interpreter; it prints 'base' and 'peak' resident memory in MB
    (VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's peak, which Linux keeps
    over fork and exec)."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, check=False,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert out.returncode == 0, out.stderr
    return {k: float(v) for k, v in (line.split() for line in out.stdout.splitlines())}
