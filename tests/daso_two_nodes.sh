#!/bin/sh
# test_daso on two simulated nodes of 2 ranks (network namespaces joined by a
# veth, tests/two-nodes.sh): the node layout comes from MPI itself, not from
# DIST_RANKS_PER_NODE. Skipped (77) where namespaces cannot be made.
set -u
here=$(cd "$(dirname "$0")" && pwd)
prog=$(cd "${top_builddir:-.}" && pwd)/tests/test_daso
[ -x "$prog" ] || { echo "daso_two_nodes: $prog not built" >&2; exit 99; }
"$here/two-nodes.sh" check || exit 77
export TWO_NODES_PREFIX=distdaso TWO_NODES_TIMEOUT=${TEST_TIMEOUT:-120}
"$here/two-nodes.sh" up || exit 99
"$here/two-nodes.sh" run 4 "$prog"
rc=$?
"$here/two-nodes.sh" down
exit $rc
