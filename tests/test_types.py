"""Issue 28, point 4: a type checker runs with the tests: mypy over src/vlmocr, zero errors (the
settings in pyproject.toml's [tool.mypy], the pydantic plugin included; strict on the spine:
record, store, rundir, config)."""

from __future__ import annotations

import subprocess
import sys

from support.components import REPO


def test_mypy_finds_no_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mypy", "src/vlmocr", "--cache-dir", str(tmp_path / "cache")],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


def test_the_spine_is_checked_strictly():
    import tomllib

    overrides = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    spine = next(o for o in overrides if "vlmocr.runfolder.record" in o["module"])
    assert set(spine["module"]) == {"vlmocr.runfolder.record", "vlmocr.runfolder.store", "vlmocr.runfolder.rundir", "vlmocr.settings.config"}
    assert all(spine[flag] for flag in ("disallow_untyped_defs", "disallow_any_generics", "warn_return_any",
                                        "disallow_untyped_calls", "no_implicit_reexport", "warn_unused_ignores"))
