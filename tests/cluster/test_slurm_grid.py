"""`vlmocr slurm grid`: a prompt × dpi grid in one job against one server it starts."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from support.pagecode import expected_text, make_coded_png

FAKE_BIN = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve().parent / 'fake_vllm'))}"


def truth_folder(tmp_path: Path) -> Path:
    truth = tmp_path / "truth"
    truth.mkdir()
    for code in (1, 2, 3):
        make_coded_png(truth / f"p{code}.png", code)
        (truth / f"p{code}.txt").write_text(expected_text(code), encoding="utf-8")
    return truth


def test_dry_run_writes_one_grid_job(tmp_path):
    truth = truth_folder(tmp_path)
    res = run_cli("slurm", "grid", "--out", str(tmp_path / "run"), "--time", "1:00:00", "--dry-run", "--json", "--",
                  "--truth", str(truth), "--serve", "qwen3-vl", "--dpi", "150,200", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    script = Path(json.loads(res.stdout)["script"]).read_text()
    assert "#SBATCH --time=1:00:00" in script and "#SBATCH --array" not in script
    assert '-m vlmocr grid --truth' in script and "--serve qwen3-vl --dpi 150,200 --out \"$OUT\"" in script
    assert 'OUT="$RUN_DIR/grid"' in script and "--signal=B:TERM@" in script
    bad = run_cli("slurm", "grid", "--out", str(tmp_path / "run"), "--dry-run", "--", "--serve", "qwen3-vl")
    assert bad.returncode == 3 and "--truth" in bad.stderr


@pytest.mark.slurm
def test_grid_job_loads_the_model_once_and_ranks_every_cell(slurm, tmp_path):
    truth = truth_folder(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {"VLMOCR_VLLM_BIN": FAKE_BIN, "TMPDIR": str(scratch), "VLMOCR_API_KEY": "", "OPENAI_API_KEY": "",
           "FAKE_VLLM_RECORD": str(tmp_path / "record.json")}
    run = tmp_path / "run"
    res = run_cli("slurm", "grid", "--out", str(run), "--json", "--", "--truth", str(truth), "--serve", "qwen3-vl",
                  "--engine", "openai", "--longest-side", "800,1200", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)["job_id"]
    state = slurm.wait(job, timeout=240)
    log = "".join(p.read_text(errors="replace") for p in (run / "slurm" / "logs").glob("*"))
    assert state == "COMPLETED", log
    cells = json.loads((run / "grid" / "grid.json").read_text())["cells"]
    assert len(cells) == 2 and all(c["corpus"]["cer"] == 0 and c["exit_code"] == 0 for c in cells), cells
    assert len(list((run / "grid" / "logs").glob("server-*.log"))) == 1  # one server for both cells
    assert not os.path.exists(scratch / "vlmocr-serve")  # nothing left behind by the server
