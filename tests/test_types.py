"""The static checks CI runs before any test (scripts/check.sh: ruff, and mypy over src/vlmocr with
a cache kept between runs — not a cold mypy inside every test run), the same as the pre-commit hook
runs, and mypy strict on the spine."""

from __future__ import annotations

import tomllib

from support.components import REPO


def test_ci_and_the_pre_commit_hook_run_the_static_checks():
    test_sh = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "bash scripts/check.sh" in test_sh and test_sh.index("scripts/check.sh") < test_sh.index("python -m pytest")
    check = (REPO / "scripts" / "check.sh").read_text(encoding="utf-8")
    assert "ruff check" in check and "mypy src/vlmocr" in check and "--cache-dir" in check
    hooks = (REPO / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    assert "bash scripts/check.sh" in hooks and "tests/test_house.py" in hooks
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert {e.split(">")[0] for e in extras} >= {"mypy", "ruff", "pre-commit"}


def test_the_spine_is_checked_strictly():
    overrides = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    spine = next(o for o in overrides if "vlmocr.runfolder.record" in o["module"])
    assert set(spine["module"]) == {"vlmocr.runfolder.record", "vlmocr.runfolder.store", "vlmocr.runfolder.rundir",
                                    "vlmocr.settings.config", "vlmocr.files", "vlmocr.reading.context"}
    assert all(spine[flag] for flag in ("disallow_untyped_defs", "disallow_any_generics", "warn_return_any",
                                        "disallow_untyped_calls", "no_implicit_reexport", "warn_unused_ignores"))
