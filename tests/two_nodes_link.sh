#!/bin/sh
# The delayed link of tests/two-nodes.sh (up RATE DELAY, through tests/netrelay):
# MPI between the two simulated nodes must see the delay and the rate asked for
# (tests/link_probe checks both). Skipped (77) where namespaces or TAP devices
# cannot be made.
set -u
. "$(dirname "$0")/mpi_jobs_only.sh"
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${top_builddir:-.}" && pwd)
probe=$build/tests/link_probe
relay=$build/tests/netrelay
[ -x "$probe" ] || { echo "two_nodes_link: $probe not built" >&2; exit 99; }
[ -x "$relay" ] || { echo "two_nodes_link: SKIP: tests/netrelay not built (no linux/if_tun.h)" >&2; exit 77; }
[ -c /dev/net/tun ] || { echo "two_nodes_link: SKIP: no /dev/net/tun" >&2; exit 77; }
# The MPI of this build (configure's DIST_MPI_IMPL): two-nodes.sh starts its launcher.
case $(sed -n 's/^#define DIST_MPI_IMPL "\(.*\)"$/\1/p' "${top_builddir:-.}/config.h" 2>/dev/null || :) in
  MPICH) TWO_NODES_MPI=mpich ;;
  *) TWO_NODES_MPI=openmpi ;;
esac
export TWO_NODES_MPI
"$here/two-nodes.sh" check || exit 77
export TWO_NODES_PREFIX=distlink TWO_NODES_TIMEOUT=${TEST_TIMEOUT:-120} TWO_NODES_RELAY=$relay
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# One try: the link up, then the measurement (99: the link did not come up).
# Under MPICH, a run that timed out after the probe's PASS verdict counts as
# passed, with a line saying so: MPICH 4.0 over UCX/TCP hangs in MPI_Finalize
# in about half of the runs between the simulated nodes, also without distmgr
# (tests/daso_two_nodes.sh skips for it); the link was measured and checked.
try_once() {
  "$here/two-nodes.sh" up 200mbit 2ms || return 99
  "$here/two-nodes.sh" run 2 "$probe" 2000 200 >"$out" 2>&1
  r=$?
  cat "$out"
  if [ $r -eq 124 ] && [ "$TWO_NODES_MPI" = mpich ] && grep -q '^link_probe: verdict: PASS' "$out"; then
    echo "two_nodes_link: the link passed its checks, then MPICH's MPI_Finalize hung (known, not distmgr's): counted as passed"
    r=0
  fi
  return $r
}
try_once
rc=$?
if [ $rc -ne 0 ]; then
  # Loaded CI passes saw, once each, ORTE's daemon fail to reach the other
  # namespace over a link just made (ASan), and the TAP pair vanish while the
  # link came up (MPICH: "tap1 does not exist"); the measurement itself never
  # ran. Say so and try once more over a fresh link: a second failure fails
  # the test.
  echo "two_nodes_link: the try failed (exit $rc); bringing the link up again for one more try"
  "$here/two-nodes.sh" down
  sleep 2 # the first try's relay and namespaces are gone before the second starts
  try_once
  rc=$?
fi
"$here/two-nodes.sh" down
exit $rc
