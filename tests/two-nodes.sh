#!/bin/bash
# two-nodes.sh -- two simulated nodes on one machine (Linux network namespaces),
# for tests and benchmarks that need MPI to see more than one node.
#
#   two-nodes.sh check              exit 0 if namespaces + a veth pair can be made
#                                   here (tried, then removed); else print why on
#                                   stderr and exit 77 (automake SKIP)
#   two-nodes.sh up [RATE [DELAY]]  create namespaces PREFIX0 and PREFIX1 joined by a
#                                   veth pair (10.77.0.1/24 in PREFIX0, 10.77.0.2/24
#                                   in PREFIX1), lo up in each; with RATE (e.g.
#                                   1000mbit) shape both ends with a tbf qdisc.
#                                   With DELAY (one-way, e.g. 100us or 1ms) the
#                                   nodes are joined instead by two TAP devices and
#                                   the netrelay program (tests/netrelay.c), which
#                                   adds the delay and, unless RATE is "unshaped",
#                                   the rate; MTU 9000 (TWO_NODES_MTU).
#                                   Removes leftovers of an earlier "up" first.
#   two-nodes.sh run NP PROG ARGS...
#                                   run PROG on NP ranks with the MPI's launcher
#                                   (Open MPI: mpirun; MPICH: Hydra's mpiexec) started
#                                   inside PREFIX0: ceil(NP/2) ranks on PREFIX0, the
#                                   rest on PREFIX1. Each node has its own hostname
#                                   (the namespace name), so MPI sees two nodes. The
#                                   exit status is the program's (124: timed out).
#   two-nodes.sh torchrun NPROC PROG ARGS...
#                                   run PROG under torchrun, without MPI: one
#                                   torchrun agent per node (--nnodes=2, static
#                                   rendezvous at node 0's address), NPROC
#                                   processes each; the environment passes through.
#                                   The exit status is the first failed agent's.
#   two-nodes.sh down               kill what still runs in the namespaces, delete them
#
# Environment:
#   TWO_NODES_PREFIX        namespace/host name prefix (default distnode)
#   TWO_NODES_TIMEOUT       time limit of "run", as for timeout(1) (default 300)
#   TWO_NODES_MPI           the MPI PROG is built with: openmpi or mpich (default:
#                           from the MPI library PROG links, else openmpi)
#   TWO_NODES_ENV           space-separated variable names (or NAME=VALUE) that
#                           "run" passes to the ranks (mpirun -x, mpiexec -genv)
#   TWO_NODES_MPIRUN_ARGS   extra mpirun/mpiexec arguments for "run" (split on spaces)
#   TWO_NODES_RELAY         the netrelay program for "up RATE DELAY" (default:
#                           tests/netrelay under the working directory, then next
#                           to this script, then on PATH)
#   TWO_NODES_MTU           MTU of the TAP devices (default 9000)
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2, util-linux unshare, and
# tc for RATE. With MPICH, mpiexec (Hydra) is told the address of node 0
# (-localhost), since the node names resolve nowhere, and UCX is kept to TCP
# (UCX_TLS=tcp,self) between the nodes: it would otherwise use shared memory,
# as both namespaces are on one machine. PROG is run by its absolute path; the working directory is kept.
# The veth is shaped only in bandwidth (tbf): delay needs netem, which this
# kernel lacks, hence the user-space relay for DELAY.

set -eu

PROG=${0##*/}
PATH=$PATH:/usr/sbin:/sbin

PREFIX=${TWO_NODES_PREFIX:-distnode}
NET=10.77.0.0/24
ADDR0=10.77.0.1
ADDR1=10.77.0.2
IF0=veth0            # the veth end inside node 0
IF1=veth1            # the veth end inside node 1

TMPDIR_RUN=""        # temporary directory of "run", removed on exit
CHECK_NS=""          # namespaces made by "check", removed on exit
UP_PENDING=0         # 1 while "up" has not finished: remove a half-made setup on exit

die() {
    echo "$PROG: error: $*" >&2
    exit 1
}

usage() {
    cat >&2 <<EOF
usage: $PROG check
       $PROG up [RATE [DELAY]]        (RATE: 1000mbit, 1gbit or unshaped;
                                       DELAY one-way: 100us, 1ms)
       $PROG run NP PROG [ARGS...]
       $PROG torchrun NPROC PROG [ARGS...]
       $PROG down
EOF
    exit 2
}

case $PREFIX in
    '' | *[!A-Za-z0-9-]* | -*)
        die "TWO_NODES_PREFIX='$PREFIX' must be letters, digits and '-' (it becomes a host name)" ;;
esac
[ ${#PREFIX} -le 40 ] || die "TWO_NODES_PREFIX='$PREFIX' is too long (40 characters at most)"
NODE0=${PREFIX}0
NODE1=${PREFIX}1

need_tool() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' not found (needs: $2)"
}

ns_exists() {
    [ -e "/var/run/netns/$1" ] || [ -e "/run/netns/$1" ]
}

# Processes whose network namespace is $1 (none if it does not exist).
ns_pids() {
    ns_exists "$1" || return 0
    ip netns pids "$1" 2>/dev/null || true
}

# Stop every process in the given namespaces: TERM, up to 3 s, then KILL.
kill_ns() {
    local ns pids left
    pids=""
    for ns in "$@"; do pids="$pids $(ns_pids "$ns")"; done
    [ -n "${pids// /}" ] || return 0
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for _ in $(seq 1 30); do
        left=""
        for ns in "$@"; do left="$left $(ns_pids "$ns")"; done
        [ -n "${left// /}" ] || return 0
        sleep 0.1
    done
    echo "$PROG: killing processes still running in $*:$left" >&2
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
    for _ in $(seq 1 20); do
        left=""
        for ns in "$@"; do left="$left $(ns_pids "$ns")"; done
        [ -n "${left// /}" ] || return 0
        sleep 0.1
    done
    echo "$PROG: warning: processes remain in $*:$left" >&2
}

delete_ns() {
    local ns
    kill_ns "$@"
    for ns in "$@"; do
        if ns_exists "$ns"; then
            ip netns del "$ns" 2>/dev/null || echo "$PROG: warning: could not delete namespace $ns" >&2
        fi
    done
}

on_exit() {
    local rc=$?
    if [ "$UP_PENDING" = 1 ]; then
        echo "$PROG: setup failed, removing $NODE0 and $NODE1" >&2
        delete_ns "$NODE0" "$NODE1"
    fi
    if [ -n "$CHECK_NS" ]; then
        # shellcheck disable=SC2086
        delete_ns $CHECK_NS
    fi
    if [ -n "$TMPDIR_RUN" ]; then
        rm -rf "$TMPDIR_RUN"
    fi
    exit $rc
}
trap on_exit EXIT

# ---------------------------------------------------------------- check
skip() {
    echo "$PROG: SKIP: $*" >&2
    exit 77
}

cmd_check() {
    local t a b
    [ "$EUID" = 0 ] || skip "not root (network namespaces need CAP_NET_ADMIN)"
    for t in ip unshare timeout; do
        command -v "$t" >/dev/null 2>&1 || skip "'$t' not found (needs iproute2, util-linux, coreutils)"
    done
    case ${TWO_NODES_MPI:-openmpi} in
        mpich) command -v mpiexec.mpich >/dev/null 2>&1 || skip "'mpiexec.mpich' not found (MPICH's Hydra)" ;;
        *) command -v mpirun >/dev/null 2>&1 || skip "'mpirun' not found (Open MPI)" ;;
    esac
    a=tn-check$$-0
    b=tn-check$$-1
    CHECK_NS="$a $b"
    ip netns add "$a" 2>/dev/null || skip "cannot create a network namespace ('ip netns add' failed)"
    ip netns add "$b" 2>/dev/null || skip "cannot create a second network namespace"
    ip -n "$a" link add "$IF0" type veth peer name "$IF1" netns "$b" 2>/dev/null ||
        skip "cannot create a veth pair between namespaces (veth module missing?)"
    { ip -n "$a" link set lo up 2>/dev/null && ip -n "$a" link set "$IF0" up 2>/dev/null; } ||
        skip "cannot bring interfaces up in a namespace"
    ip -n "$a" addr add "$ADDR0/24" dev "$IF0" 2>/dev/null || skip "cannot add an address in a namespace"
    ip netns exec "$a" true 2>/dev/null || skip "'ip netns exec' does not work here"
    ip netns exec "$a" unshare --uts sh -c 'hostname tn-check' 2>/dev/null ||
        skip "cannot give a namespace its own host name ('unshare --uts' failed)"
    # shellcheck disable=SC2086
    delete_ns $CHECK_NS
    CHECK_NS=""
    echo "$PROG: ok: two network namespaces joined by a veth pair can be made here"
}

# ---------------------------------------------------------------- up / down
cmd_down() {
    need_tool ip iproute2
    delete_ns "$NODE0" "$NODE1"
}

# rate_mbit RATE: RATE (NNNkbit, NNNmbit, NNNgbit) in Mbit/s, for netrelay.
rate_mbit() {
    local n
    case $1 in
        *[0-9]kbit) n=${1%kbit}; awk -v n="$n" 'BEGIN { print n / 1000 }' ;;
        *[0-9]mbit) echo "${1%mbit}" ;;
        *[0-9]gbit) n=${1%gbit}; awk -v n="$n" 'BEGIN { print n * 1000 }' ;;
        *) return 1 ;;
    esac
}

# delay_us DELAY: one-way DELAY (NNNus or NNNms) in microseconds.
delay_us() {
    local n
    case $1 in
        *[0-9]us) n=${1%us} ;;
        *[0-9]ms) n=$(awk -v n="${1%ms}" 'BEGIN { print n * 1000 }') ;;
        *) return 1 ;;
    esac
    case $n in '' | *[!0-9.]*) return 1 ;; esac
    echo "$n"
}

find_relay() {
    local c
    for c in "${TWO_NODES_RELAY:-}" "$PWD/tests/netrelay" "$(dirname -- "$0")/netrelay" "$(command -v netrelay || true)"; do
        if [ -n "$c" ] && [ -f "$c" ] && [ -x "$c" ]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

# Node-to-node link of "up": a veth pair, shaped by tbf when RATE is given.
link_veth() {
    local rate=$1
    ip -n "$NODE0" link add "$IF0" type veth peer name "$IF1" netns "$NODE1" ||
        die "cannot create the veth pair $NODE0:$IF0 <-> $NODE1:$IF1"
    [ -n "$rate" ] || return 0
    ip netns exec "$NODE0" tc qdisc add dev "$IF0" root tbf rate "$rate" burst 128kb latency 5ms ||
        die "tc could not shape $NODE0:$IF0 at rate '$rate' (a tc rate such as 1000mbit or 1gbit)"
    ip netns exec "$NODE1" tc qdisc add dev "$IF1" root tbf rate "$rate" burst 128kb latency 5ms ||
        die "tc could not shape $NODE1:$IF1 at rate '$rate'"
}

# Node-to-node link of "up" with a delay: two TAP devices joined by netrelay,
# which runs in node 0 (so "down" stops it with everything else there).
link_relay() {
    local rate=$1 delay=$2 relay us mbit mtu
    relay=$(find_relay) || die "DELAY needs the netrelay program (build it: 'make tests/netrelay'; or set TWO_NODES_RELAY)"
    us=$(delay_us "$delay") || die "DELAY='$delay' must be a one-way delay such as 100us or 2ms"
    set -- --daemon --delay-us "$us"
    if [ "$rate" != unshaped ]; then
        mbit=$(rate_mbit "$rate") || die "RATE='$rate' must be NNNkbit, NNNmbit, NNNgbit or unshaped with a DELAY"
        set -- "$@" --rate-mbit "$mbit"
    fi
    mtu=${TWO_NODES_MTU:-9000}
    case $mtu in '' | *[!0-9]*) die "TWO_NODES_MTU='$mtu' must be a number" ;; esac
    ip netns exec "$NODE0" "$relay" "$@" "$IF0" "$IF1" || die "netrelay could not create $IF0 and $IF1 in $NODE0"
    ip -n "$NODE0" link set "$IF1" netns "$NODE1" || die "cannot move $IF1 into $NODE1"
    { ip -n "$NODE0" link set "$IF0" mtu "$mtu" && ip -n "$NODE1" link set "$IF1" mtu "$mtu"; } ||
        die "cannot set MTU $mtu on the TAP devices (TWO_NODES_MTU)"
}

cmd_up() {
    local rate=${1:-} delay=${2:-}
    need_tool ip iproute2
    [ "$rate" = unshaped ] && [ -z "$delay" ] && rate=""
    [ -z "$rate" ] || [ -n "$delay" ] || need_tool tc iproute2
    delete_ns "$NODE0" "$NODE1"
    UP_PENDING=1
    ip netns add "$NODE0" || die "cannot create namespace $NODE0 (run '$PROG check')"
    ip netns add "$NODE1" || die "cannot create namespace $NODE1"
    if [ -n "$delay" ]; then
        IF0=tap0
        IF1=tap1
        link_relay "$rate" "$delay"
    else
        link_veth "$rate"
    fi
    ip -n "$NODE0" addr add "$ADDR0/24" dev "$IF0" || die "cannot set $ADDR0/24 on $NODE0:$IF0"
    ip -n "$NODE1" addr add "$ADDR1/24" dev "$IF1" || die "cannot set $ADDR1/24 on $NODE1:$IF1"
    { ip -n "$NODE0" link set lo up && ip -n "$NODE0" link set "$IF0" up; } || die "cannot bring up $NODE0's interfaces"
    { ip -n "$NODE1" link set lo up && ip -n "$NODE1" link set "$IF1" up; } || die "cannot bring up $NODE1's interfaces"
    # Wait (up to 20 s: a loaded CI pass once needed more than 5) until both
    # ends have carrier and their address: Open MPI looks for the subnet at
    # start-up and skips an interface not ready yet.
    local tries=0
    until ip -n "$NODE0" -o link show "$IF0" 2>/dev/null | grep -q LOWER_UP && ip -n "$NODE1" -o link show "$IF1" 2>/dev/null | grep -q LOWER_UP &&
        ip -n "$NODE0" -4 -o addr show dev "$IF0" | grep -q "$ADDR0" && ip -n "$NODE1" -4 -o addr show dev "$IF1" | grep -q "$ADDR1"; do
        tries=$((tries + 1))
        [ "$tries" -le 200 ] || die "the link between $NODE0 and $NODE1 did not come up within 20 s"
        sleep 0.1
    done
    UP_PENDING=0
    echo "$PROG: up: $NODE0 ($ADDR0) <-> $NODE1 ($ADDR1), ${rate:-unshaped}${delay:+, $delay one-way (netrelay)}"
}

# ---------------------------------------------------------------- run
RUN_PID=""           # the timeout process of "run"

# on_signal NAME STATUS: stop the run and everything in the namespaces.
on_signal() {
    echo "$PROG: got SIG$1, stopping everything in $NODE0 and $NODE1" >&2
    [ -z "$RUN_PID" ] || kill -TERM "$RUN_PID" 2>/dev/null || true
    kill_ns "$NODE0" "$NODE1"
    exit "$2"
}

# mpi_of EXE: "mpich" or "openmpi" from the MPI library EXE (or, for a libtool
# wrapper script, the program under .libs) links; empty when unknown.
mpi_of() {
    local f=$1 c libs
    for c in "$f" "$(dirname -- "$f")/.libs/$(basename -- "$f")" "$(dirname -- "$f")/.libs/lt-$(basename -- "$f")"; do
        [ -f "$c" ] || continue
        libs=$(ldd "$c" 2>/dev/null) || continue
        case $libs in
            *libmpich*) echo mpich; return 0 ;;
            *libmpi.so*) echo openmpi; return 0 ;;
        esac
    done
}

cmd_run() {
    [ $# -ge 2 ] || usage
    local np=$1 prog exe n0 n1 tmp agent hostfile hosts name rc ip_bin unshare_bin hostname_bin sethost envlist mpi
    shift
    case $np in '' | *[!0-9]* | 0*) die "NP='$np' must be a positive integer" ;; esac
    need_tool ip iproute2
    need_tool unshare util-linux
    need_tool timeout coreutils
    { ns_exists "$NODE0" && ns_exists "$NODE1"; } || die "namespaces $NODE0/$NODE1 are missing: run '$PROG up' first"

    # The ranks start in another namespace with another host name: name PROG by
    # its absolute path.
    prog=$1
    shift
    case $prog in
        */*) exe=$(readlink -f -- "$prog") || die "PROG '$prog' not found" ;;
        *) exe=$(command -v -- "$prog") || die "PROG '$prog' not found on PATH" ;;
    esac
    { [ -f "$exe" ] && [ -x "$exe" ]; } || die "PROG '$prog' ($exe) is not an executable file"
    mpi=${TWO_NODES_MPI:-$(mpi_of "$exe")}
    mpi=${mpi:-openmpi}
    case $mpi in
        openmpi) need_tool mpirun "Open MPI" ;;
        mpich) need_tool mpiexec.mpich "MPICH's Hydra" ;;
        *) die "TWO_NODES_MPI='$mpi' must be openmpi or mpich" ;;
    esac

    n0=$(((np + 1) / 2))
    n1=$((np / 2))

    ip_bin=$(command -v ip)
    unshare_bin=$(command -v unshare)
    hostname_bin=$(command -v hostname || true)
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/two-nodes.XXXXXX")
    TMPDIR_RUN=$tmp
    agent=$tmp/rsh-agent
    hostfile=$tmp/hostfile

    {
        echo "$NODE0 slots=$n0"
        [ "$n1" -eq 0 ] || echo "$NODE1 slots=$n1"
    } >"$hostfile"

    # mpirun (mpiexec) calls "agent [options] HOST COMMAND..." as it would call
    # ssh; the agent runs COMMAND (the Open MPI daemon, Hydra's proxy) in
    # namespace HOST with host name HOST.
    if [ -n "$hostname_bin" ]; then
        sethost="$hostname_bin \"\$0\""
    else
        sethost="echo \"\$0\" >/proc/sys/kernel/hostname"
    fi
    cat >"$agent" <<EOF
#!/bin/sh
# rsh agent generated by two-nodes.sh: run an MPI daemon on a simulated node.
while [ \$# -gt 0 ]; do
    case \$1 in -*) shift ;; *) break ;; esac
done
host=\${1:-}
[ \$# -gt 0 ] && shift
case \$host in
    $NODE0 | $NODE1) ;;
    *) echo "two-nodes rsh agent: unknown host '\$host' (expected $NODE0 or $NODE1)" >&2; exit 255 ;;
esac
exec $ip_bin netns exec "\$host" $unshare_bin --uts sh -c '$sethost && eval "\$1"' "\$host" "\$*"
EOF
    chmod 755 "$agent"

    # Launcher options, then the variables to pass, then PROG and its arguments.
    set -- "$exe" "$@"
    envlist=${TWO_NODES_ENV:-}
    for name in $envlist; do
        case $name in
            *=*)
                if [ "$mpi" = mpich ]; then set -- -genv "${name%%=*}" "${name#*=}" "$@"; else set -- -x "$name" "$@"; fi ;;
            *)
                case $name in [A-Za-z_]*) ;; *) die "TWO_NODES_ENV: '$name' is not a variable name" ;; esac
                if [ -z "${!name+set}" ]; then
                    echo "$PROG: warning: TWO_NODES_ENV names $name, which is not set: not passed" >&2
                elif [ "$mpi" = mpich ]; then
                    set -- -genv "$name" "${!name}" "$@"
                else
                    set -- -x "$name" "$@"
                fi
                ;;
        esac
    done
    # shellcheck disable=SC2086
    set -- ${TWO_NODES_MPIRUN_ARGS:-} "$@"
    if [ "$mpi" = mpich ]; then
        # Hydra forks node 0's proxy itself (its host name is the local one) and
        # starts node 1's through the agent; that proxy connects back to
        # -localhost. Between the nodes UCX uses TCP on the link; within a node
        # MPICH's own shared memory.
        hosts=$NODE0:$n0
        [ "$n1" -eq 0 ] || hosts=$hosts,$NODE1:$n1
        set -- mpiexec.mpich -n "$np" -hosts "$hosts" \
            -launcher rsh -launcher-exec "$agent" -localhost "$ADDR0" \
            -genv UCX_TLS tcp,self "$@"
    else
        set -- mpirun -np "$np" --hostfile "$hostfile" \
            --mca plm_rsh_agent "$agent" \
            --mca oob_tcp_if_include "$NET" --mca btl_tcp_if_include "$NET" \
            --mca pml ob1 --mca btl self,vader,tcp \
            --mca mpi_yield_when_idle 1 --bind-to none \
            --oversubscribe --allow-run-as-root "$@"
    fi

    # The launcher itself runs in node 0 with host name NODE0, so it starts node
    # 0's ranks directly and node 1's through the agent. It runs in the background
    # (stdin kept) so that a signal to this script is handled at once.
    rc=0
    trap 'on_signal INT 130' INT
    trap 'on_signal TERM 143' TERM
    trap 'on_signal HUP 129' HUP
    timeout -k 10 "${TWO_NODES_TIMEOUT:-300}" \
        ip netns exec "$NODE0" unshare --uts sh -c "$sethost"' && exec "$@"' "$NODE0" "$@" <&0 &
    RUN_PID=$!
    wait "$RUN_PID" || rc=$?
    trap - INT TERM HUP
    RUN_PID=""
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "$PROG: run timed out (TWO_NODES_TIMEOUT=${TWO_NODES_TIMEOUT:-300} s): stopping everything in $NODE0 and $NODE1" >&2
        kill_ns "$NODE0" "$NODE1"
        rc=124
    elif [ $rc -ne 0 ]; then
        # A failed job may leave daemons behind: give them a moment, then stop them.
        sleep 1
        kill_ns "$NODE0" "$NODE1"
    fi
    return $rc
}

cmd_torchrun() {
    [ $# -ge 2 ] || usage
    local nproc=$1 exe node rc=0 r pids=() here
    shift
    case $nproc in '' | *[!0-9]* | 0*) die "NPROC='$nproc' must be a positive integer" ;; esac
    { ns_exists "$NODE0" && ns_exists "$NODE1"; } || die "namespaces $NODE0/$NODE1 are missing: run '$PROG up' first"
    exe=$(readlink -f -- "$1") || die "PROG '$1' not found"
    shift
    here=$(cd "$(dirname "$0")" && pwd)
    # Each namespace has its own ports: torchrun's store takes a fixed one.
    for node in 0 1; do
        local name=$PREFIX$node
        timeout -k 10 "${TWO_NODES_TIMEOUT:-300}" ip netns exec "$name" unshare --uts sh -c 'hostname "$0" && exec "$@"' \
            "$name" /usr/bin/python3 "$here/slurm/torchrun.py" --nnodes=2 --node_rank=$node --master_addr="$ADDR0" \
            --master_port=29500 --nproc_per_node="$nproc" --no_python "$exe" "$@" &
        pids+=($!)
    done
    for r in "${pids[@]}"; do
        wait "$r"
        r=$?
        [ $rc -ne 0 ] || rc=$r
    done
    [ $rc -eq 0 ] || { sleep 1; kill_ns "$NODE0" "$NODE1"; }
    return $rc
}

# ---------------------------------------------------------------- main
[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
    check) [ $# -eq 0 ] || usage; cmd_check ;;
    up) [ $# -le 2 ] || usage; cmd_up "$@" ;;
    run) cmd_run "$@" ;;
    torchrun) cmd_torchrun "$@" ;;
    down) [ $# -eq 0 ] || usage; cmd_down ;;
    -h | --help | help) usage ;;
    *) usage ;;
esac
