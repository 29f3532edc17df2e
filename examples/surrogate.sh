#!/bin/sh
# The surrogate pipeline on local ranks (the README's main command, through
# `make -C _build run-surrogate`): simulate Kolmogorov flow with ns2d_sim
# into an HDF5 dataset, train the AFNO on it with ns2d_train (data x spatial
# parallel), evaluate an autoregressive rollout against the solver and draw
# the pictures. Larger problems through the environment:
#   NP=4 OUT=surrogate SIM_FLAGS="--n 128 --trajectories 80" TRAIN_FLAGS="--epochs 40 --dp 2 --sp 2"
# Rerunning continues from the last checkpoint (--resume) and reuses the dataset.
set -eu
B=${top_builddir:-$(dirname "$0")/../_build}
# LAUNCHER unset: the launcher configure chose for the build's MPI (config.h).
L=${LAUNCHER:-$(sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :)}
L=${L:-mpirun --oversubscribe --allow-run-as-root -n}
NP=${NP:-4}
OUT=${OUT:-$(pwd)/surrogate}
SIM_FLAGS=${SIM_FLAGS:-}
TRAIN_FLAGS=${TRAIN_FLAGS:---dp 2 --sp 2}
# Debian's OpenBLAS 0.3.21 picks SSE3 kernels on CPUs newer than itself; name the right ones.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=Haswell; fi
fi
mkdir -p "$OUT"
if [ ! -f "$OUT/flow.h5" ]; then
  echo "== 1/2 simulation: $L $NP ns2d_sim --out $OUT/flow.h5 $SIM_FLAGS"
  $L "$NP" "$B/examples/ns2d_sim" --out "$OUT/flow.h5" $SIM_FLAGS
else
  echo "== 1/2 simulation: $OUT/flow.h5 exists (delete it to simulate again)"
fi
echo "== 2/2 training and rollout: $L $NP ns2d_train --data $OUT/flow.h5 --out $OUT $TRAIN_FLAGS --resume"
$L "$NP" "$B/examples/ns2d_train" --data "$OUT/flow.h5" --out "$OUT" $TRAIN_FLAGS --resume
echo "== done: open $OUT/vorticity.png and $OUT/loss.png; figures in $OUT/loss.csv and $OUT/rollout.csv"
