"""Build hook: a wheel records the git commit it was built from in vlmocr/_build.py, so run.json
names the code that read the pages even for an install with no checkout beside it
(rundir.git_commit). Everything else about the build is in pyproject.toml.

An sdist carries the file too (written into its tree), so a wheel built from the sdist, where
git has no repository, still knows its commit. An editable install reads git at run time."""

from __future__ import annotations

import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
BUILD_FILE = Path("vlmocr") / "_build.py"


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def build_file_text() -> str | None:
    """The module to ship, or None when the commit is unknown (no git, no file from an sdist)."""
    commit = git_commit()
    if commit is None:
        shipped = HERE / "src" / BUILD_FILE
        return shipped.read_text(encoding="utf-8") if shipped.is_file() else None
    return (f'"""Written by setup.py when this copy of vlmocr was built."""\n\n'
            f"GIT_COMMIT = {commit!r}  # the commit it was built from (rundir.git_commit)\n")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        text = build_file_text()
        if text is not None and not getattr(self, "editable_mode", False):
            target = Path(self.build_lib) / BUILD_FILE
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        text = build_file_text()
        if text is not None:
            target = Path(base_dir) / "src" / BUILD_FILE
            target.unlink(missing_ok=True)  # maybe a hard link to the checkout's file
            target.write_text(text, encoding="utf-8")


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
