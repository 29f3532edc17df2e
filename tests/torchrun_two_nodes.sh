#!/bin/sh
# torchrun on the two simulated nodes of tests/two-nodes.sh, without MPI: one
# torchrun agent per node (--nnodes=2 --nproc_per_node=2, static rendezvous at
# node 0's address), each node with its own host name that resolves nowhere,
# so Gloo must find its address on its own (the store connection's end).
#  - tests/torchrun_coll: 4 ranks on 2 nodes, the built-in groups (local,
#    cross) and every host collective;
#  - examples/train_daso: DASO's cross-node syncs over the link, every
#    epoch's loss as under mpirun on the same two nodes, digit for digit.
# Skipped (77) without torch, Gloo or namespaces.
if [ "${CI_SKIP_TESTS_WITHOUT_MPI:-}" = skip ] || [ "${CI_SKIP_TESTS_WITHOUT_MPI:-}" = extra ]; then
  echo "SKIP: no MPI here; another CI pass runs it (CI_SKIP_TESTS_WITHOUT_MPI=$CI_SKIP_TESTS_WITHOUT_MPI)"
  exit 77
fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${top_builddir:-.}" && pwd)
coll=$B/tests/torchrun_coll daso=$B/examples/train_daso
/usr/bin/python3 -c "import torch.distributed.run" 2>/dev/null || { echo "SKIP: no torch for /usr/bin/python3"; exit 77; }
[ -x "$coll" ] || { echo "SKIP: tests/torchrun_coll not built (no Gloo)"; exit 77; }
case $(sed -n 's/^#define DIST_MPI_IMPL "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :) in
  MPICH) TWO_NODES_MPI=mpich ;;
  *) TWO_NODES_MPI=openmpi ;;
esac
export TWO_NODES_MPI TWO_NODES_PREFIX=distrun TWO_NODES_TIMEOUT=${TEST_TIMEOUT:-120}
"$here/two-nodes.sh" check || exit 77
"$here/two-nodes.sh" up || exit 99
failures=0 out=$(mktemp -d)
DIST_TIMEOUT=60 "$here/two-nodes.sh" torchrun 2 "$coll" > "$out/coll" 2>&1
rc=$? ok=$(grep -c "^torchrun_coll: rank [0-3] of 4 ok" "$out/coll")
if [ $rc -eq 0 ] && [ "$ok" -eq 4 ]; then echo "ok   torchrun_coll: 4 ranks on 2 nodes (2 torchrun agents)"
else echo "FAIL torchrun_coll on 2 nodes (exit $rc, $ok of 4 ranks ok)"; tail -20 "$out/coll" | sed 's/^/     /'; failures=$((failures + 1)); fi
DIST_TIMEOUT=60 "$here/two-nodes.sh" torchrun 2 "$daso" > "$out/gloo" 2>&1
rcg=$?
"$here/two-nodes.sh" run 4 "$daso" > "$out/mpi" 2>&1
rcm=$?
losses() { grep -o "loss [0-9.e+-]*" "$1" | sort; }
if [ $rcg -eq 0 ] && [ $rcm -eq 0 ] && grep -q "4 ranks on 2 nodes" "$out/gloo" && [ -n "$(losses "$out/mpi")" ] &&
  [ "$(losses "$out/gloo")" = "$(losses "$out/mpi")" ]; then
  echo "ok   train_daso under torchrun on 2 nodes: mpirun's losses ($(losses "$out/mpi" | tr '\n' ' '))"
else
  echo "FAIL train_daso: torchrun (exit $rcg) and mpirun (exit $rcm) on 2 nodes differ"
  tail -6 "$out/gloo" "$out/mpi" | sed 's/^/     /'
  failures=$((failures + 1))
fi
"$here/two-nodes.sh" down
rm -rf "$out"
echo "torchrun_two_nodes: $failures failure(s)"
[ $failures -eq 0 ]
