"""Run across SLURM: staged inputs, self-contained sbatch scripts, jobs, status (the quality gate
that holds the bulk until a sample passes is `vlmocr.cluster.gate`).

Layout of a cluster run directory ``RUN``::

    RUN/staged/0001.pdf → /original/weird name.pdf   symlinks under ASCII names
    RUN/staged/bulk.csv, gate.csv                    the manifests the jobs read (doc_id,path,pages,dpi)
    RUN/staged/originals.csv                         kind,doc_id,staged,original (the original names)
    RUN/slurm/bulk.sbatch, gate.sbatch               the generated scripts (self-contained)
    RUN/slurm/logs/%A_%a.out, gate_%j.out            one log per task
    RUN/slurm/jobs.json                              every submission: job id, kind, time, command
    RUN/slurm/tasks/bulk-K.json, gate.json           written by each task: job id, host, state, exit
    RUN/slurm/gate.json                              the gate: truth, threshold, jobs, decision
    RUN/shards/K/                                    shard K's run directory (pages.jsonl, run.json, docs/)
    RUN/gate/                                        the gate's run directory

Security: a generated script never contains a document name. The jobs read the staged manifest,
whose paths are the ASCII symlink names; every other value in a script is ``shlex.quote``-d, and
``#SBATCH`` lines accept only values made of a small safe character set (sbatch parses them with
its own rules). The log path is relative (sbatch runs in ``RUN/slurm``) so a hostile run directory
name never reaches an ``#SBATCH`` line either.
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..exceptions import ExitCode, UsageError, VlmocrError
from ..sources import (
    SUPPORTED_EXTS,
    Document,
    discover,
    from_manifest,
    shard_of,
)

STAGED = "staged"
SLURM_DIR = "slurm"
SHARDS = "shards"
GATE_RUN = "gate"
ORIGINALS = "originals.csv"
JOBS_FILE = "jobs.json"
GATE_FILE = "gate.json"
DEFAULT_SIGNAL_LEAD = 120  # seconds before the time limit the batch shell gets SIGTERM

#: Job states after which a job does not change any more.
TERMINAL_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
    "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED",
})

# Characters allowed in an #SBATCH value: enough for partitions, times, memory, GRES, e-mail.
_SAFE_SBATCH = re.compile(r"[A-Za-z0-9_.,:@%+=/\[\]-]+")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class SlurmError(VlmocrError):
    """sbatch/scontrol/scancel failed."""

    exit_code = ExitCode.unavailable


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


def _write_if_changed(path: Path, text: str) -> bool:
    """Write atomically unless the file already holds `text` (keeps its mtime stable)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return True


# ============================================================================ options


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
            lines.append(f"{opt}={_safe_value(opt, str(value))}")
        if self.mail_user:
            lines.append(f"--mail-type={_safe_value('--mail-type', self.mail_type)}")
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


def _safe_value(opt: str, value: str) -> str:
    if not _SAFE_SBATCH.fullmatch(value):
        raise UsageError(f"{opt} {value!r}: only letters, digits and _.,:@%+=/[]- are allowed in #SBATCH values")
    return value


def default_stop_grace(signal_lead: int) -> float:
    """How long pages in flight may finish after the warning signal: half the lead, ≤ 60 s."""
    return float(max(5, min(60, signal_lead // 2)))


# ============================================================================ staging


@dataclass
class StagedDoc:
    kind: str
    doc_id: str
    staged: str  # file name under RUN/staged
    original: str  # absolute path of the original file
    pages: str = ""
    dpi: str = ""


def _pages_spec(pages: tuple[int, ...] | None) -> str:
    if not pages:
        return ""
    out, start, prev = [], pages[0], pages[0]
    for p in list(pages[1:]) + [None]:  # type: ignore[list-item]
        if p is not None and p == prev + 1:
            prev = p
            continue
        out.append(f"{start}-{prev}" if prev != start else str(start))
        if p is not None:
            start = prev = p
    return ",".join(out)


def _staged_suffix(path: Path) -> str:
    ext = path.suffix.lower()
    if ext in SUPPORTED_EXTS:
        return ext
    if re.fullmatch(r"\.[a-z0-9]{1,8}", ext):
        return ext  # unsupported but harmless: the run reports it as bad_input, as it would anyway
    return ".bin"


def read_originals(run_dir: Path) -> list[dict[str, str]]:
    path = Path(run_dir) / STAGED / ORIGINALS
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def stage_documents(run_dir: Path, kind: str, paths: Sequence[str] = (), manifest: str | Path | None = None,
                    warn=print) -> tuple[Path, list[StagedDoc]]:
    """Symlink every input under an ASCII name and write RUN/staged/<kind>.csv.

    Document ids are derived from the original names exactly as ``vlmocr run`` derives them
    (``discover``), before staging, so a shard's records carry the ids the user expects.
    Restaging the same inputs reuses the same names (resubmitting resumes)."""
    run_dir = Path(run_dir)
    staged_dir = run_dir / STAGED
    staged_dir.mkdir(parents=True, exist_ok=True)
    docs = discover(list(paths), manifest)  # validates ids (unsafe, duplicate) before anything is submitted
    previous = read_originals(run_dir)
    by_original = {r["original"]: r["staged"] for r in previous}
    used = {r["staged"] for r in previous}
    numbers = [int(m.group(1)) for s in used if (m := re.match(r"(\d+)", s))]
    next_number = max(numbers, default=0) + 1
    staged: list[StagedDoc] = []
    for doc in docs:
        original = os.path.abspath(doc.path)
        name = by_original.get(original)
        if name is None:
            while True:
                name = f"{next_number:04d}{_staged_suffix(doc.path)}"
                next_number += 1
                if name not in used:
                    break
            used.add(name)
            by_original[original] = name
        link = staged_dir / name
        try:
            current = os.readlink(link)
        except OSError:
            current = None
        if current != original:
            tmp = staged_dir / f".{name}.{os.getpid()}.tmp"
            if tmp.is_symlink() or tmp.exists():
                tmp.unlink()
            os.symlink(original, tmp)
            os.replace(tmp, link)
        staged.append(StagedDoc(kind, doc.doc_id, name, original, _pages_spec(doc.pages),
                                "" if doc.dpi is None else repr(doc.dpi)))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["doc_id", "path", "pages", "dpi"])
    for s in staged:
        writer.writerow([s.doc_id, s.staged, s.pages, s.dpi])
    manifest_path = staged_dir / f"{kind}.csv"
    _write_if_changed(manifest_path, buf.getvalue())
    # The originals, for people and for merge (records name the staged file as their source).
    rows = [r for r in previous if r.get("kind") != kind] + [asdict(s) for s in staged]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["kind", "doc_id", "staged", "original", "pages", "dpi"],
                            lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    _write_if_changed(staged_dir / ORIGINALS, buf.getvalue())
    # The staged manifest must give the same ids (a manifest strips spaces around a doc_id).
    reread = [d.doc_id for d in from_manifest(manifest_path)]
    for s, got in zip(staged, reread):
        if got != s.doc_id:
            warn(f"warning: doc_id {s.doc_id!r} reads back as {got!r} from the staged manifest")
            s.doc_id = got
    return manifest_path, staged


def staged_documents(run_dir: Path, kind: str) -> list[Document]:
    path = Path(run_dir) / STAGED / f"{kind}.csv"
    return from_manifest(path) if path.exists() else []


# ============================================================================ scripts


EXIT_MEANINGS = {
    0: "every page ok or fallback", 1: "pages missing or failed: resubmit", 2: "only review pages remain",
    3: "usage or configuration error", 4: "quality gate failed", 5: "endpoint unavailable",
    6: "run directory in use by another process", 7: "internal error (a bug)",
    130: "interrupted: resubmit to resume", 143: "killed by SIGTERM",
}


def render_script(*, kind: str, run_dir: Path, python: str, shards: int | None, run_args: Sequence[str],
                  options: SlurmOptions, submit_dir: Path, commit: str | None, job_name: str,
                  generated_at: str | None = None, command: Sequence[str] | None = None) -> str:
    """The text of a self-contained sbatch script.

    ``kind`` "bulk" is an array (one task per shard, ``--shard $SLURM_ARRAY_TASK_ID/N`` into
    RUN/shards/K); "gate" is a single task into RUN/gate. The batch shell runs vlmocr in the
    background and forwards SIGTERM to it (bash runs traps only between commands)."""
    q = shlex.quote
    verb = command[0] if command else "run"
    # Both go into the script unquoted (names of files, a comment, an echo): plain words only.
    for what, word in (("job kind", kind), ("vlmocr command", verb)):
        if not re.fullmatch(r"[a-z][a-z-]*", word):
            raise UsageError(f"{what} {word!r}: expected a plain lowercase word")
    run_dir = Path(run_dir)
    array = kind not in ("gate", "grid")
    if array and not shards:
        raise UsageError("an array job needs the number of shards")
    lines = ["#!/bin/bash"]
    lines.append(f"# vlmocr {kind} job, written by `vlmocr slurm` at {_comment_safe(generated_at or now_iso())}")
    lines.append(f"# (vlmocr from commit {_comment_safe(commit or 'unknown')}).")
    lines.append("# Self-contained: the documents come only from the staged manifest (ASCII symlink names),")
    lines.append("# every value below is shell-quoted. To resubmit (it resumes), run the same")
    lines.append("# `vlmocr slurm` command again, or `sbatch` this file from its own directory (logs are relative).")
    lines.append(f"#SBATCH --job-name={_safe_value('--job-name', job_name)}")
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
MANIFEST="$RUN_DIR/staged/{kind}.csv"
"""
    if array:
        body += f"""N={int(shards)}  # shards
K="${{SLURM_ARRAY_TASK_ID:?this is an array job script: submit it with sbatch}}"
OUT="$RUN_DIR/shards/$K"
TASK="{kind}-$K"
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
JOB_TMP="$(mktemp -d "${TMPDIR:-/tmp}/vlmocr-${SLURM_JOB_ID:-local}.XXXXXX" 2>/dev/null)" \
  || JOB_TMP="$(mktemp -d "/tmp/vlmocr-${SLURM_JOB_ID:-local}.XXXXXX")" || exit 1
export TMPDIR="$JOB_TMP" XDG_CACHE_HOME="$JOB_TMP/cache" VLLM_CACHE_ROOT="$JOB_TMP/vllm"
export TRITON_CACHE_DIR="$JOB_TMP/triton" TORCHINDUCTOR_CACHE_DIR="$JOB_TMP/inductor"
export CUDA_CACHE_PATH="$JOB_TMP/nv" OUTLINES_CACHE_DIR="$JOB_TMP/outlines" FLASHINFER_WORKSPACE_BASE="$JOB_TMP"
mkdir -p "$XDG_CACHE_HOME"
trap 'rm -rf -- "$JOB_TMP"' EXIT

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
        cmd = ['"$PYTHON"', "-m", "vlmocr", *[q(a) for a in command], "--out", '"$OUT"']
    else:
        cmd = ['"$PYTHON"', "-m", "vlmocr", "run", "--manifest", '"$MANIFEST"', "--out", '"$OUT"']
        if array:
            cmd += ["--shard", '"$K/$N"']
        cmd += [q(a) for a in run_args]
    body += f"""echo "== $(date -Is) vlmocr {verb}{' shard $K/$N' if array else ''} -> $OUT"
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
exit "$rc"
"""
    return "\n".join(lines) + "\n" + body


def _comment_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:+-]", "?", text)


def job_name_for(run_dir: Path, kind: str) -> str:
    base = _SAFE_NAME.sub("_", Path(run_dir).name).strip("_.-")[:40] or "run"
    return f"vlmocr-{kind}-{base}"


# ============================================================================ SLURM commands


def _run(cmd: Sequence[str], timeout: float = 60, cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except FileNotFoundError:
        raise SlurmError(f"{cmd[0]} not found: is this a SLURM login node?") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(cmd[:2])} did not answer within {timeout:g} s") from None


def sbatch(script: Path, args: Sequence[str] = ()) -> str:
    """Submit `script` from its own directory (relative log paths); return the job id."""
    cmd = ["sbatch", "--parsable", *args, script.name]
    proc = _run(cmd, cwd=script.parent)
    if proc.returncode != 0:
        raise SlurmError(f"sbatch failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    job_id = proc.stdout.strip().splitlines()[-1].split(";")[0] if proc.stdout.strip() else ""
    if not job_id.isdigit():
        raise SlurmError(f"unexpected sbatch output: {proc.stdout!r} {proc.stderr!r}")
    return job_id


def squeue_tasks(job_id: str) -> list[dict[str, str]]:
    """One dict per job or array task that squeue knows ([] once SLURM forgot the job)."""
    try:
        proc = _run(["squeue", "-h", "-r", "-t", "all", "-j", str(job_id), "-o", "%i|%A|%F|%K|%T|%r|%M|%N"], timeout=30)
    except SlurmError:
        return []
    if proc.returncode != 0:
        return []
    out = []
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 8:
            continue
        jid, raw, array_id, task, state, reason, elapsed, nodes = parts[:8]
        if array_id not in (str(job_id), "N/A") and raw != str(job_id):
            continue
        out.append({"id": jid, "job_id": raw, "array_job_id": array_id if array_id != "N/A" else "",
                    "task": task if task != "N/A" else "", "state": state, "reason": reason,
                    "elapsed": elapsed, "nodes": nodes, "source": "squeue"})
    return out


def sacct_states(job_ids: Sequence[str]) -> dict[str, dict[str, str]]:
    """State and exit code of finished jobs: ``sacct``, or ``sacct -c`` (job completion log)
    when accounting is off (plain sacct then exits 1)."""
    ids = [str(j) for j in job_ids if str(j).isdigit()]
    if not ids:
        return {}
    fields = "JobID,JobName,State,ExitCode,Elapsed"
    out: dict[str, dict[str, str]] = {}
    for variant in (["sacct"], ["sacct", "-c"]):
        try:
            proc = _run([*variant, "-n", "-P", "-j", ",".join(ids), "-o", fields], timeout=30)
        except SlurmError:
            return out
        if proc.returncode != 0:
            continue
        for line in proc.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) < 5:
                continue
            jid = parts[0].split(".")[0]
            if not jid.replace("_", "").isdigit():
                continue
            # The completion log keeps old ids after a reset: the last line is the newest.
            out[jid] = {"name": parts[1], "state": parts[2].split()[0], "exit_code": parts[3],
                        "elapsed": parts[4], "source": " ".join(variant)}
        return out
    return out


def scontrol_release(job_ids: Sequence[str]) -> tuple[bool, str]:
    proc = _run(["scontrol", "release", *map(str, job_ids)])
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()


def scancel(job_ids: Sequence[str]) -> tuple[bool, str]:
    proc = _run(["scancel", *map(str, job_ids)])
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()


def active_tasks(job_id: str) -> list[dict[str, str]]:
    return [t for t in squeue_tasks(job_id) if t["state"] not in TERMINAL_STATES]


# ============================================================================ jobs.json


def load_jobs(run_dir: Path) -> dict[str, Any]:
    data = read_json(Path(run_dir) / SLURM_DIR / JOBS_FILE, None)
    if not isinstance(data, dict):
        data = {"schema": 1, "run_dir": str(Path(run_dir).resolve()), "jobs": [], "events": []}
    data.setdefault("jobs", [])
    data.setdefault("events", [])
    return data


def save_jobs(run_dir: Path, data: dict[str, Any]) -> None:
    write_json(Path(run_dir) / SLURM_DIR / JOBS_FILE, data)


def record_job(run_dir: Path, entry: dict[str, Any]) -> None:
    data = load_jobs(run_dir)
    data["jobs"].append(entry)
    save_jobs(run_dir, data)


def record_event(run_dir: Path, event: dict[str, Any]) -> None:
    data = load_jobs(run_dir)
    data["events"].append({"at": now_iso(), **event})
    save_jobs(run_dir, data)


def latest_job(run_dir: Path, kind: str) -> dict[str, Any] | None:
    jobs = [j for j in load_jobs(run_dir)["jobs"] if j.get("kind") == kind and j.get("job_id")]
    return jobs[-1] if jobs else None


# ============================================================================ submit


@dataclass
class Submission:
    kind: str
    script: Path
    sbatch_args: list[str]
    job_id: str | None = None
    array: str | None = None
    skipped_shards: list[int] = field(default_factory=list)
    note: str = ""


def _compress(numbers: Iterable[int]) -> str:
    return _pages_spec(tuple(sorted(set(numbers))))


def vlmocr_commit() -> str | None:
    from ..run import git_commit

    return git_commit()


def shard_argv(run_dir: Path, k: int, n: int, run_args: Sequence[str]) -> list[str]:
    """The argv (after ``vlmocr``) a bulk task runs, as run.json records it."""
    return ["run", "--manifest", str(Path(run_dir) / STAGED / "bulk.csv"), "--out",
            str(Path(run_dir) / SHARDS / str(k)), "--shard", f"{k}/{n}", *run_args]


# Options that change neither the text nor which pages are owed: a shard finished under other
# values of these is still complete.
_NEUTRAL_OPTIONS = {"--stop-grace": 1, "--workers": 1, "--concurrency": 1, "--request-timeout": 1, "--json": 0,
                    "--adaptive": 0, "--fixed-concurrency": 0}


def _comparable(argv: Sequence[str]) -> list[str]:
    out, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
            continue
        name = a.split("=", 1)[0]
        if name in _NEUTRAL_OPTIONS:
            skip = _NEUTRAL_OPTIONS[name] if "=" not in a else 0
            continue
        out.append(a)
    return out


def complete_shards(run_dir: Path, n: int, run_args: Sequence[str]) -> list[int]:
    """Shards whose last run finished with exit 0 under this command (up to options that change
    neither text nor work, e.g. --stop-grace, --workers), after the staged manifest last changed:
    resubmitting need not start them again (no server start, no GPU)."""
    run_dir = Path(run_dir)
    manifest = run_dir / STAGED / "bulk.csv"
    try:
        manifest_mtime = manifest.stat().st_mtime
    except OSError:
        return []
    done = []
    for k in range(1, n + 1):
        path = run_dir / SHARDS / str(k) / "run.json"
        info = read_json(path, {}) or {}
        summary = info.get("summary") or {}
        argv = (info.get("current") or {}).get("argv")
        try:
            fresh = path.stat().st_mtime > manifest_mtime
        except OSError:
            continue
        if (fresh and summary.get("exit_code") == 0 and isinstance(argv, list)
                and _comparable(argv) == _comparable(shard_argv(run_dir, k, n, run_args))):
            done.append(k)
    return done


def check_not_active(run_dir: Path, kind: str) -> None:
    prev = latest_job(run_dir, kind)
    if prev is None:
        return
    live = active_tasks(prev["job_id"])
    if live:
        states = ", ".join(sorted({t["state"] for t in live}))
        raise UsageError(
            f"the previous {kind} job {prev['job_id']} is still {states} in {run_dir}: wait for it "
            f"or cancel it (scancel {prev['job_id']}) before submitting again")


def prepare_job(run_dir: Path, kind: str, *, paths: Sequence[str] = (), manifest: str | Path | None = None,
                shards: int | None, run_args: Sequence[str], options: SlurmOptions, python: str | None = None,
                warn=print) -> tuple[Path, list[StagedDoc]]:
    """Stage the inputs and write RUN/slurm/<kind>.sbatch; return the script and the staged docs."""
    run_dir = Path(run_dir).resolve()
    _, staged = stage_documents(run_dir, kind, paths, manifest, warn=warn)
    slurm_dir = run_dir / SLURM_DIR
    (slurm_dir / "logs").mkdir(parents=True, exist_ok=True)
    text = render_script(
        kind=kind, run_dir=run_dir, python=python or sys.executable, shards=shards, run_args=run_args,
        options=options, submit_dir=Path.cwd(), commit=vlmocr_commit(), job_name=job_name_for(run_dir, kind))
    script = slurm_dir / f"{kind}.sbatch"
    script.write_text(text, encoding="utf-8")
    script.chmod(0o755)
    return script, staged


def submit(run_dir: Path, *, paths: Sequence[str] = (), manifest: str | Path | None = None, shards: int,
           run_args: Sequence[str] = (), options: SlurmOptions | None = None, hold: bool = False,
           dependency: str | None = None, dry_run: bool = False, all_shards: bool = False,
           python: str | None = None, kind: str = "bulk", argv: Sequence[str] | None = None,
           warn=print) -> Submission:
    """Stage, write the array script and submit it (``sbatch --parsable``); record it in jobs.json.

    Resubmitting the same command resumes: same staged names, same shard directories. Shards
    that already finished under exactly this command are left out of the array unless
    ``all_shards``; with nothing left, nothing is submitted."""
    if shards < 1:
        raise UsageError("--shards must be at least 1")
    options = options or SlurmOptions()
    run_dir = Path(run_dir).resolve()
    if not dry_run:
        check_not_active(run_dir, kind)
    script, staged = prepare_job(run_dir, kind, paths=paths, manifest=manifest, shards=shards, run_args=run_args,
                                 options=options, python=python, warn=warn)
    empty = [k for k in range(1, shards + 1) if not any(shard_of(s.doc_id, shards) == k for s in staged)]
    if empty:
        warn(f"note: shard(s) {_compress(empty)} of {shards} hold no document (they finish at once)")
    args: list[str] = []
    sub = Submission(kind, script, args)
    todo = list(range(1, shards + 1))
    if not all_shards:
        done = complete_shards(run_dir, shards, run_args)
        sub.skipped_shards = done
        todo = [k for k in todo if k not in done]
    if not todo:
        sub.note = f"all {shards} shards are complete under this command: nothing submitted (--all-shards to rerun)"
        return sub
    if len(todo) < shards:
        sub.array = _compress(todo) + (f"%{options.max_running}" if options.max_running else "")
        args.append(f"--array={sub.array}")
    else:
        sub.array = f"1-{shards}" + (f"%{options.max_running}" if options.max_running else "")
    if hold:
        args.append("--hold")
    if dependency:
        args.append(f"--dependency={_safe_value('--dependency', dependency)}")
    if dry_run:
        sub.note = "dry run: nothing submitted"
        return sub
    sub.job_id = sbatch(script, args)
    record_job(run_dir, {
        "kind": kind, "job_id": sub.job_id, "array": sub.array, "shards": shards, "held": hold,
        "dependency": dependency, "script": str(script.relative_to(run_dir)), "submitted_at": now_iso(),
        "sbatch": ["sbatch", "--parsable", *args, script.name], "run_args": list(run_args),
        "documents": len(staged), "skipped_shards": sub.skipped_shards, "argv": list(argv or sys.argv[1:]),
        "cwd": str(Path.cwd()),
    })
    return sub


# ============================================================================ grid


def submit_grid(run_dir: Path, grid_args: Sequence[str], *, options: SlurmOptions | None = None,
                dry_run: bool = False, python: str | None = None) -> dict[str, Any]:
    """One job that reads a prompt × dpi (× profile) grid against ONE server it starts
    (`vlmocr grid --serve P …`), so the model loads once for every cell. Results land in
    RUN/grid (grid.json, one run directory per cell)."""
    options = options or SlurmOptions()
    run_dir = Path(run_dir).resolve()
    if "--out" in grid_args or "-o" in grid_args:
        raise UsageError("the grid writes to RUN/grid: give --out to `vlmocr slurm grid`, not to the grid")
    if "--truth" not in grid_args:
        raise UsageError("a grid needs --truth (pass the `vlmocr grid` options after --)")
    (run_dir / SLURM_DIR / "logs").mkdir(parents=True, exist_ok=True)
    script = run_dir / SLURM_DIR / "grid.sbatch"
    text = render_script(kind="grid", run_dir=run_dir, python=python or sys.executable, shards=None, run_args=(),
                         options=options, submit_dir=Path.cwd(), commit=vlmocr_commit(),
                         job_name=job_name_for(run_dir, "grid"),
                         command=["grid", *[os.path.abspath(a) if os.path.exists(a) else a for a in grid_args]])
    script.write_text(text, encoding="utf-8")
    result: dict[str, Any] = {"script": str(script), "job_id": None}
    if not dry_run:
        result["job_id"] = sbatch(script, [])
        record_job(run_dir, {"kind": "grid", "job_id": result["job_id"], "array": None, "shards": None,
                             "held": False, "dependency": None, "script": str(script.relative_to(run_dir)),
                             "submitted_at": now_iso(), "sbatch": ["sbatch", "--parsable", script.name],
                             "run_args": list(grid_args), "argv": sys.argv[1:], "cwd": str(Path.cwd())})
    return result


# ============================================================================ status


def _tally_shard(run_dir: Path, docs: list[Document]) -> dict[str, Any]:
    """Completeness of one run directory for `docs`: pages final / total, by status group."""
    from ..exceptions import BadInput
    from ..record import STATUS_GROUP, Status
    from ..render import count_pages
    from ..store import PAGES_FILE, final_records

    info = read_json(run_dir / "run.json", {}) or {}
    keys = set(info.get("keys") or [])
    finals = final_records(run_dir / PAGES_FILE, keys=keys) if keys else {}
    by_doc: dict[str, dict[int, dict]] = {}
    doc_pages: dict[str, int] = {}
    for (doc_id, page), rec in finals.items():
        by_doc.setdefault(doc_id, {})[page] = rec
        if rec.get("doc_pages"):
            doc_pages[doc_id] = int(rec["doc_pages"])
    row = {"pages": 0, "final": 0, "ok": 0, "fallback": 0, "review": 0, "failed": 0, "missing": 0}
    for doc in docs:
        recs = by_doc.get(doc.doc_id, {})
        n = doc_pages.get(doc.doc_id)
        if n is None and not (0 in recs):
            try:
                n = count_pages(doc.path)
            except BadInput:
                n = None
            except Exception:
                n = None
        wanted = [0] if n is None else (list(doc.pages) if doc.pages else list(range(1, n + 1)))
        if n is not None and 0 in recs and not any(p in recs for p in wanted):
            wanted = [0]
        for p in wanted:
            row["pages"] += 1
            rec = recs.get(p)
            if rec is None:
                row["missing"] += 1
                continue
            row["final"] += 1
            row[STATUS_GROUP[Status(rec["status"])]] += 1
    summary = info.get("summary") or {}
    row["exit_code"] = summary.get("exit_code") if summary else None
    row["updated"] = (info.get("current") or {}).get("finished_at") or (info.get("current") or {}).get("started_at")
    return row


def task_file(run_dir: Path, name: str) -> dict[str, Any]:
    return read_json(run_dir / SLURM_DIR / "tasks" / f"{name}.json", {}) or {}


def status(run_dir: Path) -> dict[str, Any]:
    """Jobs (squeue; sacct or ``sacct -c`` for jobs SLURM's queue forgot) and, per shard, pages
    final / total with ok, fallback, review, failed and missing, read from the run directories."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / SLURM_DIR).is_dir() and not (run_dir / STAGED).is_dir():
        raise UsageError(f"{run_dir} is not a `vlmocr slurm` run directory (no slurm/ or staged/)")
    jobs = load_jobs(run_dir)
    out: dict[str, Any] = {"run_dir": str(run_dir), "jobs": [], "shards": [], "gate": None}
    bulk = latest_job(run_dir, "bulk")
    n = int(bulk["shards"]) if bulk else 0
    if not n:
        n = len([p for p in (run_dir / SHARDS).glob("*") if p.name.isdigit()]) if (run_dir / SHARDS).is_dir() else 0
    for job in jobs["jobs"]:
        tasks = squeue_tasks(job["job_id"]) if job.get("job_id") else []
        out["jobs"].append({**{k: job.get(k) for k in ("kind", "job_id", "array", "held", "submitted_at")},
                            "tasks": tasks})
    # Per task: squeue for the latest submission, then the task's own file, then sacct / sacct -c.
    task_state: dict[str, dict[str, Any]] = {}
    for kind in ("gate", "bulk"):
        latest = latest_job(run_dir, kind)
        if latest is None:
            continue
        for t in squeue_tasks(latest["job_id"]):
            name = "gate" if kind == "gate" else f"bulk-{t['task']}" if t["task"].isdigit() else None
            if name:
                task_state[name] = {"state": t["state"], "reason": t["reason"], "job_id": t["job_id"], "source": "squeue"}
            elif kind == "bulk" and t["task"]:  # pending tasks may still show as a range, e.g. 2-3
                for k in _expand(t["task"]):
                    task_state[f"bulk-{k}"] = {"state": t["state"], "reason": t["reason"], "job_id": t["job_id"],
                                               "source": "squeue"}
    names = (["gate"] if latest_job(run_dir, "gate") else []) + [f"bulk-{k}" for k in range(1, n + 1)]
    lookup = []
    for name in names:
        tf = task_file(run_dir, name)
        if name in task_state:
            # squeue has the state; the task's own file the exit code of vlmocr, for this job.
            if (task_state[name]["state"] in TERMINAL_STATES and tf.get("state") == "FINISHED"
                    and str(tf.get("job_id")) == str(task_state[name].get("job_id"))):
                task_state[name]["exit_code"] = tf.get("exit_code")
            continue
        if tf.get("state") == "FINISHED":
            rc = tf.get("exit_code")
            task_state[name] = {"state": "COMPLETED" if rc == 0 else "FAILED", "exit_code": rc,
                                "job_id": tf.get("job_id"), "source": "task file"}
        elif tf.get("job_id"):
            lookup.append((name, tf["job_id"]))
    if lookup:
        acct = sacct_states([j for _, j in lookup])
        for name, jid in lookup:
            if jid in acct:
                task_state[name] = {**acct[jid], "job_id": jid}
            else:
                task_state[name] = {"state": "UNKNOWN", "job_id": jid, "source": "task file (started, no end)"}
    bulk_docs = staged_documents(run_dir, "bulk")
    for k in range(1, n + 1):
        docs = [d for d in bulk_docs if shard_of(d.doc_id, n) == k]
        row = {"shard": k, "docs": len(docs), **_tally_shard(run_dir / SHARDS / str(k), docs),
               "job": task_state.get(f"bulk-{k}", {})}
        out["shards"].append(row)
    gate = read_json(run_dir / SLURM_DIR / GATE_FILE)
    if isinstance(gate, dict):
        gdocs = staged_documents(run_dir, "gate")
        out["gate"] = {"max_cer": gate.get("max_cer"), "gate_job": gate.get("gate_job"),
                       "bulk_job": gate.get("bulk_job"), "job": task_state.get("gate", {}),
                       "run": _tally_shard(run_dir / GATE_RUN, gdocs),
                       "decision": {k: (gate.get("decision") or {}).get(k) for k in ("action", "message", "at")}
                       if gate.get("decision") else None}
    totals = {k: sum(r[k] for r in out["shards"]) for k in ("docs", "pages", "final", "ok", "fallback", "review",
                                                           "failed", "missing")}
    out["totals"] = totals
    return out


def _expand(spec: str) -> list[int]:
    spec = spec.split("%")[0].strip("[]")
    out: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m:
            out.extend(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return out


def format_status(st: dict[str, Any]) -> str:
    lines = [f"run {st['run_dir']}"]
    for job in st["jobs"]:
        states: dict[str, int] = {}
        for t in job["tasks"]:
            states[t["state"]] = states.get(t["state"], 0) + 1
        live = ", ".join(f"{s} {c}" for s, c in sorted(states.items())) or "not in the queue"
        lines.append(f"  {job['kind']:<5} job {job['job_id']:<8} array {job.get('array') or '-':<8} "
                     f"submitted {job.get('submitted_at') or '?'}  squeue: {live}")
    g = st.get("gate")
    if g:
        r = g["run"]
        gstate = g["job"].get("state", "?") + (f"({g['job']['exit_code']})" if g["job"].get("exit_code") else "")
        lines.append(f"gate: job {g['gate_job']} {gstate}, {r['final']}/{r['pages']} pages final, "
                     f"max CER {g['max_cer']}")
        if g.get("decision"):
            lines.append(f"  decision: {g['decision']['message']}")
        else:
            lines.append("  not decided yet: `vlmocr slurm release RUN`")
    header = f"{'shard':>5} {'job':<24} {'docs':>5} {'final/pages':>12} {'ok':>6} {'fallbk':>6} {'review':>6} " \
             f"{'failed':>6} {'missing':>7} {'exit':>4}"
    lines.append(header)
    for r in st["shards"]:
        job = r["job"]
        state = job.get("state", "-")
        if job.get("exit_code") not in (None, "") and state not in ("COMPLETED",):
            state += f"({job['exit_code']})"
        if job.get("reason") and job.get("reason") not in ("None",) and state == "PENDING":
            state += f" {job['reason']}"
        lines.append(f"{r['shard']:>5} {state[:24]:<24} {r['docs']:>5} {str(r['final']) + '/' + str(r['pages']):>12} "
                     f"{r['ok']:>6} {r['fallback']:>6} {r['review']:>6} {r['failed']:>6} {r['missing']:>7} "
                     f"{'-' if r['exit_code'] is None else r['exit_code']:>4}")
    t = st["totals"]
    lines.append(f"{'all':>5} {'':<24} {t['docs']:>5} {str(t['final']) + '/' + str(t['pages']):>12} {t['ok']:>6} "
                 f"{t['fallback']:>6} {t['review']:>6} {t['failed']:>6} {t['missing']:>7}")
    return "\n".join(lines)


# ============================================================================ versions (in every log)


def print_versions() -> None:
    """Printed at the top of every task log: what ran, where, from which commit."""
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__
    from ..run import git_commit

    def v(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    print(f"== vlmocr {__version__} commit {git_commit() or 'unknown'} ({Path(__file__).resolve().parents[1]})")
    print(f"== python {platform.python_version()} ({sys.executable}) on {socket.gethostname()} {platform.platform()}")
    pkgs = ["pypdfium2", "pillow", "httpx2", "pydantic", "rapidocr", "onnxruntime", "vllm", "sglang", "torch",
            "transformers"]
    print("== " + " ".join(f"{p}={v(p)}" for p in pkgs if v(p)))
    env = {k: os.environ.get(k) for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
                                          "SLURM_JOB_PARTITION", "SLURM_CPUS_PER_TASK", "CUDA_VISIBLE_DEVICES")}
    print("== " + " ".join(f"{k}={val}" for k, val in env.items() if val is not None))
    if shutil.which("sbatch"):
        try:
            out = subprocess.run(["sbatch", "--version"], capture_output=True, text=True, timeout=10)
            print(f"== {out.stdout.strip()}")
        except Exception:
            pass
    sys.stdout.flush()


if __name__ == "__main__":  # `python -m vlmocr.cluster.slurm versions`, from the batch scripts
    if sys.argv[1:] == ["versions"]:
        print_versions()
    else:
        print("usage: python -m vlmocr.cluster.slurm versions", file=sys.stderr)
        sys.exit(3)
