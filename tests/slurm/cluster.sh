#!/bin/bash
# cluster.sh -- start/stop a private one-node SLURM cluster for tests.
#
#   cluster.sh check       exit 0 if a cluster can run here, 77 (automake SKIP) if not
#   cluster.sh start DIR   create config, key, state and logs under DIR, start
#                          munged + slurmctld + slurmd, wait until the node is
#                          idle, print "export SLURM_CONF=..." and write DIR/env.sh
#   cluster.sh stop DIR    stop what "start DIR" started (idempotent, bounded)
#
# Everything lives under DIR: its own munge key/socket, ports, ClusterName and
# pid files, so it never touches /etc/slurm, /etc/munge or a system cluster.
# Environment knobs: CLUSTER_CPUS (CPUs the node advertises; default: the real
# count but at least 4, so "srun -n 4" works on a 2-core machine without
# --overcommit), CLUSTER_START_TIMEOUT (seconds to wait for idle, default 30).

set -eu

PROG=${0##*/}
SBIN_TOOLS="slurmctld slurmd munged"
BIN_TOOLS="srun sbatch sinfo squeue scancel"

die() {
    echo "$PROG: error: $*" >&2
    exit 1
}

usage() {
    echo "usage: $PROG check | start DIR | stop DIR" >&2
    exit 2
}

# Daemons live in /usr/sbin, which may not be on a non-root PATH.
PATH=$PATH:/usr/sbin:/sbin

# ---------------------------------------------------------------- check
cmd_check() {
    if [ "$(id -u)" != 0 ]; then
        echo "SKIP: not root (slurmd must run as root to launch tasks)"
        exit 77
    fi
    for t in $SBIN_TOOLS $BIN_TOOLS; do
        if ! command -v "$t" >/dev/null 2>&1; then
            echo "SKIP: $t not found (need slurmctld slurmd slurm-client munge)"
            exit 77
        fi
    done
    echo "ok: SLURM test cluster can run here"
}

# ---------------------------------------------------------------- helpers

# A port nobody listens on (TCP), picked at random from 20000-59999.
free_port() {
    local p i
    for i in $(seq 1 100); do
        p=$((20000 + RANDOM % 40000))
        case " ${USED_PORTS:-} " in *" $p "*) continue ;; esac
        if ! ss -Htan "( sport = :$p )" 2>/dev/null | grep -q .; then
            USED_PORTS="${USED_PORTS:-} $p"
            echo "$p"
            return 0
        fi
    done
    die "no free TCP port found"
}

# True if PID is alive, not a zombie (PID 1 here may reap late) and its
# command line mentions DIR, i.e. it is really one of ours (pid files survive
# a killed run and PIDs get reused).
is_ours() {
    local pid=$1 state
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ "$state" != Z ] || return 1
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$DIR/" || return 1
}

# Start a daemon in its own session (so the caller's Ctrl-C / test harness
# process group does not hit it) with no inherited stdout: otherwise
# $(cluster.sh start DIR) would block until the daemons exit.
spawn() {
    local name=$1
    shift
    setsid "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 &
    echo $! >"$DIR/run/$name.pid"
}

# Stop one daemon: TERM, wait up to 5 s, then KILL.  Found by its pid file,
# or by name + DIR on its command line when a killed start left no pid file.
stop_daemon() {
    local name=$1 pid i
    pid=$(cat "$DIR/run/$name.pid" 2>/dev/null || true)
    if ! is_ours "$pid"; then
        pid=
        for i in $(pgrep -x "$name" 2>/dev/null || true); do
            if is_ours "$i"; then pid=$i; fi
        done
        [ -n "$pid" ] || return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 25); do
        is_ours "$pid" || return 0
        sleep 0.2
    done
    echo "$PROG: $name ($pid) ignored SIGTERM, sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 25); do
        is_ours "$pid" || return 0
        sleep 0.2
    done
    echo "$PROG: warning: $name ($pid) still alive" >&2
}

# Job leftovers: slurmstepd (one per step) outlives slurmd, and its tasks
# outlive slurmstepd.  Both carry SLURM_CONF=DIR/slurm.conf in their
# environment (tasks also SLURM_JOB_ID), which tells ours from anyone else's.
# Our own ancestors are spared: the caller may have sourced env.sh.
kill_job_procs() {
    local p env ancestors=" " a=$$
    while [ "$a" -gt 1 ] 2>/dev/null; do
        ancestors="$ancestors$a "
        a=$(sed 's/^.*) //' "/proc/$a/stat" 2>/dev/null | cut -d' ' -f2) || break
    done
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        case $ancestors in *" $p "*) continue ;; esac
        env=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || continue
        printf '%s\n' "$env" | grep -qxF "SLURM_CONF=$DIR/slurm.conf" || continue
        if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] ||
            printf '%s\n' "$env" | grep -q '^SLURM_JOB_ID='; then
            kill -KILL "$p" 2>/dev/null || true
        fi
    done
}

dump_logs() {
    local f
    for f in "$DIR"/log/*; do
        [ -f "$f" ] || continue
        echo "===== $f (last 40 lines) =====" >&2
        tail -n 40 "$f" >&2 || true
    done
}

fail_start() {
    echo "$PROG: error: $*" >&2
    dump_logs
    cmd_stop >/dev/null 2>&1 || true
    exit 1
}

# ---------------------------------------------------------------- start

write_config() {
    local node cpus real ctld_port slurmd_port
    node=$(hostname -s)
    # Only the CPU count is taken from slurmd -C.  RealMemory stays at its
    # default (1 MB): a value above what slurmd measures would drain the node.
    real=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')
    [ -n "$real" ] || real=$(nproc)
    cpus=${CLUSTER_CPUS:-$((real > 4 ? real : 4))}
    ctld_port=$(free_port)
    slurmd_port=$(free_port)

    cat >"$DIR/slurm.conf" <<EOF
# Generated by $PROG for a private test cluster; do not edit.
ClusterName=t${ctld_port}
# NodeAddr/host address given explicitly: no DNS needed for the hostname.
SlurmctldHost=${node}(127.0.0.1)
SlurmctldPort=${ctld_port}
SlurmdPort=${slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${DIR}/munge/munge.socket
StateSaveLocation=${DIR}/state
SlurmdSpoolDir=${DIR}/spool
# The PMIx plugin makes TmpFS/spmix_appdir_<uid>_<job>.<step> and leaves it
# behind when a step is killed; job ids restart at 1 in every new cluster,
# so with the default /tmp a later cluster's step collides and fails.
TmpFS=${DIR}/tmp
SlurmctldPidFile=${DIR}/run/slurmctld.daemon.pid
SlurmdPidFile=${DIR}/run/slurmd.daemon.pid
SlurmctldLogFile=${DIR}/log/slurmctld.log
SlurmdLogFile=${DIR}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No systemd/cgroups here: track processes via /proc, no CPU binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Debian's Open MPI only works with srun through PMIx.
MpiDefault=pmix
ReturnToService=2
MailProg=/bin/true
# Trust the CPU count below even if it exceeds the hardware (no DRAIN).
SlurmdParameters=config_overrides
# Keep the cluster snappy for tests.
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
KillWait=5
Waittime=0
NodeName=${node} NodeAddr=127.0.0.1 CPUs=${cpus} Sockets=1 CoresPerSocket=${cpus} ThreadsPerCore=1 State=UNKNOWN
PartitionName=debug Nodes=${node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    NODE=$node
}

start_munge() {
    local i
    # munged insists on a private key (root, 0600) and a socket dir that
    # clients can traverse (0755).
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 0600 "$DIR/munge/munge.key"
    chmod 0755 "$DIR/munge"
    spawn munged munged -F --force \
        --socket="$DIR/munge/munge.socket" \
        --key-file="$DIR/munge/munge.key" \
        --log-file="$DIR/log/munged.log" \
        --pid-file="$DIR/run/munged.daemon.pid" \
        --seed-file="$DIR/munge/munged.seed"
    for i in $(seq 1 50); do
        [ -S "$DIR/munge/munge.socket" ] && return 0
        is_ours "$(cat "$DIR/run/munged.pid")" || fail_start "munged exited"
        sleep 0.1
    done
    fail_start "munged socket did not appear"
}

wait_idle() {
    local limit=${CLUSTER_START_TIMEOUT:-30} t0 state
    t0=$(date +%s)
    while :; do
        state=$(timeout 5 sinfo -h -n "$NODE" -o %t 2>/dev/null || true)
        case $state in idle*) return 0 ;; esac
        is_ours "$(cat "$DIR/run/slurmctld.pid")" || fail_start "slurmctld exited"
        is_ours "$(cat "$DIR/run/slurmd.pid")" || fail_start "slurmd exited"
        [ $(($(date +%s) - t0)) -lt "$limit" ] ||
            fail_start "node $NODE not idle after ${limit}s (state: '${state:-none}')"
        sleep 0.5
    done
}

cmd_start() {
    local out
    # A previous run in the same DIR may still be up (or was killed).
    cmd_stop >/dev/null 2>&1 || true
    # Interrupted half-way: do not leave daemons behind.
    trap 'fail_start "interrupted"' INT TERM
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/tmp" "$DIR/run" "$DIR/log" "$DIR/munge"
    # Only our own leftovers from an earlier start in this DIR: old state
    # would carry the previous (random) ClusterName and slurmctld would refuse.
    rm -rf "$DIR"/run/*.pid "$DIR"/munge/munge.socket* "$DIR"/state/* "$DIR"/spool/* "$DIR"/tmp/*
    write_config
    export SLURM_CONF="$DIR/slurm.conf"

    start_munge
    # -c: ignore any saved state; -i: ignore state files that do not match.
    spawn slurmctld slurmctld -D -c -i -f "$SLURM_CONF"
    spawn slurmd slurmd -D -f "$SLURM_CONF" -N "$NODE"
    wait_idle

    # One real step through PMIx: catches launch problems now, with the logs
    # at hand.  srun exits 0 even when a step fails to launch, so look at
    # what it printed instead of its status.
    out=$(timeout 30 srun --mpi=pmix -n 1 echo cluster-ok 2>&1 || true)
    [ "$out" = cluster-ok ] || fail_start "test step failed: $out"

    cat >"$DIR/env.sh" <<EOF
# Source me to use the test cluster in $DIR.
export SLURM_CONF=$DIR/slurm.conf
# Slurm finds munged through AuthInfo in slurm.conf; this is only for the
# munge/unmunge tools, which need it spelled out: munge -S "\$CLUSTER_MUNGE_SOCKET".
export CLUSTER_MUNGE_SOCKET=$DIR/munge/munge.socket
EOF
    echo "export SLURM_CONF=$DIR/slurm.conf"
}

# ---------------------------------------------------------------- stop

cmd_stop() {
    [ -d "$DIR/run" ] || return 0
    # Cancel jobs first so their tasks go too; bounded in case slurmctld is gone.
    if [ -f "$DIR/slurm.conf" ] && is_ours "$(cat "$DIR/run/slurmctld.pid" 2>/dev/null || true)"; then
        SLURM_CONF="$DIR/slurm.conf" timeout 5 scancel --quiet --user=root >/dev/null 2>&1 || true
    fi
    stop_daemon slurmd
    kill_job_procs
    stop_daemon slurmctld
    stop_daemon munged
}

# ---------------------------------------------------------------- main

[ $# -ge 1 ] || usage
case $1 in
check)
    cmd_check
    ;;
start | stop)
    [ $# -eq 2 ] || usage
    [ -n "$2" ] || usage
    # Absolute path: it goes into slurm.conf and the daemons' command lines.
    if [ "$1" = start ]; then
        [ -d "$2" ] || die "directory '$2' does not exist"
    fi
    DIR=$(cd "$2" 2>/dev/null && pwd -P) || {
        [ "$1" = stop ] && exit 0
        die "cannot access '$2'"
    }
    # slurm.conf has no quoting for paths.
    case $DIR in *[[:space:]]*) die "directory '$DIR' contains whitespace" ;; esac
    # Step sockets (DIR/spool/stepd.slurm.pmix.JOB.STEP, DIR/spool/NODE_JOB.STEP)
    # must fit in 107 bytes, or every srun step fails to launch.
    n=$(hostname -s)
    if [ $((${#DIR} + 7 + (${#n} > 16 ? ${#n} + 1 : 17) + 17)) -gt 107 ]; then
        die "directory '$DIR' is too long for UNIX socket paths; use a short one, e.g. \$(mktemp -d /tmp/slurm.XXXXXX)"
    fi
    if [ "$1" = start ]; then
        msg=$(cmd_check) || { echo "$PROG: $msg" >&2; exit 77; }
        cmd_start
    else
        cmd_stop
    fi
    ;;
*)
    usage
    ;;
esac
