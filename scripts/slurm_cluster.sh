#!/usr/bin/env bash
# One-node Slurm cluster on this machine, for tests of `snip compare --executor slurm`.
#
#   scripts/slurm_cluster.sh check        exit 0 if the fixture can run here, else 77 (skip)
#   scripts/slurm_cluster.sh start DIR    write DIR/slurm.conf, start munged, slurmctld, slurmd;
#                                         last stdout line is `export SLURM_CONF=DIR/slurm.conf`
#   scripts/slurm_cluster.sh stop DIR     cancel DIR's jobs, stop its daemons (logs stay in DIR)
#
# Needs root and the Debian packages slurmctld slurmd slurm-client munge.
# All Slurm state, logs and pid files live under DIR. The ports are derived from DIR, so
# clusters in different folders run side by side; a second start in the same DIR is refused.
set -euo pipefail

die() { echo "slurm_cluster: $*" >&2; exit 1; }

# Prints why this machine cannot run the fixture, or nothing.
missing_requirements() {
  [ "$(id -u)" = 0 ] || echo "not root"
  local b
  for b in slurmctld slurmd sbatch squeue scontrol sinfo scancel munged munge unmunge runuser; do
    command -v "$b" >/dev/null || echo "no $b (apt-get install slurmctld slurmd slurm-client munge)"
  done
  command -v mungekey >/dev/null || command -v create-munge-key >/dev/null || echo "no mungekey"
}

# True if a process whose pid is in file $1 is alive.
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# True if something listens on TCP port $1 on this machine.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Sends SIGTERM to the pid in file $1, waits up to 10 s, then SIGKILL.
stop_pidfile() {
  alive "$1" || { rm -f "$1"; return 0; }
  local pid i
  pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$1"
}

# munged is shared by every cluster on this machine and left running: two clusters starting or
# stopping at once (parallel tests) never race for it. The lock makes one start it.
start_munged() {
  mkdir -p /run/lock
  exec 9>/run/lock/snip-slurm-munged.lock
  flock 9
  if [ -S /run/munge/munge.socket.2 ] && munge -n </dev/null | unmunge >/dev/null 2>&1; then
    flock -u 9
    exec 9>&-
    return 0
  fi
  if [ ! -s /etc/munge/munge.key ]; then
    install -d -o munge -g munge -m 0700 /etc/munge
    if command -v mungekey >/dev/null; then runuser -u munge -- mungekey --create
    else create-munge-key -f; fi
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
  runuser -u munge -- munged
  local i
  for i in $(seq 50); do
    if munge -n </dev/null | unmunge >/dev/null 2>&1; then
      flock -u 9
      exec 9>&-
      return 0
    fi
    sleep 0.1
  done
  die "munged did not answer; $(tail -n 5 /var/log/munge/munged.log 2>/dev/null)"
}

write_conf() {
  local dir=$1 host=$2 ctld_port=$3 slurmd_port=$4 node
  # e.g. "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
  node=$(slurmd -C | grep '^NodeName=')
  [ -n "$node" ] || die "slurmd -C printed no NodeName line"
  cat >"$dir/slurm.conf" <<EOF
ClusterName=snip$ctld_port
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=3600
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.log
AccountingStorageType=accounting_storage/none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  local dir host sum ctld_port slurmd_port state i
  mkdir -p "$1"
  dir=$(cd "$1" && pwd -P)
  [ -z "$(missing_requirements)" ] || die "cannot run here: $(missing_requirements | paste -sd';')"
  if alive "$dir/slurmctld.pid" || alive "$dir/slurmd.pid"; then
    die "a cluster is already running for $dir (run: $0 stop $dir)"
  fi
  host=$(hostname -s)
  # Ports 20000..29999 from a hash of DIR: controller on an even port, slurmd on the next.
  sum=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
  ctld_port=$((20000 + (sum % 5000) * 2))
  slurmd_port=$((ctld_port + 1))
  for i in $ctld_port $slurmd_port; do
    port_busy "$i" && die "port $i (derived from $dir) is in use; use another DIR"
  done
  mkdir -p "$dir/state" "$dir/spool"
  write_conf "$dir" "$host" "$ctld_port" "$slurmd_port"
  export SLURM_CONF=$dir/slurm.conf
  start_munged
  if ! { slurmctld -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF"; }; then
    fail_start "$dir" "a daemon exited at start"
  fi
  # Bounded wait (30 s) for the node to be schedulable.
  state=""
  for i in $(seq 60); do
    state=$(sinfo -h -n "$host" -o %t 2>/dev/null || true)
    [ "$state" = idle ] && { echo "export SLURM_CONF=$SLURM_CONF"; return 0; }
    sleep 0.5
  done
  fail_start "$dir" "node $host not idle after 30 s (state: '${state:-no answer}')"
}

# Prints $2 and the tails of DIR's daemon logs, stops what started, exits 1.
fail_start() {
  {
    echo "slurm_cluster: $2"
    echo "--- $1/slurmctld.log"; tail -n 20 "$1/slurmctld.log" 2>/dev/null || true
    echo "--- $1/slurmd.log"; tail -n 20 "$1/slurmd.log" 2>/dev/null || true
  } >&2
  stop "$1" >/dev/null 2>&1 || true
  exit 1
}

# Kills the process trees of slurmstepd processes started for DIR (their environment carries
# SLURM_CONF=DIR/slurm.conf); they outlive slurmd, e.g. after a test killed it.
kill_steps() {
  local conf=$1 pid
  for pid in $(pgrep -x slurmstepd || true); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$conf" || continue
    kill_tree "$pid"
  done
}
kill_tree() {
  local child
  for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
  kill -KILL "$1" 2>/dev/null || true
}

stop() {
  local dir i
  [ -d "$1" ] || die "no such folder: $1"
  dir=$(cd "$1" && pwd -P)
  export SLURM_CONF=$dir/slurm.conf
  # Running job steps outlive slurmd, so cancel every job first (bounded wait of 10 s).
  if alive "$dir/slurmctld.pid" && alive "$dir/slurmd.pid"; then
    scancel --partition=debug 2>/dev/null || true
    for i in $(seq 50); do
      [ -z "$(squeue -h -t R,CG,S -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  stop_pidfile "$dir/slurmd.pid"
  stop_pidfile "$dir/slurmctld.pid"
  kill_steps "$SLURM_CONF"
}

case "${1:-}" in
  check)
    why=$(missing_requirements)
    [ -z "$why" ] || { echo "slurm_cluster: skip: $why" | paste -sd';'; exit 77; } ;;
  start) [ $# -eq 2 ] || die "usage: $0 start DIR"; start "$2" ;;
  stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) die "usage: $0 check | start DIR | stop DIR" ;;
esac
