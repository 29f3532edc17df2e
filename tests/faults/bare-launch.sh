#!/bin/sh
# A LAUNCHER without MPI for the allocation sweep by hand: "sh
# tests/faults/bare-launch.sh N PROG [ARG...]" starts N processes of PROG with
# only RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and a free
# MASTER_PORT (rank 0 serves distmgr's store; Gloo, no MPI), e.g.
#   LAUNCHER="sh $PWD/tests/faults/bare-launch.sh" top_builddir=_build sh tests/faults/malloc_sweep.sh
# Exit status: the last non-zero one of the processes, else 0.
n=$1
shift
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])") || exit 1
pids= r=0
while [ "$r" -lt "$n" ]; do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    DIST_HOST_ENGINE=${DIST_HOST_ENGINE:-gloo} "$@" &
  pids="$pids $!"
  r=$((r + 1))
done
rc=0
for p in $pids; do wait "$p" || rc=$?; done
exit $rc
