"""An export killed for real (SIGKILL at `VLMOCR_KILL_AT=export-written`, the whole export written
but not yet swapped in) leaves the earlier export untouched and only a hidden sibling behind,
which the next export into the same place removes — but never one a live export is writing."""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

import pytest

from support.cli import run_cli, textlayer_run
from support.documents import make_doc
from support.library import snapshot
from vlmocr.files import KILL_AT_ENV, OUTPUT_MARKER


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export-kill")
    make_doc(root / "src", "a.pdf", 1, 2)
    textlayer_run(root / "run", root / "src")
    return root / "run"


def export(run: Path, fmt: str, out: Path, **env: str):
    return run_cli("export", str(run), "--format", fmt, "--out", str(out), env=env)


@pytest.mark.parametrize("fmt, name", [("hf", "hf"), ("jsonl", "docs.jsonl")])
def test_a_killed_export_leaves_the_last_one_whole_and_its_leftovers_go_next_time(run, tmp_path, fmt, name):
    out = tmp_path / name
    assert export(run, fmt, out).returncode == 0
    before = out.read_bytes() if out.is_file() else snapshot(out)

    killed = export(run, fmt, out, **{KILL_AT_ENV: "export-written"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (out.read_bytes() if out.is_file() else snapshot(out)) == before
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != name]
    assert len(leftovers) == 1 and leftovers[0].startswith(f".{name}.") and leftovers[0].endswith(".tmp")

    # A live export's folder beside the same target: its marker is held, so it stays.
    live = tmp_path / f".{name}.999999999.tmp"
    live.mkdir()
    fd = os.open(live / OUTPUT_MARKER, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert export(run, fmt, out).returncode == 0
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, live.name])
    finally:
        os.close(fd)
    assert export(run, fmt, out).returncode == 0  # now abandoned: removed
    assert [p.name for p in tmp_path.iterdir()] == [name]
