#!/bin/sh
# The allocation-failure sweep (malloc_sweep.sh) over one checkpoint load
# (MALLOC_SWEEP_TARGET=load, tests/faults/load_sweep.c): every allocation of
# dist_afno_load, failing on rank 1; a few seconds. MALLOC_SWEEP_EVERY=0
# skips it, as it does the others.
if [ "${MALLOC_SWEEP_EVERY:-1}" = 0 ]; then
  echo "SKIP: MALLOC_SWEEP_EVERY is 0"
  exit 77
fi
MALLOC_SWEEP_TARGET=load MALLOC_SWEEP_EVERY=1 exec sh "$(dirname "$0")/malloc_sweep.sh"
