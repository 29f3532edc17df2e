#!/bin/bash
# Real SLURM launches on a private one-node cluster (tests/slurm/cluster.sh):
#   srun -n 2 and srun -n 4 --overcommit of the distributed tests (through the
#   same LAUNCHER variable make check uses), hello under srun, an sbatch batch
#   script (SLURM, rank 0 of 1, no launch-node address) and the MPI's own
#   launcher inside the sbatch allocation (it wins over stale SLURM_*).
# The PMI plugin and the expectations follow the MPI of this build (config.h):
#   Open MPI: srun --mpi=pmix; hello under srun says SLURM (no Open MPI
#             variables are set); mpirun inside sbatch says OPENMPI.
#   MPICH:    srun --mpi=pmi2 (MPICH has no PMIx client here); srun's PMI-2
#             sets PMI_RANK beside SLURM_PROCID, and the MPICH launcher wins
#             over SLURM (launch precedence), so hello under srun says MPICH;
#             mpiexec.mpich (Hydra) inside sbatch says MPICH.
# Skips (77) where no cluster can run (not root, SLURM not installed, no PMI
# plugin for this MPI, an MPI other than these two).
set -u
. "$(dirname "$0")/../mpi_jobs_only.sh"
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${top_builddir:-.}" && pwd)
cluster="$here/cluster.sh"
bash "$cluster" check || exit $?

# The MPI of this build, from config.h (configure's DIST_MPI_IMPL).
mpi=$(sed -n 's/^#define DIST_MPI_IMPL "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :)
case $mpi in
  "Open MPI" | "")
    pmi=pmix; srun_says=SLURM; batch_mpirun="mpirun --allow-run-as-root --oversubscribe -n"; batch_says=OPENMPI ;;
  MPICH)
    pmi=pmi2; srun_says=MPICH; batch_mpirun="mpiexec.mpich -n"; batch_says=MPICH ;;
  *) echo "SKIP: no SLURM expectations for this build's MPI ($mpi)"; exit 77 ;;
esac

D=$(mktemp -d /tmp/distmgr-slurm.XXXXXX)
trap 'bash "$cluster" stop "$D" >/dev/null 2>&1; rm -rf "$D"' EXIT
bash "$cluster" start "$D" >/dev/null || { echo "FAIL: cluster did not start"; exit 1; }
. "$D/env.sh"
failures=0
srun --mpi=list 2>&1 | grep -qw "$pmi" || { echo "SKIP: srun has no --mpi=$pmi plugin, which $mpi needs"; exit 77; }

# check <name> <expected count> <pattern> <output>: srun exits 0 even when a
# step fails to launch, so results are judged by the output alone.
check() {
  n=$(printf '%s\n' "$4" | grep -cE -- "$3")
  if [ "$n" -eq "$2" ]; then echo "PASS: $1"; else
    failures=$((failures + 1)); echo "FAIL: $1 (found $n lines matching '$3', expected $2)"; printf '%s\n' "$4" | sed 's/^/    /'; fi
}

SRUN="srun --mpi=$pmi --overcommit -n"
for np in 2 4; do
  for t in test_groups test_adopt test_rpc; do
    out=$(LAUNCHER="$SRUN" TEST_TIMEOUT=120 sh "$here/../mpi-launch.sh" "$B/tests/$t-np$np.mpi" 2>&1)
    check "srun -n $np $t" 1 "^$t: 0 failure\(s\) over $np rank\(s\)" "$out"
  done
done

out=$(timeout 60 $SRUN 2 "$B/examples/hello" 2>&1)
if [ "$srun_says" = MPICH ]; then
  check "srun --mpi=pmi2 -n 2 hello detected as MPICH (PMI_RANK wins over SLURM_PROCID)" 2 '^\[MPICH\] rank [01]/2 local [01]/2' "$out"
else
  check "srun -n 2 hello detected as SLURM" 2 '^\[SLURM\] rank [01]/2 local [01]/2' "$out"
fi

cat > "$D/job.sh" <<JOB
#!/bin/bash
echo "batch: SLURM_STEP_ID=\${SLURM_STEP_ID:-unset} SLURM_LAUNCH_NODE_IPADDR=\${SLURM_LAUNCH_NODE_IPADDR:-unset}"
timeout 60 "$B/examples/hello"
timeout 60 $batch_mpirun 2 "$B/examples/hello"
JOB
timeout 120 sbatch --wait -n 2 -o "$D/job.out" "$D/job.sh" >/dev/null
out=$(cat "$D/job.out" 2>&1)
check "sbatch batch script detected as SLURM, rank 0 of 1" 1 '^\[SLURM\] rank 0/1' "$out"
check "sbatch without srun has no SLURM_STEP_ID" 1 'SLURM_STEP_ID=unset' "$out"
check "sbatch -n 2 batch script warns that only one process runs" 1 \
  'WARN\] SLURM_NTASKS=2 but this is the batch script itself, not an srun step: only this one process runs' "$out"
check "${batch_mpirun%% *} inside sbatch detected as $batch_says" 2 "^\\[$batch_says\\] rank [01]/2" "$out"

# srun ... torchrun ... (PhysicsNeMo's SLURM pattern: one torchrun per srun
# task, joined into one torchrun world by a rendezvous; here the static one,
# node rank = SLURM_PROCID; tests/slurm/torchrun.py is torchrun's own agent,
# Debian's CLI being broken). In a build with Gloo it runs without MPI: each
# torchrun agent a node of two, a group tree and a collective over all four
# ranks. With MPI as the host engine (DIST_HOST_ENGINE=mpi, or no Gloo) it is
# refused with what is true and what works; with one process per task and
# DIST_INIT_METHOD=SLURM it runs with Open MPI (PMIx), while MPICH's pmi2
# connection is closed by torchrun.
# A port free now, for each step: a fixed one can still be held (TIME_WAIT,
# another job) and torchrun's store then fails to bind ("Address already in use").
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
torchrun_step() { # torchrun_step NPROC_PER_NODE [PROGRAM]: 2 srun tasks, one torchrun each
  timeout 120 $SRUN 2 sh -c 'exec /usr/bin/python3 "$0" --nnodes=2 --node_rank="$SLURM_PROCID" \
    --master_addr=127.0.0.1 --master_port="$1" --nproc_per_node="$2" --no_python "$3"' \
    "$here/torchrun.py" "$(free_port)" "$1" "${2:-$B/examples/hello}" 2>&1
}
gloo=no
grep -q '^#define HAVE_GLOO 1' "$B/config.h" 2>/dev/null && gloo=yes
if /usr/bin/python3 -c 'import torch.distributed.run' >/dev/null 2>&1; then
  engine=DIST_HOST_ENGINE=auto
  if [ $gloo = yes ]; then
    engine=DIST_HOST_ENGINE=mpi
    out=$(torchrun_step 2)
    check "srun -n 2 torchrun --nnodes=2 --nproc_per_node=2: 4 ranks on Gloo, each agent a node of 2" 4 \
      '^\[ENV\] rank [0-3]/4 local [01]/2 node [01] .*model_parallel [01]/2 data_parallel [01]/2' "$out"
    if [ -x "$B/tests/torchrun_coll" ]; then
      out=$(torchrun_step 2 "$B/tests/torchrun_coll")
      check "srun -n 2 torchrun --nnodes=2 --nproc_per_node=2: collectives and groups on Gloo" 4 \
        '^torchrun_coll: rank [0-3] of 4 ok' "$out"
    fi
  fi
  if [ "$srun_says" = MPICH ]; then
    # torchrun's children inherit PMI_RANK and a PMI_FD that torchrun closed.
    out=$(export $engine; torchrun_step 2)
    check "srun --mpi=pmi2 -n 2 torchrun --nproc_per_node=2, MPI as host engine: refused as torchrun under srun, before MPI_Init" 4 \
      "launched by torchrun under srun \(torchrun rank [0-3] of 4, srun task [01] of 2\).*srun -n 4 --mpi=pmi2 PROGRAM\);" "$out"
    out=$(DIST_INIT_METHOD=SLURM torchrun_step 1)
    check "srun --mpi=pmi2 -n 2 torchrun --nproc_per_node=1 with DIST_INIT_METHOD=SLURM: the closed PMI_FD named" 2 \
      "PMI_FD=[0-9]+ is not an open file in this process, so MPICH [0-9.]+'s MPI_Init would abort" "$out"
  else
    out=$(export $engine; torchrun_step 2)
    check "srun -n 2 torchrun --nproc_per_node=2, MPI as host engine: refused, told as torchrun under srun" 4 \
      "launched by torchrun under srun \(torchrun rank [0-3] of 4, srun task [01] of 2\).*DIST_INIT_METHOD=SLURM" "$out"
    out=$(DIST_INIT_METHOD=SLURM torchrun_step 1)
    check "srun -n 2 torchrun --nproc_per_node=1 with DIST_INIT_METHOD=SLURM runs" 2 '^\[SLURM\] rank [01]/2' "$out"
  fi
else
  echo "SKIP: torchrun checks (python3 has no torch.distributed)"
fi

echo "slurm: $failures failure(s)"
[ $failures -eq 0 ]
