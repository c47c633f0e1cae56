#!/usr/bin/env bash
# Stop the single-node test SLURM started by scripts/slurm-up.sh.
#
#   sudo scripts/slurm-down.sh           # stop slurmd + slurmctld (munged keeps running)
#   sudo scripts/slurm-down.sh --munge   # also stop munged
#   sudo scripts/slurm-down.sh --purge   # also stop munged and delete controller state + spool
#                                        # (queued/finished job records); keeps config and key
#
# Running/pending jobs are cancelled with scancel first; then only the daemons named in the pid
# files are signalled.
set -euo pipefail

QUIET=0 MUNGE=0 PURGE=0
for arg in "$@"; do
  case "$arg" in
    --quiet) QUIET=1 ;;
    --munge) MUNGE=1 ;;
    --purge) MUNGE=1 PURGE=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "slurm-down: unknown argument: $arg" >&2; exit 2 ;;
  esac
done
say() { [ $QUIET = 1 ] || echo "[slurm-down] $*"; }
[ "$(id -u)" -eq 0 ] || { echo "slurm-down: must run as root (try: sudo $0)" >&2; exit 1; }

stop() {  # stop PIDFILE COMM
  local pidfile=$1 comm=$2 pid
  if [ ! -s "$pidfile" ]; then say "$comm: no pid file ($pidfile)"; return 0; fi
  pid=$(cat "$pidfile")
  if ! kill -0 "$pid" 2>/dev/null || [ "$(cat /proc/"$pid"/comm 2>/dev/null)" != "$comm" ]; then
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
# re-adopt old steps from the spool directory.
if scontrol ping 2>/dev/null | grep -q 'is UP'; then
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
stop /run/slurmd.pid slurmd
stop /run/slurmctld.pid slurmctld
left=$(pgrep -x slurmstepd | tr '\n' ' ' || true)
[ -z "${left// }" ] || say "warning: slurmstepd still running (pids $left); they end with their jobs"
if [ $MUNGE = 1 ]; then
  stop /run/munge/munged.pid munged
fi
if [ $PURGE = 1 ]; then
  rm -rf /var/lib/slurm/slurmctld/* /var/spool/slurmd/*
  say "purged /var/lib/slurm/slurmctld and /var/spool/slurmd"
fi
