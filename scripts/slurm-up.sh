#!/usr/bin/env bash
# Bring up a real single-node SLURM cluster on loopback for the test suite and CI.
#
#   sudo scripts/slurm-up.sh            # install (if needed), configure, start, smoke-test
#   sudo scripts/slurm-up.sh --verify   # ... plus array / hold+release / B:TERM signal checks (~40 s)
#   sudo scripts/slurm-down.sh          # stop the daemons (config, key and state are kept)
#
# Idempotent: a second run sees the cluster is up (and the config unchanged) and only re-checks it.
# Debian/Ubuntu only (apt-get, slurm-wlm, munge). Daemons are started directly, not via systemd,
# so it also works in containers without an init system. Must run as root.
#
# Environment knobs (all optional):
#   VLMOCR_SLURM_CPUS=N        advertise N CPUs instead of the real count (adds
#                              SlurmdParameters=config_overrides); lets more jobs share a small node
#   VLMOCR_SLURM_MEM_MARGIN=MB memory kept back from `slurmd -C` RealMemory (default: max(512, 5%))
#   VLMOCR_SLURM_DEFMEM=MB     DefMemPerCPU (default 1024)
#   VLMOCR_SLURM_NO_INSTALL=1  never call apt-get (fail if the binaries are missing)
#
# Docs: docs/slurm-testing.md
set -euo pipefail

VERIFY=0
for arg in "$@"; do
  case "$arg" in
    --verify) VERIFY=1 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "slurm-up: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

T0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
log() { printf '[slurm-up %5ss] %s\n' "$(since "$T0")" "$*"; }
die() { log "ERROR: $*"; print_logs_hint; exit 1; }

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
LOG_DIR=/var/log/slurm
CTLD_LOG=$LOG_DIR/slurmctld.log
SLURMD_LOG=$LOG_DIR/slurmd.log
JOBCOMP_LOG=$LOG_DIR/jobcomp.log
STATE_DIR=/var/lib/slurm/slurmctld
SPOOL_DIR=/var/spool/slurmd
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
MUNGE_KEY=/etc/munge/munge.key
MUNGE_RUN=/run/munge
MUNGE_LOG=/var/log/munge/munged.log

print_logs_hint() {
  echo "  logs: $CTLD_LOG  $SLURMD_LOG  $MUNGE_LOG  (config: $CONF)" >&2
  for f in "$CTLD_LOG" "$SLURMD_LOG"; do
    [ -s "$f" ] && { echo "  --- tail $f" >&2; tail -n 15 "$f" >&2; }
  done
  return 0
}

pid_alive() {  # pid_alive PIDFILE NAME
  local pid
  [ -s "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$2" ]
}

[ "$(id -u)" -eq 0 ] || { echo "slurm-up: must run as root (try: sudo $0)" >&2; exit 1; }

# --- 1. packages -------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v sbatch >/dev/null; then
  [ "${VLMOCR_SLURM_NO_INSTALL:-0}" = 1 ] && die "slurm-wlm/munge not installed and VLMOCR_SLURM_NO_INSTALL=1"
  log "installing slurm-wlm and munge with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d: stop the packages from auto-starting services on hosts that do run an init
  # system; this script starts everything itself, with its own config.
  had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1
  [ $had_policy = 1 ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null || {
    [ $had_policy = 1 ] || rm -f /usr/sbin/policy-rc.d; die "apt-get install failed"; }
  [ $had_policy = 1 ] || rm -f /usr/sbin/policy-rc.d
fi
log "slurm $(slurmctld -V | awk '{print $2}'), munge $(munged --version 2>&1 | awk '{print $1}' | sed 's/munge-//')"

# --- 2. munge ----------------------------------------------------------------------------------
if [ ! -s "$MUNGE_KEY" ]; then
  log "creating munge key $MUNGE_KEY"
  install -d -m 0700 -o munge -g munge /etc/munge
  if command -v mungekey >/dev/null; then
    mungekey --create --keyfile="$MUNGE_KEY" --force
  else
    dd if=/dev/urandom bs=1 count=1024 of="$MUNGE_KEY" status=none
  fi
fi
chown munge:munge "$MUNGE_KEY"; chmod 0400 "$MUNGE_KEY"
install -d -m 0755 -o munge -g munge "$MUNGE_RUN" /var/log/munge /var/lib/munge

if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "munged already running"
else
  log "starting munged (as user munge)"
  # A stale pid/socket from a killed munged makes the new one refuse to start.
  if ! pid_alive "$MUNGE_RUN/munged.pid" munged; then rm -f "$MUNGE_RUN"/munged.pid "$MUNGE_RUN"/munge.socket.2*; fi
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || die "munged does not answer (see $MUNGE_LOG)"
fi

# --- 3. slurm.conf -----------------------------------------------------------------------------
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
cat >"$NEW_CONF" <<EOF
# Written by scripts/slurm-up.sh (vlmocr) -- single-node test cluster on loopback. Do not edit;
# change the script instead (it rewrites this file and restarts the daemons if it differs).
ClusterName=vlmocr-ci
SlurmctldHost=${HOST_SHORT}(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE_DIR
SlurmdSpoolDir=$SPOOL_DIR
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$CTLD_LOG
SlurmdLogFile=$SLURMD_LOG
SlurmctldDebug=info
SlurmdDebug=info

# No cgroups: process tracking by /proc parent links, no task binding/confinement.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Finished jobs are appended here; 'sacct -c' reads it (plain 'sacct' exits 1 without accounting).
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP_LOG
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
EOF

CONF_CHANGED=0
if [ ! -f "$CONF" ] || ! cmp -s "$NEW_CONF" "$CONF"; then
  CONF_CHANGED=1
  install -d -m 0755 "$CONF_DIR"
  [ -f "$CONF" ] && cp -p "$CONF" "$CONF.bak"
  install -m 0644 "$NEW_CONF" "$CONF"
  log "wrote $CONF (node $HOST_SHORT: CPUs=$CPUS RealMemory=$NODE_MEM of $REAL_MEM MB, DefMemPerCPU=$DEFMEM)"
else
  log "$CONF unchanged"
fi
# Some slurmd builds read cgroup.conf when it exists; make sure a stale one cannot turn cgroups on.
if [ -f "$CONF_DIR/cgroup.conf" ] && ! grep -q 'written by scripts/slurm-up.sh' "$CONF_DIR/cgroup.conf"; then
  mv "$CONF_DIR/cgroup.conf" "$CONF_DIR/cgroup.conf.disabled-by-slurm-up"
fi

install -d -m 0755 -o slurm -g slurm /var/lib/slurm "$STATE_DIR" "$LOG_DIR"
install -d -m 0755 -o root -g root "$SPOOL_DIR"
touch "$JOBCOMP_LOG" && chown slurm:slurm "$JOBCOMP_LOG"

# --- 4. daemons --------------------------------------------------------------------------------
if [ $CONF_CHANGED = 1 ] && { pid_alive "$CTLD_PID" slurmctld || pid_alive "$SLURMD_PID" slurmd; }; then
  log "config changed: restarting the daemons"
  "$(dirname "$0")"/slurm-down.sh --quiet
fi

if pid_alive "$CTLD_PID" slurmctld; then
  log "slurmctld already running (pid $(cat $CTLD_PID))"
else
  log "starting slurmctld"
  slurmctld || die "slurmctld failed to start"
fi
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.2; done
scontrol ping 2>/dev/null | grep -q 'is UP' || die "slurmctld does not answer 'scontrol ping'"

if pid_alive "$SLURMD_PID" slurmd; then
  log "slurmd already running (pid $(cat $SLURMD_PID))"
else
  log "starting slurmd"
  slurmd || die "slurmd failed to start"
fi

# --- 5. wait for the node ------------------------------------------------------------------------
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

# --- 6. smoke test ---------------------------------------------------------------------------------
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

log "SLURM is up: cluster vlmocr-ci, node $HOST_SHORT, partition debug"
echo "  config:  $CONF"
echo "  logs:    $CTLD_LOG  $SLURMD_LOG  $MUNGE_LOG  (job completions: $JOBCOMP_LOG)"
echo "  state:   $STATE_DIR  $SPOOL_DIR"
echo "  stop:    $(dirname "$0")/slurm-down.sh"
