# Where the private test SLURM of scripts/slurm-up.sh lives. Sourced by slurm-up.sh,
# slurm-down.sh and test.sh; tests/support/slurm.py computes the same paths (keep them in step).
#
# One private cluster per machine, beside any cluster the machine already runs: its own
# slurm.conf (clients find it through SLURM_CONF, daemons get -f), state, spool, logs, pid files,
# ports and, when no munged answers on the system socket, its own munged. Nothing under /etc,
# /var or /run is written.
#
#   VLMOCR_SLURM_DIR=DIR   the private directory (default /tmp/vlmocr-slurm)
#   VLMOCR_SLURM_PORT=N    slurmctld's port (default 16817; slurmd listens on N+1), never the
#                          defaults 6817/6818 of a system cluster

VLMOCR_SLURM_DIR=${VLMOCR_SLURM_DIR:-/tmp/vlmocr-slurm}
VLMOCR_SLURM_PORT=${VLMOCR_SLURM_PORT:-16817}
export VLMOCR_SLURM_DIR VLMOCR_SLURM_PORT
export SLURM_CONF=$VLMOCR_SLURM_DIR/slurm.conf

SLURM_CTLD_PORT=$VLMOCR_SLURM_PORT
SLURM_SLURMD_PORT=$((VLMOCR_SLURM_PORT + 1))
SLURM_STATE_DIR=$VLMOCR_SLURM_DIR/state
SLURM_SPOOL_DIR=$VLMOCR_SLURM_DIR/spool
SLURM_LOG_DIR=$VLMOCR_SLURM_DIR/log
SLURM_RUN_DIR=$VLMOCR_SLURM_DIR/run
SLURM_CTLD_PID=$SLURM_RUN_DIR/slurmctld.pid
SLURM_SLURMD_PID=$SLURM_RUN_DIR/slurmd.pid
SLURM_CTLD_LOG=$SLURM_LOG_DIR/slurmctld.log
SLURM_SLURMD_LOG=$SLURM_LOG_DIR/slurmd.log
SLURM_JOBCOMP_LOG=$SLURM_LOG_DIR/jobcomp.log
# A private munged (only started when the system's does not answer): socket, key, pid, log.
SLURM_MUNGE_DIR=$VLMOCR_SLURM_DIR/munge
SLURM_MUNGE_SOCKET=$SLURM_MUNGE_DIR/munge.socket
SLURM_MUNGE_PID=$SLURM_MUNGE_DIR/munged.pid

slurm_pid_alive() {  # slurm_pid_alive PIDFILE NAME
  local pid
  [ -s "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$2" ]
}

slurm_private_up() {  # both private daemons are running (whoever started them)
  slurm_pid_alive "$SLURM_CTLD_PID" slurmctld && slurm_pid_alive "$SLURM_SLURMD_PID" slurmd
}
