"""The release job's step (the script release_job.py writes runs ``python -m
vlmocr.cluster.slurm.release_step RUN``): score the gate once it has ended and release or cancel the
held bulk, unless a person already decided."""

from __future__ import annotations

import sys
from pathlib import Path

from ...exceptions import VlmocrError
from .gate import release
from .layout import GATE_FILE, SLURM_DIR, read_json
from .release_job import RELEASE_WAIT


def main(argv: list[str]) -> int:
    """In the release job: decide once, unless a person already did."""
    if len(argv) != 1:
        print("usage: python -m vlmocr.cluster.slurm.release_step RUN", file=sys.stderr)
        return 3
    run_dir = Path(argv[0])
    gate = read_json(run_dir / SLURM_DIR / GATE_FILE)
    if isinstance(gate, dict) and gate.get("decision"):
        print(f"already decided at {gate['decision'].get('at')}: {gate['decision'].get('message')}", flush=True)
        return 0
    try:
        decision = release(run_dir, wait=RELEASE_WAIT)
    except VlmocrError as exc:
        print(f"vlmocr release step: {exc}", file=sys.stderr, flush=True)
        return int(exc.exit_code)
    print(decision.message, flush=True)
    # The step did its work either way: SLURM shows it COMPLETED; the decision is in gate.json.
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
