"""The release step's former address. Release jobs submitted before the step moved into
cluster/slurm/ sit held in SLURM's queue with ``python -m vlmocr.cluster.release_step RUN`` in
their script (RUN/slurm/release.sbatch): an upgrade of vlmocr while a gate runs must not fail
them, so this address stays and runs the step where it lives now."""

from __future__ import annotations

import sys

from .slurm.release_step import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
