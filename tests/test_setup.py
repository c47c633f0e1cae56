"""setup.py's build hook: an installed vlmocr — no checkout beside it — records in run.json the
commit it was built from (run.json's git_commit was null for a normal install)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.cli import run_cli
from support.components import REPO, need
from support.documents import make_doc

pytestmark = pytest.mark.timeout(300)


def git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_a_built_vlmocr_records_its_commit_in_run_json(tmp_path):
    need(shutil.which("git") is not None, "git", "git")
    # A checkout of its own (the tests may run from a copy that is no repository).
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, checkout / name)
    shutil.copytree(REPO / "src" / "vlmocr", checkout / "src" / "vlmocr",
                    ignore=shutil.ignore_patterns("__pycache__", "_build.py"))
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "a build")
    commit = git(checkout, "rev-parse", "HEAD")

    site = tmp_path / "site"
    if importlib.util.find_spec("wheel") is not None:  # the wheel itself, as pip builds it
        dist = tmp_path / "dist"
        subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(dist)], cwd=checkout, check=True, capture_output=True, timeout=240)
        (wheel,) = dist.glob("vlmocr-*.whl")
        zipfile.ZipFile(wheel).extractall(site)  # what an install puts in site-packages
    else:  # the build step a wheel is made of, with the setuptools at hand (no network)
        subprocess.run([sys.executable, "setup.py", "-q", "build_py", "-d", str(site)], cwd=checkout, check=True,
                       capture_output=True, timeout=240)
    assert f"GIT_COMMIT = {commit!r}" in (site / "vlmocr" / "_build.py").read_text()
    assert not (checkout / "src" / "vlmocr" / "_build.py").exists()  # the source tree is left as it was

    # The installed copy, run from elsewhere: git has no repository to ask there.
    docs = make_doc(tmp_path / "docs", "a.pdf", 1, 1)
    out = tmp_path / "run"
    proc = run_cli("run", str(docs), "--engine", "textlayer", "--workers", "1", "--out", str(out), cwd=tmp_path,
                   env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    info = json.loads((out / "run.json").read_text())
    assert info["git_commit"] == commit
