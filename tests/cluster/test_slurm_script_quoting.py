"""The sbatch scripts `vlmocr slurm` writes: nothing but their commands runs when bash reads them,
whatever the values in their comments and echo lines (no SLURM needed: bash runs the script as
slurmd's batch step would)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from vlmocr.cluster import slurm as sl
from vlmocr.exceptions import UsageError


def render(tmp_path: Path, **kwargs) -> str:
    return sl.render_script(**{"kind": "grid", "run_dir": tmp_path / "run", "python": "/bin/true", "shards": None,
                               "run_args": [], "options": sl.SlurmOptions(), "submit_dir": tmp_path,
                               "commit": "abc", "job_name": "t", "command": ["grid"], **kwargs})


def run_script(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    script = tmp_path / "job.sbatch"
    script.write_text(text, encoding="utf-8")
    return subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TMPDIR": str(tmp_path), "SLURM_JOB_ID": "5",
                                                   "SLURM_ARRAY_TASK_ID": "1"})


def test_a_newline_in_the_comment_s_timestamp_stays_in_the_comment(tmp_path):
    text = render(tmp_path, generated_at="2026-01-01\ntouch injected #")
    res = run_script(tmp_path, text)
    assert not (tmp_path / "injected").exists(), text
    assert res.returncode == 0 and "vlmocr exited 0" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("hostile", [
    {"command": ["$(touch injected)"]},
    {"command": ['grid" ; touch injected ; echo "']},
    {"kind": "bulk\ntouch injected", "shards": 1, "command": None},
])
def test_words_written_into_the_script_unquoted_must_be_plain(tmp_path, hostile):
    """The job kind and the vlmocr command name reach file names and an echo line unquoted: any
    other value is refused before a script exists, so none can run when the job starts."""
    try:
        text = render(tmp_path, **hostile)
    except UsageError as err:
        assert "expected a plain lowercase word" in str(err)
        return
    run_script(tmp_path, text)
    assert not (tmp_path / "injected").exists(), text
    pytest.fail("a word that is not plain was written into the script")
