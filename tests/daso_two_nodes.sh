#!/bin/sh
# test_daso on two simulated nodes of 2 ranks (network namespaces joined by a
# veth, tests/two-nodes.sh): the node layout comes from MPI itself, not from
# DIST_RANKS_PER_NODE; then test_rpc on the same nodes (remote calls with
# peer-failure endpoints between nodes, shared memory within). Skipped (77) where namespaces cannot be made, and in an
# MPICH build (the reason is printed below).
set -u
. "$(dirname "$0")/mpi_jobs_only.sh"
here=$(cd "$(dirname "$0")" && pwd)
prog=$(cd "${top_builddir:-.}" && pwd)/tests/test_daso
[ -x "$prog" ] || { echo "daso_two_nodes: $prog not built" >&2; exit 99; }
# The MPI of this build (configure's DIST_MPI_IMPL): two-nodes.sh starts its launcher.
case $(sed -n 's/^#define DIST_MPI_IMPL "\(.*\)"$/\1/p' "${top_builddir:-.}/config.h" 2>/dev/null || :) in
  MPICH) TWO_NODES_MPI=mpich ;;
  *) TWO_NODES_MPI=openmpi ;;
esac
export TWO_NODES_MPI
if [ "$TWO_NODES_MPI" = mpich ]; then
  # Not a launch problem: tests/two-nodes.sh starts MPICH's Hydra on the two
  # nodes (tests/two_nodes_link.sh runs that way), and test_daso's checks all
  # pass there; then MPI_Finalize hangs in about one run of two.
  echo "daso_two_nodes: SKIP: with MPICH 4.0 (ch4:ucx, UCX 1.13 over TCP between the simulated nodes), MPI_Finalize" \
    "hangs in about half of the 4-rank runs, also in a plain MPI program (MPI_Comm_dup, MPI_Allreduce," \
    "MPI_Comm_free, MPI_Finalize) without distmgr; 2-rank runs (one per node) do not hang"
  exit 77
fi
"$here/two-nodes.sh" check || exit 77
export TWO_NODES_PREFIX=distdaso TWO_NODES_TIMEOUT=${TEST_TIMEOUT:-120}
"$here/two-nodes.sh" up || exit 99
"$here/two-nodes.sh" run 4 "$prog"
rc=$?
# Remote calls on the same two nodes: endpoints to the other node take UCX's
# peer-failure mode (TCP over the link), those on the node shared memory.
rpc=$(cd "${top_builddir:-.}" && pwd)/tests/test_rpc
if [ $rc -eq 0 ] && [ -x "$rpc" ]; then
  "$here/two-nodes.sh" run 4 "$rpc"
  rc=$?
fi
"$here/two-nodes.sh" down
exit $rc
