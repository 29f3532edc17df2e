#!/bin/sh
# A LAUNCHER for make check without MPI: "sh tests/torchrun-launch.sh N PROG [ARG...]"
# runs PROG on N processes under torchrun (torch's own elastic agent, through
# tests/slurm/torchrun.py: Debian's torchrun CLI fails on Python 3.11), e.g.
#   make check LAUNCHER="sh $PWD/tests/torchrun-launch.sh"
# (tests/mpi-launch.sh splits LAUNCHER on blanks: no blanks in the path).
# DIST_HOST_ENGINE=gloo (unless set): one process runs without MPI too, where
# the default would take MPI's singleton.
# The rendezvous is --standalone's (c10d, one node) on a free port: --standalone
# itself always takes port 29400, which parallel tests (make -j) would share.
# There rank 0 serves distmgr's store. TORCHRUN_LAUNCH_RDZV=static takes the
# static rendezvous instead, where torchrun's agent serves it.
# TORCHRUN_PYTHON: the Python whose torch launches (default /usr/bin/python3,
# Debian's; a GPU machine's own, e.g. tests/gpu/run.sh's torchrun mode).
# Exit status: 0 when every process exited 0; 77 (automake's SKIP) when the
# processes skipped (exited 77, or were ended by the agent after one did:
# torchrun only says "failed"); otherwise torchrun's, non-zero.
set -u
py=${TORCHRUN_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" = --worker ]; then
  # One process of the job: run PROG, record its exit status for the launcher.
  # The agent signals only its direct child, so pass the signal on (else PROG
  # would live on, waiting in a collective, after the job ended).
  dir=$2
  shift 2
  pid=
  trap '[ -n "$pid" ] && kill -TERM $pid 2>/dev/null' TERM INT HUP
  "$@" &
  pid=$!
  while :; do
    wait $pid
    rc=$?
    kill -0 $pid 2>/dev/null || break # wait came back for a signal: PROG still runs
  done
  echo "$rc" >"$dir/rank.${RANK:-0}"
  exit $rc
fi

case ${1:-} in ''|*[!0-9]*) echo "usage: $0 N PROG [ARG...]" >&2; exit 2 ;; esac
n=$1
shift
if ! version=$("$py" -c "import torch, torch.distributed.run; print(torch.__version__)" 2>/dev/null); then
  echo "torchrun-launch: no torch for $py (apt-get install python3-torch)" >&2
  exit 99
fi
DIST_HOST_ENGINE=${DIST_HOST_ENGINE:-gloo}
export DIST_HOST_ENGINE
dir=$(mktemp -d "${TMPDIR:-/tmp}/torchrun-launch.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
port=$("$py" -c "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])")
# (The values have no blanks: $rdzv is split on them.)
case ${TORCHRUN_LAUNCH_RDZV:-c10d} in
  # is_host=1: a port taken meanwhile fails the start instead of joining another job's store.
  c10d) rdzv="--rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$port --rdzv_id=launch-$$ --rdzv_conf=is_host=1" ;;
  static) rdzv="--node_rank=0 --master_addr=127.0.0.1 --master_port=$port" ;;
  *) echo "torchrun-launch: TORCHRUN_LAUNCH_RDZV='$TORCHRUN_LAUNCH_RDZV' is neither c10d nor static" >&2; exit 99 ;;
esac
# "--": PROG's flags are its own (torchrun's parser would take "--n" for an
# ambiguous abbreviation of its --nnodes, --nproc_per_node, ... and stop).
# torch 1.x: through tests/slurm/torchrun.py (above); newer torch's CLI works.
case $version in
  1.*) run="$here/slurm/torchrun.py" ;;
  *) run="-m torch.distributed.run" ;;
esac
"$py" $run --nnodes=1 --nproc_per_node="$n" $rdzv --monitor_interval=0.2 \
  --no_python -- /bin/sh "$here/torchrun-launch.sh" --worker "$dir" "$@"
rc=$?
[ $rc -eq 0 ] && exit 0
# 77 once some process skipped and every other one either skipped too or was
# ended by a signal (the agent's, 128 + n), none failing on its own.
skip=0
for f in "$dir"/rank.*; do
  [ -f "$f" ] || continue
  s=$(cat "$f")
  if [ "$s" -eq 77 ]; then skip=1
  elif [ "$s" -le 128 ]; then skip=0; break
  fi
done
[ $skip -eq 1 ] && echo "torchrun-launch: the job skipped (exit 77)" && exit 77
exit $rc
