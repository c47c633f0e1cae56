"""`vlmocr plan --partitions` on the real `sinfo` of the private test cluster, run with the
documented format (SINFO_COMMAND). Its one node has no GPUs, so the plan says nothing fits and why."""

from __future__ import annotations

import csv
import subprocess

from support.cli import run_cli
from vlmocr.corpus.partitions import SINFO_FORMAT, parse_sinfo
from vlmocr.profiles import load_profile


def test_real_sinfo_output_parses_and_nothing_fits(slurm, tmp_path):
    proc = subprocess.run(["sinfo", "-h", "-o", SINFO_FORMAT], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    saved = tmp_path / "sinfo.txt"
    saved.write_text(proc.stdout)
    parsed = parse_sinfo(proc.stdout, str(saved))
    (partition,) = [p for p in parsed.partitions if p.name == slurm.partition]
    assert partition.gpus_per_node == 0 and partition.detail.startswith("no GPUs (GRES ")
    assert partition.nodes >= 1 and partition.cpus_per_node and partition.memory_mb

    from vlmocr.corpus.triage import COLUMNS

    triage = tmp_path / "triage.csv"
    with triage.open("w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        w.writerow({**{c: "" for c in COLUMNS}, "doc_id": "a", "path": "/a.pdf", "status": "ok", "pages": 40,
                    "pages_checked": 40, "text_pages": 0})
    res = run_cli("plan", "--triage", str(triage), "--rate", "100", "--partitions", str(saved),
                  "--profile", "lightonocr-2")
    assert res.returncode == 0, res.stderr
    need = load_profile("lightonocr-2").memory.min_gpu_gb
    assert (f"lightonocr-2 (needs {need:g} GB) fits no partition: {slurm.partition}: no GPUs (GRES "
            in res.stdout), res.stdout
    assert "slurm submit" not in res.stdout
