"""Issue 32, point 5: `slurm submit` checks before it stages. An unknown --serve profile was accepted
and died on the node; SLURM's legal constraint `a&b|c` was refused; files were staged before a
refusal. Every argument the job will see is checked first, and a refusal leaves RUN untouched."""

from __future__ import annotations

import pytest

from support.cli import run_cli
from vlmocr.cluster.slurm.script import safe_sbatch_value
from vlmocr.exceptions import ExitCode, UsageError
from vlmocr.testing.pagecode import make_coded_pdf


@pytest.mark.parametrize("args, said", [
    (("--", "--serve", "no-such-profile"), "unknown profile 'no-such-profile'"),
    (("--", "--profile", "no-such-profile", "--endpoint", "http://127.0.0.1:9/v1"), "unknown profile"),
    (("--", "--serve", "qwen3-vl", "--endpoint", "http://127.0.0.1:9/v1"), "--serve PROFILE or --endpoint URL"),
    (("--", "--engine", "nonsense"), "engine"),
    (("--constraint", "a&&b", "--", "--engine", "textlayer"), "--constraint"),
    (("--partition", "gpu;rm", "--", "--engine", "textlayer"), "--partition"),
])
def test_a_refusal_comes_before_anything_is_staged(tmp_path, args, said):
    doc = make_coded_pdf(tmp_path / "d.pdf", [1])
    run = tmp_path / "run"
    res = run_cli("slurm", "submit", str(doc), "--out", str(run), "--shards", "1", "--dry-run", *args, cwd=tmp_path)
    assert res.returncode == ExitCode.usage, res.stderr
    assert said in res.stderr, res.stderr
    assert not run.exists() or not any(run.rglob("*")), sorted(run.rglob("*"))


def test_slurm_feature_expressions_pass(tmp_path):
    for ok in ("a&b|c", "a100&nvlink|h100", "[rack1*2&rack2*4]", "(a|b)&c"):
        assert safe_sbatch_value("--constraint", ok) == ok
    for bad in ("a b", "a;b", "a&", "|a", "(a|b", "a\nb"):
        with pytest.raises(UsageError):
            safe_sbatch_value("--constraint", bad)
    doc = make_coded_pdf(tmp_path / "d.pdf", [1])
    res = run_cli("slurm", "submit", str(doc), "--out", str(tmp_path / "run"), "--shards", "1", "--dry-run",
                  "--constraint", "a&b|c", "--", "--engine", "textlayer", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "#SBATCH --constraint=a&b|c" in (tmp_path / "run" / "slurm" / "bulk.sbatch").read_text()
