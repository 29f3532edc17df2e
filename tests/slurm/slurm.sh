#!/bin/bash
# Real SLURM launches on a private one-node cluster (tests/slurm/cluster.sh):
#   srun -n 2 and srun -n 4 --overcommit of the distributed tests (through the
#   same LAUNCHER variable make check uses), hello under srun (SLURM ranks),
#   an sbatch batch script (SLURM, rank 0 of 1, no launch-node address) and
#   mpirun inside the sbatch allocation (Open MPI wins over stale SLURM_*).
# Skips (77) where no cluster can run (not root, SLURM not installed).
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${top_builddir:-.}" && pwd)
cluster="$here/cluster.sh"
bash "$cluster" check || exit $?

D=$(mktemp -d /tmp/distmgr-slurm.XXXXXX)
trap 'bash "$cluster" stop "$D" >/dev/null 2>&1; rm -rf "$D"' EXIT
bash "$cluster" start "$D" >/dev/null || { echo "FAIL: cluster did not start"; exit 1; }
. "$D/env.sh"
failures=0

# check <name> <expected count> <pattern> <output>: srun exits 0 even when a
# step fails to launch, so results are judged by the output alone.
check() {
  n=$(printf '%s\n' "$4" | grep -cE -- "$3")
  if [ "$n" -eq "$2" ]; then echo "PASS: $1"; else
    failures=$((failures + 1)); echo "FAIL: $1 (found $n lines matching '$3', expected $2)"; printf '%s\n' "$4" | sed 's/^/    /'; fi
}

SRUN="srun --mpi=pmix --overcommit -n"
for np in 2 4; do
  for t in test_groups test_adopt; do
    out=$(LAUNCHER="$SRUN" TEST_TIMEOUT=120 sh "$here/../mpi-launch.sh" "$B/tests/$t-np$np.mpi" 2>&1)
    check "srun -n $np $t" 1 "^$t: 0 failure\(s\) over $np rank\(s\)" "$out"
  done
done

out=$(timeout 60 $SRUN 2 "$B/examples/hello" 2>&1)
check "srun -n 2 hello detected as SLURM" 2 '^\[SLURM\] rank [01]/2 local [01]/2' "$out"

cat > "$D/job.sh" <<JOB
#!/bin/bash
echo "batch: SLURM_STEP_ID=\${SLURM_STEP_ID:-unset} SLURM_LAUNCH_NODE_IPADDR=\${SLURM_LAUNCH_NODE_IPADDR:-unset}"
timeout 60 "$B/examples/hello"
timeout 60 mpirun --allow-run-as-root --oversubscribe -n 2 "$B/examples/hello"
JOB
timeout 120 sbatch --wait -n 2 -o "$D/job.out" "$D/job.sh" >/dev/null
out=$(cat "$D/job.out" 2>&1)
check "sbatch batch script detected as SLURM, rank 0 of 1" 1 '^\[SLURM\] rank 0/1' "$out"
check "sbatch without srun has no SLURM_STEP_ID" 1 'SLURM_STEP_ID=unset' "$out"
check "mpirun inside sbatch detected as Open MPI" 2 '^\[OPENMPI\] rank [01]/2' "$out"

echo "slurm: $failures failure(s)"
[ $failures -eq 0 ]
