"""``python -m vlmocr.cluster.slurm versions``: printed at the top of every task log (the batch
scripts call it; scripts written before the package split call it by the same name)."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path


def print_versions() -> None:
    """Printed at the top of every task log: what ran, where, from which commit."""
    from importlib.metadata import PackageNotFoundError, version

    from ... import __version__
    from ...runfolder.rundir import git_commit

    def v(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    print(f"== vlmocr {__version__} commit {git_commit() or 'unknown'} ({Path(__file__).resolve().parents[2]})")
    print(f"== python {platform.python_version()} ({sys.executable}) on {socket.gethostname()} {platform.platform()}")
    pkgs = ["pypdfium2", "pillow", "httpx2", "pydantic", "rapidocr", "onnxruntime", "vllm", "sglang", "torch",
            "transformers"]
    print("== " + " ".join(f"{p}={v(p)}" for p in pkgs if v(p)))
    env = {k: os.environ.get(k) for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
                                          "SLURM_JOB_PARTITION", "SLURM_CPUS_PER_TASK", "CUDA_VISIBLE_DEVICES")}
    print("== " + " ".join(f"{k}={val}" for k, val in env.items() if val is not None))
    from .jobs import SLURM

    if said := SLURM.version():
        print(f"== {said}")
    sys.stdout.flush()


if __name__ == "__main__":  # `python -m vlmocr.cluster.slurm versions`, from the batch scripts
    if sys.argv[1:] == ["versions"]:
        print_versions()
    else:
        print("usage: python -m vlmocr.cluster.slurm versions", file=sys.stderr)
        sys.exit(3)
