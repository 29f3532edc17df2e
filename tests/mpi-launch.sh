#!/bin/sh
# Log compiler for "PROG-npN.mpi" tests: run PROG on N ranks through
# $LAUNCHER (e.g. "mpirun --oversubscribe --allow-run-as-root -n",
# "mpiexec.mpich -n" or "srun --overcommit -n"; unset: the launcher configure
# chose for this build's MPI, DIST_DEFAULT_LAUNCHER in config.h), under a
# timeout so a hang fails instead of blocking.
# Suffixes after the rank count set a setting for the run:
#   "-rpnK"    DIST_RANKS_PER_NODE=K (N ranks as N/K nodes of K on one machine);
#   "-staged", "-nccl"   DIST_CUDA_BACKEND (the engine of device-memory
#              collectives, read at initialize);
#   "-p2p"     DIST_ROUND=p2p (check rounds by messages, as across nodes).
# e.g. "PROG-np4-rpn2.mpi", "PROG-np2-nccl.mpi".
set -u
test_file=$1
base=$(basename "$test_file" .mpi)
dir=$(dirname "$test_file")
while :; do
  case $base in
    *-staged|*-nccl) DIST_CUDA_BACKEND=${base##*-}; export DIST_CUDA_BACKEND; base=${base%-*} ;;
    *-p2p) DIST_ROUND=p2p; export DIST_ROUND; base=${base%-p2p} ;;
    *-rpn*) DIST_RANKS_PER_NODE=${base##*-rpn}; export DIST_RANKS_PER_NODE; base=${base%-rpn*} ;;
    *) break ;;
  esac
done
prog=${base%-np*}
np=${base##*-np}
case $np in ''|*[!0-9]*) echo "mpi-launch: cannot read a rank count from '$test_file'" >&2; exit 99 ;; esac
launcher=${LAUNCHER:-$(sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "${top_builddir:-$dir/..}/config.h" 2>/dev/null || :)}
launcher=${launcher:-mpirun --oversubscribe --allow-run-as-root -n}
echo "mpi-launch: ${DIST_ROUND:+DIST_ROUND=$DIST_ROUND }${DIST_RANKS_PER_NODE:+DIST_RANKS_PER_NODE=$DIST_RANKS_PER_NODE }${DIST_CUDA_BACKEND:+DIST_CUDA_BACKEND=$DIST_CUDA_BACKEND }timeout ${TEST_TIMEOUT:-120} $launcher $np $dir/$prog"
# Open MPI's session directory in a folder of this run's own: parallel
# mpiruns share /tmp/ompi.HOST.UID, and one removing it while another makes
# its pid folder there failed a CI pass ("orte_session_dir failed").
# Other MPIs ignore the variable.
session=$(mktemp -d "${TMPDIR:-/tmp}/mpi-launch.XXXXXX") || exit 99
OMPI_MCA_orte_tmpdir_base=$session
export OMPI_MCA_orte_tmpdir_base
timeout -k 5 "${TEST_TIMEOUT:-120}" $launcher "$np" "$dir/$prog"
rc=$?
rm -rf "$session"
exit $rc
