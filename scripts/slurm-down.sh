#!/usr/bin/env bash
# Stop the private test SLURM started by scripts/slurm-up.sh (the daemons whose pid files are in
# its directory, see scripts/slurm-env.sh). A system cluster and the system's munged are never
# signalled.
#
#   sudo scripts/slurm-down.sh              # stop slurmd + slurmctld, and the private munged if any
#   sudo scripts/slurm-down.sh --keep-munge # leave the private munged running
#   sudo scripts/slurm-down.sh --purge      # also delete controller state + spool (queued/finished
#                                           # job records; ids restart at 1); keeps config and key
#
# Running/pending jobs of the private cluster are cancelled with scancel first; then only the
# daemons named in its pid files are signalled.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/slurm-env.sh
. "$HERE/slurm-env.sh"

QUIET=0 KEEP_MUNGE=0 PURGE=0
for arg in "$@"; do
  case "$arg" in
    --quiet) QUIET=1 ;;
    --keep-munge) KEEP_MUNGE=1 ;;
    --munge) ;;  # accepted for old callers: the private munged is always stopped now
    --purge) PURGE=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "slurm-down: unknown argument: $arg" >&2; exit 2 ;;
  esac
done
say() { [ $QUIET = 1 ] || echo "[slurm-down] $*"; }
[ "$(id -u)" -eq 0 ] || { echo "slurm-down: must run as root (try: sudo $0)" >&2; exit 1; }

stop() {  # stop PIDFILE COMM
  local pidfile=$1 comm=$2 pid
  if [ ! -s "$pidfile" ]; then say "$comm: no pid file ($pidfile)"; return 0; fi
  pid=$(cat "$pidfile")
  if ! slurm_pid_alive "$pidfile" "$comm"; then
    say "$comm: not running (stale pid file)"; rm -f "$pidfile"; return 0
  fi
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    say "$comm (pid $pid) ignored SIGTERM for 10 s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$pidfile"
  say "$comm stopped (pid $pid)"
}

# Cancel the jobs first, so their slurmstepd/job processes end with SIGTERM (KillWait later
# SIGKILL) instead of being orphaned: slurmstepd outlives slurmd, and a new slurmd would
# re-adopt old steps from the spool directory. SLURM_CONF (slurm-env.sh) aims these at the
# private cluster only.
if [ -f "$SLURM_CONF" ] && slurm_pid_alive "$SLURM_CTLD_PID" slurmctld \
   && timeout 20 scontrol ping 2>/dev/null | grep -q 'is UP'; then
  jobs=$(squeue -h -t PENDING,RUNNING,SUSPENDED,COMPLETING -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')
  if [ -n "${jobs// }" ]; then
    say "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 80); do
      [ -z "$(squeue -h -t RUNNING,COMPLETING,PENDING -o %A 2>/dev/null)" ] && break; sleep 0.25
    done
  fi
fi
stop "$SLURM_SLURMD_PID" slurmd
stop "$SLURM_CTLD_PID" slurmctld
if [ $KEEP_MUNGE = 0 ] && [ -e "$SLURM_MUNGE_PID" ]; then
  stop "$SLURM_MUNGE_PID" munged
  rm -f "$SLURM_MUNGE_SOCKET" "$SLURM_MUNGE_SOCKET.lock"
fi
if [ $PURGE = 1 ]; then
  rm -rf "${SLURM_STATE_DIR:?}"/* "${SLURM_SPOOL_DIR:?}"/*
  say "purged $SLURM_STATE_DIR and $SLURM_SPOOL_DIR"
fi
