"""The tests' in-process `vlmocr` (tests/support/cli.py): the commands of a test share one
forkserver while nothing its workers would see has changed, and get a new one when it has."""

from __future__ import annotations

import multiprocessing.forkserver
from pathlib import Path

from support import cli
from support.cli import run_cli
from support.records import read_records

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _run(out: Path, env: dict | None = None) -> int:
    res = run_cli("run", str(SAMPLES / "born-digital.pdf"), "--out", str(out), "--engine", "textlayer",
                  "--workers", "1", env=env)
    assert res.returncode == 0, res.stderr
    assert read_records(out)
    return multiprocessing.forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]


def test_commands_share_a_forkserver_until_their_environment_or_folder_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "IN_PROCESS", True)  # as by default (VLMOCR_TEST_CLI=subprocess: never shared)
    # The first command of a process may leave the environment changed by an import (engines/tesseract.py
    # sets OMP_THREAD_LIMIT when first imported); the commands after it find it as they leave it.
    _run(tmp_path / "warm")
    first = _run(tmp_path / "a")
    assert first is not None and _run(tmp_path / "b") == first  # the same environment: shared
    changed = _run(tmp_path / "c", env={"VLMOCR_TEST_ANY_SETTING": "1"})
    assert changed != first  # its workers must see the variable: a forkserver of its own
    monkeypatch.chdir(tmp_path)
    assert _run(tmp_path / "d") not in (first, changed)  # another folder: another forkserver
