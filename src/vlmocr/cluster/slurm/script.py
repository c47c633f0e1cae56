"""The sbatch scripts: ``#SBATCH`` lines from checked values, and a self-contained batch shell that
runs vlmocr, forwards SIGTERM to it and records the task's end (the quoting rules are in the
package docstring)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...exceptions import SETTLED, UsageError
from ...runfolder.record import now_iso
from .layout import bulk_kind, check_part_name

DEFAULT_SIGNAL_LEAD = 120  # seconds before the time limit the batch shell gets SIGTERM

# Characters allowed in an #SBATCH value: enough for partitions, times, memory, GRES, e-mail.
_SAFE_SBATCH = re.compile(r"[A-Za-z0-9_.,:@%+=/\[\]-]+")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class SlurmOptions:
    """What goes into the ``#SBATCH`` lines. Every value is checked against a safe set."""

    partition: str | None = None
    gpus_per_task: str | None = None
    cpus_per_task: int | None = None
    time: str | None = None
    mem: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    mail_user: str | None = None
    mail_type: str = "END,FAIL"
    signal_lead: int = DEFAULT_SIGNAL_LEAD
    max_running: int | None = None  # array throttle: --array=1-N%M
    extra: list[str] = field(default_factory=list)  # more sbatch options, e.g. "--exclusive"
    # GPUs without working peer-to-peer (PCIe pairs, seed 001): the job exports
    # VLMOCR_SERVE_NO_P2P=1, so its server starts with NCCL_P2P_DISABLE=1 --disable-custom-all-reduce.
    no_p2p: bool = False

    def directives(self) -> list[str]:
        pairs: list[tuple[str, Any]] = [
            ("--partition", self.partition), ("--gpus-per-task", self.gpus_per_task),
            ("--cpus-per-task", self.cpus_per_task), ("--time", self.time), ("--mem", self.mem),
            ("--account", self.account), ("--qos", self.qos), ("--constraint", self.constraint),
            ("--mail-user", self.mail_user),
        ]
        lines = []
        for opt, value in pairs:
            if value is None or value == "":
                continue
            lines.append(f"{opt}={safe_sbatch_value(opt, str(value))}")
        if self.mail_user:
            lines.append(f"--mail-type={safe_sbatch_value('--mail-type', self.mail_type)}")
        if self.signal_lead:
            if int(self.signal_lead) < 1:
                raise UsageError("--signal-lead must be at least 1 second")
            lines.append(f"--signal=B:TERM@{int(self.signal_lead)}")
        for item in self.extra:
            if not re.fullmatch(r"--[a-z][a-z0-9-]*(=" + _SAFE_SBATCH.pattern + r")?", item):
                raise UsageError(
                    f"--sbatch-arg {item!r}: expected --option or --option=value with a plain value "
                    "(letters, digits and _.,:@%+=/[]-)")
            lines.append(item)
        return lines


# SLURM's feature expressions: names joined by & (and) and | (or), counts [a*2&b*1], brackets and
# parentheses (`sbatch --constraint`). An #SBATCH line is read by sbatch, not by a shell.
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.,:@%+=/\[\]()&|*-]+")


def safe_sbatch_value(opt: str, value: str) -> str:
    """``value`` if it is made only of the characters allowed in an ``#SBATCH`` value."""
    if opt == "--constraint":
        if not _CONSTRAINT.fullmatch(value) or value.count("(") != value.count(")") \
                or value.count("[") != value.count("]") or re.search(r"[&|]{2}|^[&|]|[&|]$", value):
            raise UsageError(f"--constraint {value!r}: expected SLURM features joined by & and |, with [ ] ( ) "
                             "and *N counts (e.g. 'a100&nvlink|h100')")
        return value
    if not _SAFE_SBATCH.fullmatch(value):
        raise UsageError(f"{opt} {value!r}: only letters, digits and _.,:@%+=/[]- are allowed in #SBATCH values")
    return value


def default_stop_grace(signal_lead: int) -> float:
    """How long pages in flight may finish after the warning signal: half the lead, ≤ 60 s."""
    return float(max(5, min(60, signal_lead // 2)))


EXIT_MEANINGS = {
    0: "every page ok or fallback", 1: "pages missing or failed: resubmit", 2: "only review pages remain",
    3: "usage or configuration error", 4: "quality gate failed", 5: "endpoint unavailable",
    6: "run directory in use by another process", 7: "internal error (a bug)",
    8: "the run directory cannot be written: fix it, resubmit",
    9: "finished; some inputs are unreadable (bad_inputs.csv): done, fix the files, then --force-bad",
    130: "interrupted: resubmit to resume", 143: "killed by SIGTERM",
}


def render_script(*, kind: str, run_dir: Path, python: str, shards: int | None, run_args: Sequence[str],
                  options: SlurmOptions, submit_dir: Path, commit: str | None, job_name: str,
                  generated_at: str | None = None, command: Sequence[str] | None = None, pass_out: bool = True,
                  part: str | None = None, exports: Mapping[str, str] | None = None) -> str:
    """The text of a self-contained sbatch script.

    ``kind`` "bulk" is an array (one task per shard, ``--shard $SLURM_ARRAY_TASK_ID/N`` into
    RUN/shards/K; of ``part`` NAME: staged/bulk-NAME.csv into RUN/shards/NAME-K); "gate" is a
    single task into RUN/gate. The batch shell runs vlmocr in the
    background and forwards SIGTERM to it (bash runs traps only between commands). ``exports``:
    variables the job sets (a path to its credentials file, never a secret: credentials.py)."""
    q = shlex.quote
    verb = command[0] if command else "run"
    # Both go into the script unquoted (names of files, a comment, an echo): plain words only.
    for what, word in (("job kind", kind), ("vlmocr command", verb)):
        if not re.fullmatch(r"[a-z][a-z-]*", word):
            raise UsageError(f"{what} {word!r}: expected a plain lowercase word")
    if part is not None:
        check_part_name(part)  # it goes into file names below, unquoted
    run_dir = Path(run_dir)
    array = kind not in ("gate", "grid", "describe")
    files = bulk_kind(part) if kind == "bulk" else kind  # staged manifest and task file names
    shard_prefix = f"{part}-" if part else ""  # RUN/shards/K, or RUN/shards/NAME-K (layout.shard_name)
    if array and not shards:
        raise UsageError("an array job needs the number of shards")
    lines = ["#!/bin/bash"]
    lines.append(f"# vlmocr {kind} job, written by `vlmocr slurm` at {_comment_safe(generated_at or now_iso('seconds'))}")
    lines.append(f"# (vlmocr from commit {_comment_safe(commit or 'unknown')}).")
    lines.append("# Self-contained: the documents come only from the staged manifest (ASCII symlink names),")
    lines.append("# every value below is shell-quoted. To resubmit (it resumes), run the same")
    lines.append("# `vlmocr slurm` command again, or `sbatch` this file from its own directory (logs are relative).")
    lines.append(f"#SBATCH --job-name={safe_sbatch_value('--job-name', job_name)}")
    if array:
        spec = f"1-{int(shards)}" + (f"%{int(options.max_running)}" if options.max_running else "")  # type: ignore[arg-type]
        lines.append(f"#SBATCH --array={spec}")
        lines.append("#SBATCH --output=logs/%A_%a.out")
    else:
        lines.append(f"#SBATCH --output=logs/{kind}_%j.out")
    lines.append("#SBATCH --open-mode=append")
    for directive in options.directives():
        lines.append(f"#SBATCH {directive}")
    meanings = " ".join(f"{code}) echo {q(text)} ;;" for code, text in EXIT_MEANINGS.items())
    body = f"""
set -u
RUN_DIR={q(str(run_dir))}
PYTHON={q(python)}
SUBMIT_DIR={q(str(submit_dir))}
SUBMITTED_COMMIT={q(commit or 'unknown')}
MANIFEST="$RUN_DIR/staged/{files}.csv"
"""
    if array:
        body += f"""N={int(shards or 0)}  # shards
K="${{SLURM_ARRAY_TASK_ID:?this is an array job script: submit it with sbatch}}"
OUT="$RUN_DIR/shards/{shard_prefix}$K"
TASK="{files}-$K"
SHARD_JSON="$K"
"""
    else:
        body += f"""OUT="$RUN_DIR/{kind}"
TASK={kind}
SHARD_JSON=null
"""
    body += r"""
# Compute nodes have no internet: never try the hub or phone home.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1
# Models stay where they are; per-job caches go under $TMPDIR (another job's or user's stale
# cache never breaks this one).
export HF_HOME="${HF_HOME:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/huggingface}"
# vlmocr's own cache stays where it was too: the few vLLM model-info entries it keeps between
# server starts (cluster/serve/modelinfo.py), checked by vLLM against its source before use.
export VLMOCR_CACHE_DIR="${VLMOCR_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/vlmocr}"
JOB_TMP="$(mktemp -d "${TMPDIR:-/tmp}/vlmocr-${SLURM_JOB_ID:-local}.XXXXXX" 2>/dev/null)" \
  || JOB_TMP="$(mktemp -d "/tmp/vlmocr-${SLURM_JOB_ID:-local}.XXXXXX")" || exit 1
export TMPDIR="$JOB_TMP" XDG_CACHE_HOME="$JOB_TMP/cache" VLLM_CACHE_ROOT="$JOB_TMP/vllm"
export TRITON_CACHE_DIR="$JOB_TMP/triton" TORCHINDUCTOR_CACHE_DIR="$JOB_TMP/inductor"
export CUDA_CACHE_PATH="$JOB_TMP/nv" OUTLINES_CACHE_DIR="$JOB_TMP/outlines" FLASHINFER_WORKSPACE_BASE="$JOB_TMP"
mkdir -p "$XDG_CACHE_HOME"
trap 'rm -rf -- "$JOB_TMP"' EXIT
""" + ("""# GPUs without working peer-to-peer (--no-p2p): NCCL hangs at start-up otherwise (seed 001).
export VLMOCR_SERVE_NO_P2P=1
""" if options.no_p2p else "") + "".join(
        f"export {name}={q(value)}\n" for name, value in (exports or {}).items()
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", name)) + r"""
mkdir -p "$RUN_DIR/slurm/tasks"
task_state() {  # $1 state, $2 exit code (or null): RUN/slurm/tasks/$TASK.json, read by `vlmocr slurm status`
  local f="$RUN_DIR/slurm/tasks/$TASK.json"
  printf '{"task": "%s", "shard": %s, "job_id": "%s", "array_job_id": "%s", "array_task_id": "%s", "host": "%s", "state": "%s", "exit_code": %s, "at": "%s"}\n' \
    "$TASK" "$SHARD_JSON" "${SLURM_JOB_ID:-}" "${SLURM_ARRAY_JOB_ID:-}" "${SLURM_ARRAY_TASK_ID:-}" \
    "$(hostname | tr -cd 'A-Za-z0-9._-')" "$1" "$2" "$(date -u +%Y-%m-%dT%H:%M:%S+00:00)" > "$f.$$.tmp" && mv -f -- "$f.$$.tmp" "$f"
}
exit_meaning() { case "$1" in MEANINGS *) echo "see vlmocr's exit codes" ;; esac; }
# A signal before vlmocr runs: vlmocr still starts, to record an interrupted run (run.json,
# exit 130) without reading a page, as it would for a signal a minute later.
# The request is a file (VLMOCR_STOP_FILE), not a signal alone: a signal that reaches Python
# before `vlmocr run` has its handler would kill it with no record.
export VLMOCR_STOP_FILE="$JOB_TMP/stop-requested"
trap 'echo "== $(date -Is) signalled before vlmocr started: it will record an interrupted run"; : > "$VLMOCR_STOP_FILE"' TERM INT

echo "== vlmocr $TASK: job ${SLURM_JOB_ID:-?} (array ${SLURM_ARRAY_JOB_ID:--} task ${SLURM_ARRAY_TASK_ID:--}) on $(hostname) at $(date -Is)"
echo "== submitted from vlmocr commit $SUBMITTED_COMMIT; TMPDIR=$JOB_TMP"
"$PYTHON" -m vlmocr.cluster.slurm versions || echo "== warning: cannot import vlmocr with $PYTHON"
cd -- "$SUBMIT_DIR" 2>/dev/null || cd -- "$RUN_DIR" || exit 1
task_state RUNNING null
""".replace("MEANINGS", meanings)  # (only this literal chunk: user values never pass through replace)
    if command is not None:
        # Another vlmocr command in the same harness (e.g. a grid): same env, logs and signals.
        cmd = ['"$PYTHON"', "-m", "vlmocr", *[q(a) for a in command]]
        if pass_out:  # a command writing into what it is given (describe RUN|--library LIB) takes none
            cmd += ["--out", '"$OUT"']
    else:
        cmd = ['"$PYTHON"', "-m", "vlmocr", "run", "--manifest", '"$MANIFEST"', "--out", '"$OUT"']
        if array:
            cmd += ["--shard", '"$K/$N"']
        cmd += [q(a) for a in run_args]
    body += f"""echo "== $(date -Is) vlmocr {verb}{' shard $K/$N' if array else ''}{' -> $OUT' if pass_out else ''}"
{" ".join(cmd)} &
pid=$!
reads_stop_file={1 if command is None else 0}
"""
    body += r"""# SIGTERM (--signal=B:TERM@lead before the time limit, or scancel --signal=TERM --batch) reaches
# only this shell: forward it. vlmocr stops taking pages, finishes those in flight and exits 130.
catches_term() {  # does process $1 handle SIGTERM yet? (bit 15 of SigCgt; unknown: assume so)
  local m; m=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
  [ -z "$m" ] && return 0
  (( (16#$m >> 14) & 1 ))
}
on_term() {
  : > "$VLMOCR_STOP_FILE"
  # Python still starting (before vlmocr's handler) would die of the signal: the file is enough,
  # `vlmocr run` reads it once its handler is in place. Written first, checked second: no gap.
  if [ "$reads_stop_file" = 1 ] && ! catches_term "$pid"; then
    echo "== $(date -Is) SIGTERM: vlmocr (pid $pid) is starting; it will read the stop request"
  else
    echo "== $(date -Is) SIGTERM: forwarding to vlmocr (pid $pid)"; kill -TERM "$pid" 2>/dev/null
  fi
}
trap on_term TERM
trap 'kill -INT "$pid" 2>/dev/null' INT
while :; do
  wait "$pid"; rc=$?
  kill -0 "$pid" 2>/dev/null || break
done
wait "$pid" 2>/dev/null; last=$?
[ "$last" -ne 127 ] && rc=$last
task_state FINISHED "$rc"
echo "== $(date -Is) vlmocr exited $rc: $(exit_meaning "$rc")"
"""
    if command is None:
        # Nothing owed after these (every page final; 9 = unreadable inputs, listed): SLURM shows
        # the task COMPLETED and `afterok` follows, the task file keeps vlmocr's own code.
        settled = "|".join(str(int(c)) for c in sorted(SETTLED))
        body += f"""case "$rc" in {settled}) exit 0 ;; esac
"""
    body += 'exit "$rc"\n'
    return "\n".join(lines) + "\n" + body


def _comment_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:+-]", "?", text)


def job_name_for(run_dir: Path, kind: str) -> str:
    base = _SAFE_NAME.sub("_", Path(run_dir).name).strip("_.-")[:40] or "run"
    return f"vlmocr-{kind}-{base}"
