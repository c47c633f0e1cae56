"""Issue 28, point 4: a type checker runs with the tests: mypy over src/vlmocr, zero errors (the
settings in pyproject.toml's [tool.mypy], the pydantic plugin included)."""

from __future__ import annotations

import subprocess
import sys

from support.components import REPO


def test_mypy_finds_no_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mypy", "src/vlmocr", "--cache-dir", str(tmp_path / "cache")],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout
