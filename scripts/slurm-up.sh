#!/usr/bin/env bash
# Bring up the private single-node SLURM cluster of the test suite on loopback, beside whatever
# the machine already runs: its own slurm.conf, state, spool, logs, pid files and ports (and its
# own munged when none answers), all under one directory (scripts/slurm-env.sh). A system
# cluster (/etc/slurm, ports 6817/6818) and its daemons are never touched.
#
#   sudo scripts/slurm-up.sh            # install (if needed), configure, start, smoke-test
#   sudo scripts/slurm-up.sh --verify   # ... plus array / hold+release / B:TERM signal checks (~40 s)
#   sudo scripts/slurm-down.sh          # stop the private daemons (config, key and state are kept)
#   export SLURM_CONF=/tmp/vlmocr-slurm/slurm.conf   # sbatch/squeue/scontrol then talk to it
#
# Idempotent: a second run sees the cluster is up (and the config unchanged) and only re-checks it.
# Debian/Ubuntu only (apt-get, slurm-wlm, munge). Daemons are started directly, not via systemd,
# so it also works in containers without an init system. Must run as root (apt-get, and slurmd,
# which starts jobs as their users).
#
# Environment knobs (all optional):
#   VLMOCR_SLURM_DIR=DIR       the private directory (default /tmp/vlmocr-slurm)
#   VLMOCR_SLURM_PORT=N        slurmctld's port (default 16817); slurmd listens on N+1
#   VLMOCR_SLURM_MUNGE=private start a private munged even if the system's answers
#   VLMOCR_SLURM_CPUS=N        advertise N CPUs instead of the real count (adds
#                              SlurmdParameters=config_overrides); lets more jobs share a small node
#   VLMOCR_SLURM_MEM_MARGIN=MB memory kept back from `slurmd -C` RealMemory (default: max(512, 5%))
#   VLMOCR_SLURM_DEFMEM=MB     DefMemPerCPU (default 1024)
#   VLMOCR_SLURM_NO_INSTALL=1  never call apt-get (fail if the binaries are missing)
#
# Docs: docs/slurm-testing.md
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/slurm-env.sh
. "$HERE/slurm-env.sh"

VERIFY=0
for arg in "$@"; do
  case "$arg" in
    --verify) VERIFY=1 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "slurm-up: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

T0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
log() { printf '[slurm-up %5ss] %s\n' "$(since "$T0")" "$*"; }
die() { log "ERROR: $*"; print_logs_hint; exit 1; }

CONF=$SLURM_CONF
MUNGE_LOG=$SLURM_MUNGE_DIR/munged.log

print_logs_hint() {
  echo "  logs: $SLURM_CTLD_LOG  $SLURM_SLURMD_LOG  (config: $CONF)" >&2
  for f in "$SLURM_CTLD_LOG" "$SLURM_SLURMD_LOG" "$MUNGE_LOG"; do
    [ -s "$f" ] && { echo "  --- tail $f" >&2; tail -n 15 "$f" >&2; }
  done
  return 0
}

[ "$(id -u)" -eq 0 ] || { echo "slurm-up: must run as root (try: sudo $0)" >&2; exit 1; }
case "$SLURM_CTLD_PORT" in 6816|6817|6818) die "VLMOCR_SLURM_PORT=$SLURM_CTLD_PORT collides with a system cluster's ports" ;; esac

# --- 1. packages -------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v sbatch >/dev/null; then
  [ "${VLMOCR_SLURM_NO_INSTALL:-0}" = 1 ] && die "slurm-wlm/munge not installed and VLMOCR_SLURM_NO_INSTALL=1"
  log "installing slurm-wlm and munge with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d: stop the packages from auto-starting services on hosts that do run an init
  # system; this script starts its own daemons, with its own config.
  had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1
  [ $had_policy = 1 ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }
  # Their names: the [slurm] entries of scripts/system-packages.txt, the one list of the tests' packages.
  mapfile -t slurm_pkgs < <(sed -e 's/#.*//' "$(dirname "$0")/system-packages.txt" | awk '$2 == "[slurm]" {print $1}')
  apt-get install -y -qq --no-install-recommends "${slurm_pkgs[@]}" >/dev/null || {
    [ $had_policy = 1 ] || rm -f /usr/sbin/policy-rc.d; die "apt-get install failed"; }
  [ $had_policy = 1 ] || rm -f /usr/sbin/policy-rc.d
fi
log "slurm $(slurmctld -V | awk '{print $2}'), munge $(munged --version 2>&1 | awk '{print $1}' | sed 's/munge-//')"
getent passwd slurm >/dev/null || die "no user 'slurm' (the slurm-wlm package creates it)"
getent passwd munge >/dev/null || die "no user 'munge' (the munge package creates it)"

# --- 2. the private directory ----------------------------------------------------------------------
# Root writes here: refuse a directory (or symlink) someone else could have planted in /tmp.
D=$VLMOCR_SLURM_DIR
if [ -e "$D" ] || [ -L "$D" ]; then
  { [ -d "$D" ] && [ ! -L "$D" ]; } || die "$D exists and is not a directory"
  [ "$(stat -c %u "$D")" = 0 ] || die "$D is not owned by root"
  case "$(stat -c %A "$D")" in ?????w????|????????w?) die "$D is writable by group or others" ;; esac
else
  install -d -m 0755 "$D"
fi
install -d -m 0755 -o root -g root "$SLURM_RUN_DIR" "$SLURM_SPOOL_DIR"
install -d -m 0755 -o slurm -g slurm "$SLURM_STATE_DIR" "$SLURM_LOG_DIR"
for f in "$SLURM_CTLD_LOG" "$SLURM_JOBCOMP_LOG"; do touch "$f" && chown slurm:slurm "$f"; done

# --- 3. munge ------------------------------------------------------------------------------------
# The system's munged when it answers on its default socket (a system cluster relies on it; it is
# only used, never restarted), else a private one on its own socket with its own key: slurm.conf's
# AuthInfo then points the daemons and every client at it.
private_munge_ok() {
  munge --socket="$SLURM_MUNGE_SOCKET" -n 2>/dev/null | unmunge --socket="$SLURM_MUNGE_SOCKET" >/dev/null 2>&1
}
AUTHINFO=""
if slurm_pid_alive "$SLURM_MUNGE_PID" munged && private_munge_ok; then
  log "private munged already running (socket $SLURM_MUNGE_SOCKET)"
  AUTHINFO="AuthInfo=socket=$SLURM_MUNGE_SOCKET"
elif [ "${VLMOCR_SLURM_MUNGE:-auto}" != private ] && munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "using the system's munged (default socket)"
else
  log "starting a private munged (as user munge, socket $SLURM_MUNGE_SOCKET)"
  # munged insists: the socket's directory searchable by all, the key readable by its owner only.
  install -d -m 0755 -o munge -g munge "$SLURM_MUNGE_DIR"
  if [ ! -s "$SLURM_MUNGE_DIR/munge.key" ]; then
    if command -v mungekey >/dev/null; then
      mungekey --create --keyfile="$SLURM_MUNGE_DIR/munge.key" --force
    else
      dd if=/dev/urandom bs=1 count=1024 of="$SLURM_MUNGE_DIR/munge.key" status=none
    fi
  fi
  chown munge:munge "$SLURM_MUNGE_DIR/munge.key"; chmod 0400 "$SLURM_MUNGE_DIR/munge.key"
  # A stale pid/socket from a killed munged makes the new one refuse to start.
  rm -f "$SLURM_MUNGE_PID" "$SLURM_MUNGE_SOCKET" "$SLURM_MUNGE_SOCKET.lock"
  runuser -u munge -- munged --socket="$SLURM_MUNGE_SOCKET" --key-file="$SLURM_MUNGE_DIR/munge.key" \
    --pid-file="$SLURM_MUNGE_PID" --log-file="$MUNGE_LOG" --seed-file="$SLURM_MUNGE_DIR/munged.seed" \
    || die "munged failed to start (see $MUNGE_LOG)"
  for _ in $(seq 50); do private_munge_ok && break; sleep 0.1; done
  private_munge_ok || die "the private munged does not answer (see $MUNGE_LOG)"
  AUTHINFO="AuthInfo=socket=$SLURM_MUNGE_SOCKET"
fi

# --- 4. slurm.conf -----------------------------------------------------------------------------
HOST_SHORT=$(hostname -s)
read -r REAL_CPUS REAL_MEM < <(slurmd -C | awk '
  /^NodeName=/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "CPUs") c = kv[2]; if (kv[1] == "RealMemory") m = kv[2] } }
  END { print c, m }')
[ -n "$REAL_CPUS" ] && [ -n "$REAL_MEM" ] || die "could not parse 'slurmd -C'"
MARGIN=${VLMOCR_SLURM_MEM_MARGIN:-$(( REAL_MEM / 20 > 512 ? REAL_MEM / 20 : 512 ))}
NODE_MEM=$(( REAL_MEM - MARGIN ))
CPUS=${VLMOCR_SLURM_CPUS:-$REAL_CPUS}
DEFMEM=${VLMOCR_SLURM_DEFMEM:-1024}
SLURMD_PARAMS=""
# slurmd -C reports the topology; we only give CPUs (+ memory) so slurmctld accepts any socket
# layout. More CPUs than the hardware has would drain the node unless config_overrides is set.
[ "$CPUS" != "$REAL_CPUS" ] && SLURMD_PARAMS="SlurmdParameters=config_overrides"

NEW_CONF=$(mktemp)
trap 'rm -f "$NEW_CONF"' EXIT
cat >"$NEW_CONF" <<END_OF_CONF
# Written by scripts/slurm-up.sh (vlmocr) -- the test suite's private single-node cluster on
# loopback. Do not edit; change the script instead (it rewrites this file and restarts the
# daemons if it differs). Clients find it through SLURM_CONF=$CONF.
ClusterName=vlmocr-test
SlurmctldHost=${HOST_SHORT}(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
$AUTHINFO
# Not 6817/6818: a system cluster on this machine keeps its ports.
SlurmctldPort=$SLURM_CTLD_PORT
SlurmdPort=$SLURM_SLURMD_PORT
StateSaveLocation=$SLURM_STATE_DIR
SlurmdSpoolDir=$SLURM_SPOOL_DIR
SlurmctldPidFile=$SLURM_CTLD_PID
SlurmdPidFile=$SLURM_SLURMD_PID
SlurmctldLogFile=$SLURM_CTLD_LOG
SlurmdLogFile=$SLURM_SLURMD_LOG
SlurmctldDebug=info
SlurmdDebug=info

# No cgroups: process tracking by /proc parent links, no task binding/confinement.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Finished jobs are appended here; 'sacct -c' reads it (plain 'sacct' exits 1 without accounting).
JobCompType=jobcomp/filetxt
JobCompLoc=$SLURM_JOBCOMP_LOG
MpiDefault=none
SwitchType=switch/none
LaunchParameters=use_interactive_step

# Consumable cores + memory so several jobs / array tasks share the node.
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$DEFMEM
# Schedule on every event and at least every 2 s (default 60 s), backfill every 2 s (default 30).
SchedulerParameters=sched_interval=2,bf_interval=2,batch_sched_delay=0
# (SchedulerTimeSlice only matters for gang scheduling, which is off.)

# Short timeouts so tests do not wait.
ReturnToService=2
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
# SIGTERM at the time limit, SIGKILL KillWait s later; no grace beyond --time.
KillWait=5
OverTimeLimit=0
# Finished jobs stay visible to squeue/scontrol for 5 min.
MinJobAge=300
MaxJobCount=10000
MaxArraySize=1001
$SLURMD_PARAMS

NodeName=${HOST_SHORT} NodeAddr=127.0.0.1 NodeHostname=${HOST_SHORT} CPUs=${CPUS} RealMemory=${NODE_MEM} State=UNKNOWN
PartitionName=debug Nodes=${HOST_SHORT} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
END_OF_CONF

CONF_CHANGED=0
if [ ! -f "$CONF" ] || ! cmp -s "$NEW_CONF" "$CONF"; then
  CONF_CHANGED=1
  install -m 0644 "$NEW_CONF" "$CONF"
  log "wrote $CONF (node $HOST_SHORT: CPUs=$CPUS RealMemory=$NODE_MEM of $REAL_MEM MB, DefMemPerCPU=$DEFMEM," \
      "ports $SLURM_CTLD_PORT/$SLURM_SLURMD_PORT)"
else
  log "$CONF unchanged"
fi

# --- 5. daemons --------------------------------------------------------------------------------
if [ $CONF_CHANGED = 1 ] && { slurm_pid_alive "$SLURM_CTLD_PID" slurmctld || slurm_pid_alive "$SLURM_SLURMD_PID" slurmd; }; then
  log "config changed: restarting the private daemons"
  "$HERE"/slurm-down.sh --quiet --keep-munge
fi

if slurm_pid_alive "$SLURM_CTLD_PID" slurmctld; then
  log "slurmctld already running (pid $(cat "$SLURM_CTLD_PID"))"
else
  log "starting slurmctld (port $SLURM_CTLD_PORT)"
  slurmctld -f "$CONF" || die "slurmctld failed to start"
fi
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.2; done
scontrol ping 2>/dev/null | grep -q 'is UP' || die "slurmctld does not answer 'scontrol ping'"

if slurm_pid_alive "$SLURM_SLURMD_PID" slurmd; then
  log "slurmd already running (pid $(cat "$SLURM_SLURMD_PID"))"
else
  log "starting slurmd (port $SLURM_SLURMD_PORT)"
  slurmd -f "$CONF" || die "slurmd failed to start"
fi

# --- 6. wait for the node ------------------------------------------------------------------------
node_state() { sinfo -h -N -n "$HOST_SHORT" -o '%T' 2>/dev/null | head -n1; }
state=""
for i in $(seq 120); do
  state=$(node_state)
  case "$state" in
    idle|mixed|allocated|completing) break ;;
    down*|drain*|drained*|fail*)
      # ReturnToService=2 returns a DOWN node when it registers, but not one DRAINed by an admin
      # or by a failed registration that has since been fixed (e.g. "Low RealMemory").
      if [ "$i" -gt 4 ]; then
        log "node is $state ($(scontrol show node "$HOST_SHORT" | sed -n 's/.*Reason=\(.*\)/\1/p')); resuming"
        scontrol update nodename="$HOST_SHORT" state=resume 2>/dev/null || true
      fi ;;
  esac
  sleep 0.5
done
case "$state" in
  idle|mixed|allocated|completing) log "node $HOST_SHORT is $state" ;;
  *) die "node $HOST_SHORT did not become idle (state: '${state:-no answer}')" ;;
esac

# --- 7. smoke test ---------------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/vlmocr-slurm-up.XXXXXX)
chmod 0755 "$WORK"
ts() { date +%s.%N; }
el() { since "$1"; }

t=$(ts)
jid=$(sbatch --parsable --wait -J up-smoke -o "$WORK/hi.out" --wrap 'echo hi from $SLURM_JOB_ID on $(hostname)') \
  || die "sbatch --wait --wrap 'echo hi' failed"
grep -q '^hi from' "$WORK/hi.out" || die "job $jid did not write $WORK/hi.out"
log "smoke: sbatch --wait job $jid ok in $(el "$t") s: $(cat "$WORK/hi.out")"

if [ $VERIFY = 1 ]; then
  # Array of 3.
  t=$(ts)
  sbatch --parsable --wait -J up-array --array=1-3 -o "$WORK/arr-%A_%a.out" \
    --wrap 'echo task=$SLURM_ARRAY_TASK_ID' >/dev/null || die "array job failed"
  n=$(cat "$WORK"/arr-*.out | sort | tr '\n' ' ')
  [ "$n" = "task=1 task=2 task=3 " ] || die "array outputs wrong: '$n'"
  log "verify: array 1-3 ok in $(el "$t") s: $n"

  # Held job stays pending until released.
  t=$(ts)
  jid=$(sbatch --parsable --hold -J up-held -o "$WORK/held.out" --wrap 'echo released')
  sleep 3
  st=$(squeue -h -j "$jid" -o '%T %r')
  [ "${st%% *}" = PENDING ] || die "held job $jid is '$st', expected PENDING"
  scontrol release "$jid"
  for _ in $(seq 60); do [ -s "$WORK/held.out" ] && [ -z "$(squeue -h -j "$jid" -o %T 2>/dev/null)" ] && break; sleep 0.5; done
  grep -q released "$WORK/held.out" || die "released job $jid did not run"
  log "verify: held job $jid was '$st' for 3 s, ran $(el "$t") s after submit (incl. the 3 s)"

  # --signal=B:TERM@50 with --time=1: TERM to the batch shell ~10 s after start (see docs).
  cat >"$WORK/sig.sh" <<'EOS'
#!/bin/bash
start=$(date +%s.%N)
echo "start $start" >"$OUT_DIR/sig.log"
trap 'echo "TERM $(date +%s.%N)" >>"$OUT_DIR/sig.log"; exit 0' TERM
# sleep in the background + wait: bash runs a trap only between foreground commands.
for _ in $(seq 200); do sleep 1 & wait $!; done
echo "no signal" >>"$OUT_DIR/sig.log"
EOS
  t=$(ts)
  # Not 'sbatch --wait': it polls with a growing interval and returns up to ~30 s late.
  jid=$(sbatch --parsable -J up-signal --time=1 --signal=B:TERM@50 \
        --export=ALL,OUT_DIR="$WORK" -o "$WORK/sig.out" "$WORK/sig.sh")
  for _ in $(seq 400); do
    case "$(squeue -h -j "$jid" -o %T 2>/dev/null)" in PENDING|RUNNING|COMPLETING|CONFIGURING) sleep 0.25 ;; *) break ;; esac
  done
  if grep -q '^TERM' "$WORK/sig.log" 2>/dev/null; then
    s=$(awk '/^start/{print $2}' "$WORK/sig.log"); e=$(awk '/^TERM/{print $2}' "$WORK/sig.log")
    log "verify: B:TERM@50 with --time=1 delivered $(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.1f", b - a }') s after start" \
        "(nominal 10 s; slurmctld checks time limits every 30 s), job state $(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')"
  else
    die "job $jid: no SIGTERM delivered to the batch shell: $(cat "$WORK/sig.log" 2>/dev/null)"
  fi
fi
rm -rf "$WORK"
log "SLURM is up: cluster vlmocr-test, node $HOST_SHORT, partition debug, ports $SLURM_CTLD_PORT/$SLURM_SLURMD_PORT"
echo "  use:     export SLURM_CONF=$CONF"
echo "  logs:    $SLURM_CTLD_LOG  $SLURM_SLURMD_LOG  (job completions: $SLURM_JOBCOMP_LOG)"
echo "  state:   $SLURM_STATE_DIR  $SLURM_SPOOL_DIR"
echo "  munge:   ${AUTHINFO:-AuthInfo unset: the munged of the system, default socket}"
echo "  stop:    $HERE/slurm-down.sh"
