#!/bin/sh
# Launch environments that must fail with a clear message, or work, when a
# program is started directly (an MPI singleton) with a given environment;
# and a program that forgets dist_manager_finalize under the launcher.
set -u
. "$(dirname "$0")/mpi_jobs_only.sh"
B=${top_builddir:-.}
HELLO="$B/examples/hello"
FORGET="$B/tests/forget_finalize"
LAUNCHER=${LAUNCHER:-mpirun --oversubscribe --allow-run-as-root -n}
failures=0

CUDA_BUILD=no
# The MPI of this build (configure's DIST_MPI_IMPL): some launches can only
# fail under MPICH (its MPI_Init needs the PMI connection it inherits).
mpi=$(sed -n 's/^#define DIST_MPI_IMPL "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null)
grep -q '^#define HAVE_CUDA 1' "$B/config.h" 2>/dev/null && CUDA_BUILD=yes
GLOO_BUILD=no
grep -q '^#define HAVE_GLOO 1' "$B/config.h" 2>/dev/null && GLOO_BUILD=yes

# expect <exit: ok|fail> <text the output must contain, or !text it must not> <env assignments...>
expect() {
  want=$1 text=$2
  shift 2
  out=$(env "$@" timeout 60 "$HELLO" 2>&1)
  rc=$?
  if [ "$want" = ok ] && [ $rc -ne 0 ]; then verdict=FAIL; elif [ "$want" = fail ] && [ $rc -eq 0 ]; then verdict=FAIL
  elif [ "${text#!}" != "$text" ] && printf '%s' "$out" | grep -qF -- "${text#!}"; then verdict=FAIL
  elif [ "${text#!}" = "$text" ] && ! printf '%s' "$out" | grep -qF -- "$text"; then verdict=FAIL; else verdict=PASS; fi
  echo "$verdict: [$*] -> rc=$rc, expected $want with '$text'"
  [ $verdict = PASS ] || { failures=$((failures + 1)); printf '%s\n' "$out" | sed 's/^/    /'; }
}

# torchrun's processes (several, which MPI cannot join) run on Gloo by
# default; with MPI as the host engine (DIST_HOST_ENGINE=mpi, or a build
# without Gloo) they are refused, saying how to launch.
if [ "$GLOO_BUILD" = yes ]; then
  MPI_ENGINE=DIST_HOST_ENGINE=mpi
  expect fail "a launch without MPI needs MASTER_ADDR and MASTER_PORT for its rendezvous" RANK=0 WORLD_SIZE=2 LOCAL_RANK=0
  expect fail "rendezvous of rank 1 of 2 (rank 0's store): store: no store answered at 127.0.0.1 port 1 in time" DIST_TIMEOUT=2 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1
  expect fail "leave DIST_HOST_ENGINE unset: torchrun's processes then run on Gloo" $MPI_ENGINE RANK=0 WORLD_SIZE=2 LOCAL_RANK=0
else
  MPI_ENGINE=DIST_HOST_ENGINE=auto
  expect fail "rebuild distmgr with libgloo-dev: torchrun's processes then run on Gloo" RANK=0 WORLD_SIZE=2 LOCAL_RANK=0
  expect fail "DIST_HOST_ENGINE=gloo, but this distmgr was built without Gloo" DIST_HOST_ENGINE=gloo RANK=0 WORLD_SIZE=2
fi
expect fail "launch with 'mpirun -n 2' or 'srun -n 2'" $MPI_ENGINE RANK=0 WORLD_SIZE=2 LOCAL_RANK=0
expect ok "[ENV] rank 0/1" RANK=0 WORLD_SIZE=1
expect fail "RANK='abc' is not an integer (launch method ENV)" RANK=abc WORLD_SIZE=2
expect fail "WORLD_SIZE is missing" RANK=0
expect fail "RANK=3 is not below WORLD_SIZE=2" RANK=3 WORLD_SIZE=2
expect fail "MASTER_PORT='http' is not an integer" RANK=0 WORLD_SIZE=1 MASTER_PORT=http
# A bad setting under torchrun fails alone, before MPI_Init (which would abort).
expect fail "DIST_LOG_LEVEL='loud' is not a log level" DIST_LOG_LEVEL=loud RANK=1 WORLD_SIZE=2 PMI_RANK=0 PMI_SIZE=1 PMI_FD=99 TORCHELASTIC_RUN_ID=none SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
# torchrun under srun (PhysicsNeMo's SLURM pattern) with MPI as the host
# engine: say what is true and what works, never "launch with srun".
expect fail "launched by torchrun under srun (torchrun rank 0 of 2, srun task 0 of 1): $(echo $MPI_ENGINE | sed 's/=auto$//')" $MPI_ENGINE RANK=0 WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
if [ "$mpi" = MPICH ]; then
  expect fail "cannot start under torchrun at all; what works with MPI: let srun start one process per rank (srun -n 2 --mpi=pmi2 PROGRAM)" $MPI_ENGINE RANK=0 WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
  expect fail "!DIST_INIT_METHOD=SLURM" $MPI_ENGINE RANK=0 WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
else
  expect fail "keep torchrun with one process per srun task (--nproc-per-node=1) and set DIST_INIT_METHOD=SLURM" $MPI_ENGINE RANK=0 WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
fi
expect fail "!launch with 'mpirun" $MPI_ENGINE RANK=0 WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
expect ok "[SLURM] rank 0/1" DIST_INIT_METHOD=SLURM RANK=0 WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
# torchrun's children under srun --mpi=pmi2 or mpirun inherit the task's
# PMI_RANK or OMPI_* (TORCHELASTIC_RUN_ID marks torchrun's children): refused
# as torchrun before MPI_Init, which would abort there.
expect fail "launched by torchrun under srun (torchrun rank 1 of 2, srun task 0 of 1)" $MPI_ENGINE TORCHELASTIC_RUN_ID=none RANK=1 WORLD_SIZE=2 PMI_RANK=0 PMI_SIZE=1 PMI_FD=99 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
expect fail "launched by torchrun under an MPI launcher (torchrun rank 1 of 2, OMPI_COMM_WORLD_RANK=0 of OMPI_COMM_WORLD_SIZE=1)" $MPI_ENGINE TORCHELASTIC_RUN_ID=none RANK=1 WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1
# MPICH's MPI_Init aborts on a PMI_FD its parent closed (torchrun does):
# refused before it with what happened.
if [ "$mpi" = MPICH ]; then
  expect fail "PMI_FD=99 is not an open file in this process, so MPICH" PMI_FD=99
  expect fail "PMI_FD=99 is not an open file" DIST_INIT_METHOD=SLURM TORCHELASTIC_RUN_ID=none RANK=0 WORLD_SIZE=2 PMI_FD=99 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0
fi
# The environment must agree with what MPI says. A launcher announcing n > 1
# while MPI sees a world of 1: the program's MPI did not join the launcher's
# (another MPI, or the wrong srun plugin): say so and what to do, and that
# DIST_INIT_METHOD cannot help.
expect fail "launcher MPICH says rank 1 of 2, but MPI sees a world of 1 process (rank 0): a PMI launcher (MPICH's mpiexec, or srun --mpi=pmi2) started it, and this program's MPI (" PMI_RANK=1 PMI_SIZE=2
expect fail "DIST_INIT_METHOD cannot help: it would run 2 independent one-process jobs" PMI_RANK=1 PMI_SIZE=2
expect fail "launcher OPENMPI says rank 1 of 4, but MPI sees a world of 1 process (rank 0): Open MPI's mpirun started it" OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4
expect fail "launcher SLURM says rank 1 of 2, but MPI sees a world of 1 process (rank 0): srun started it with the MPI plugin 'pmi2'" SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_MPI_TYPE=pmi2
expect fail "srun must start it with the plugin its MPI speaks: srun --mpi=" SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_MPI_TYPE=none
# Plain sbatch (batch script, no srun, no launch-node address): one process,
# and a warning when the allocation has more tasks.
expect ok "[SLURM] rank 0/1" SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_JOB_ID=7
expect ok "[distmgr WARN] SLURM_NTASKS=4 but this is the batch script itself, not an srun step: only this one process runs; start the program with srun (or mpirun) inside the script to run 4 ranks" SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_JOB_ID=7
expect ok "!WARN" SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_JOB_ID=7
# DIST_INIT_METHOD forces a launcher; SINGLE where a launcher says n > 1
# warns; bad settings name the variable.
expect ok "[SINGLE] rank 0/1" DIST_INIT_METHOD=single SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_ID=0
expect ok "[distmgr WARN] launch method SINGLE was forced (DIST_INIT_METHOD), but SLURM says rank 1 of 2: every process started by that launcher runs alone, as 2 independent one-process jobs" DIST_INIT_METHOD=single SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_ID=0
expect ok "!WARN" DIST_INIT_METHOD=single
expect fail "DIST_INIT_METHOD='pbs'" DIST_INIT_METHOD=pbs
expect fail "DIST_LOG_LEVEL='loud' is not a log level" DIST_LOG_LEVEL=loud
expect fail "DIST_RANKS_PER_NODE='two'" DIST_RANKS_PER_NODE=two
# A misspelt setting is not ignored silently.
expect ok "DIST_VERFIY is not a distmgr setting (did you mean DIST_VERIFY?)" DIST_VERFIY=0
# CPU-only host: asking for a CUDA device is an error, auto gives the CPU.
expect fail "DIST_DEVICE=3 but this process sees 0 CUDA device(s)" DIST_DEVICE=3 CUDA_VISIBLE_DEVICES=
expect ok "device cpu:0" DIST_DEVICE=auto CUDA_VISIBLE_DEVICES=
expect ok "!WARN" DIST_DEVICE=auto CUDA_VISIBLE_DEVICES=
# GPUs allocated but CUDA unusable: a CUDA build warns (DIST_DEVICE=cuda makes
# it an error); a build without CUDA runs on the CPU as built.
if [ $CUDA_BUILD = yes ]; then
  expect ok "[distmgr 0/1 WARN] GPUs were allocated but CUDA cannot be used on this node (CUDA_VISIBLE_DEVICES=0 but cudaGetDeviceCount: " CUDA_VISIBLE_DEVICES=0
  expect ok "GPUs were allocated but CUDA cannot be used on this node (SLURM_GPUS_ON_NODE=2 but cudaGetDeviceCount: " SLURM_GPUS_ON_NODE=2 CUDA_VISIBLE_DEVICES=
  expect fail "DIST_DEVICE=cuda but this process can use no CUDA device (cudaGetDeviceCount: " DIST_DEVICE=cuda CUDA_VISIBLE_DEVICES=0
  expect ok "!WARN" DIST_DEVICE=cpu CUDA_VISIBLE_DEVICES=0
else
  expect ok "!WARN" CUDA_VISIBLE_DEVICES=0
  expect fail "DIST_DEVICE=cuda but this process can use no CUDA device (distmgr was built without CUDA)" DIST_DEVICE=cuda
fi

# Under the launcher: torchrun-style variables next to MPI ones lose. And no
# MPI handle outlives finalize (MPICH prints "yaksa: N leaked handle pool
# objects" for each at MPI_Finalize), nor an unreceived fault notice (UCX:
# "unexpected tag-receive descriptor ... was not matched").
out=$(timeout 60 $LAUNCHER 2 env RANK=5 WORLD_SIZE=9 "$HELLO" 2>&1)
if [ $? -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c 'rank [01]/2')" -eq 2 ]; then echo "PASS: RANK/WORLD_SIZE beside the launcher's variables"
else failures=$((failures + 1)); echo "FAIL: RANK/WORLD_SIZE beside the launcher's variables"; printf '%s\n' "$out"; fi
if printf '%s\n' "$out" | grep -qiE 'leaked|was not matched'; then failures=$((failures + 1)); echo "FAIL: MPI reports leaked handles or unreceived messages"; printf '%s\n' "$out"
else echo "PASS: no leaked MPI handles or unreceived messages reported at MPI_Finalize"; fi
# A bad setting on one rank only: every rank returns an error, none hangs.
out=$(timeout 60 $LAUNCHER 3 sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}" = 1 ]; then export DIST_DEVICE=gpu; fi; exec "$0"' "$HELLO" 2>&1)
if [ "$(printf '%s\n' "$out" | grep -c 'starting distmgr (DIST_\* settings, launch detection, launcher check) failed on rank 1')" -eq 2 ] &&
   printf '%s\n' "$out" | grep -q "DIST_DEVICE='gpu'"; then echo "PASS: one rank's bad setting fails every rank"
else failures=$((failures + 1)); echo "FAIL: one rank's bad setting fails every rank"; printf '%s\n' "$out"; fi
# Ranks whose failures differ all return the same code (the most negative).
out=$(timeout 60 $LAUNCHER 2 sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}" = 0 ]; then export DIST_LOG_LEVEL=loud; else export DIST_INIT_METHOD=ENV; fi; exec "$0"' "$HELLO" 2>&1)
if [ "$(printf '%s\n' "$out" | grep -c 'invalid DIST_\* setting')" -eq 2 ]; then echo "PASS: different failures, one code"
else failures=$((failures + 1)); echo "FAIL: different failures, one code"; printf '%s\n' "$out"; fi
# MASTER_ADDR/MASTER_PORT set on rank 0 only: no hang, every rank reports rank 0's.
out=$(timeout 60 $LAUNCHER 2 sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}" = 0 ]; then export MASTER_ADDR=headnode MASTER_PORT=4242; fi; exec "$0"' "$HELLO" 2>&1)
if [ "$(printf '%s\n' "$out" | grep -c 'master headnode:4242$')" -eq 2 ]; then echo "PASS: master address from rank 0"
else failures=$((failures + 1)); echo "FAIL: master address from rank 0"; printf '%s\n' "$out"; fi
# The other MPI's launcher (a real mismatch, where both MPIs are installed):
# every rank says the launcher's world and this program's MPI, not a hint
# to force a launch method.
case $mpi in
  MPICH) other="mpirun.openmpi --oversubscribe --allow-run-as-root -n" other_method=OPENMPI ;;
  *) other="mpiexec.mpich -n" other_method=MPICH ;;
esac
if command -v "${other%% *}" >/dev/null 2>&1; then
  out=$(timeout 60 $other 2 "$HELLO" 2>&1)
  n=$(printf '%s\n' "$out" | grep -c "launcher $other_method says rank [01] of 2, but MPI sees a world of 1 process (rank 0).*this program's MPI (${mpi:-Open MPI}.*DIST_INIT_METHOD cannot help")
  if [ "$n" -eq 2 ]; then echo "PASS: ${other%% *} starting a ${mpi:-Open MPI} program: every rank names both MPIs"
  else failures=$((failures + 1)); echo "FAIL: ${other%% *} starting a ${mpi:-Open MPI} program ($n of 2 ranks said it)"; printf '%s\n' "$out"; fi
else
  echo "SKIP: ${other%% *} is not installed (the other MPI's launcher: mismatch check)"
fi
# GPUs allocated, CUDA unusable: one warning per node (2 ranks on one node,
# then as 2 simulated nodes).
if [ $CUDA_BUILD = yes ]; then
  for rpn in 2 1; do
    out=$(timeout 60 $LAUNCHER 2 env CUDA_VISIBLE_DEVICES=0 DIST_RANKS_PER_NODE=$rpn "$HELLO" 2>&1)
    n=$(printf '%s\n' "$out" | grep -c 'GPUs were allocated but CUDA cannot be used on this node')
    if [ $? -le 1 ] && [ "$n" -eq $((2 / rpn)) ]; then echo "PASS: fallback warning once per node ($((2 / rpn)) node(s))"
    else failures=$((failures + 1)); echo "FAIL: fallback warning once per node ($((2 / rpn)) node(s)): $n lines"; printf '%s\n' "$out"; fi
  done
fi
# Leaving without dist_manager_finalize: alone, a clean exit; in a
# distributed run the job ends with MPI_Abort and a message (the others could
# be waiting in a collective: finalizing MPI would hang them).
out=$(timeout 60 $LAUNCHER 1 "$FORGET" 2>&1)
if [ $? -eq 0 ] && printf '%s\n' "$out" | grep -q 'leaving without finalize'; then echo "PASS: exit without finalize, one rank"
else failures=$((failures + 1)); echo "FAIL: exit without finalize, one rank"; printf '%s\n' "$out"; fi
out=$(timeout 60 $LAUNCHER 2 "$FORGET" 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && printf '%s\n' "$out" | grep -q 'exited without calling dist_manager_finalize(); ending the job'; then
  echo "PASS: exit without finalize ends a distributed job"
else failures=$((failures + 1)); echo "FAIL: exit without finalize ends a distributed job"; printf '%s\n' "$out"; fi

echo "init_errors: $failures failure(s)"
[ $failures -eq 0 ]
