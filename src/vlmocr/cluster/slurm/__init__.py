"""Run across SLURM: staged inputs, self-contained sbatch scripts, jobs, status, and the quality
gate that holds the bulk until a sample passes (``gate``, ``release_job``, ``release_step``),
and a model download as a CPU job (``fetch_job``). Nothing outside this folder runs a SLURM
command (scripts/spine_counts.py counts them): the interface a second batch system would
provide is ``jobs`` (submit, hold/release, cancel, status) and ``script``.

``layout``: where everything lives in a cluster run directory; ``script``: the sbatch scripts and
their ``#SBATCH`` lines; ``jobs``: sbatch/squeue/sacct/scontrol/scancel and RUN/slurm/jobs.json;
``submit``: staging the inputs, the shards, submitting; ``status``: what the jobs and shards have
done; ``__main__``: ``python -m vlmocr.cluster.slurm versions``, printed at the top of every task
log.

Security: a generated script never contains a document name. The jobs read the staged manifest,
whose paths are the ASCII symlink names; every other value in a script is ``shlex.quote``-d, and
``#SBATCH`` lines accept only values made of a small safe character set (sbatch parses them with
its own rules). The log path is relative (sbatch runs in ``RUN/slurm``) so a hostile run directory
name never reaches an ``#SBATCH`` line either.
"""
