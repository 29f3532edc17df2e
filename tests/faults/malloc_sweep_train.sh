#!/bin/sh
# The allocation-failure sweep (malloc_sweep.sh) over the main example's
# training at 4 ranks (MALLOC_SWEEP_TARGET=train): every 25th of its ~520
# allocations by default, about 25 s; MALLOC_SWEEP_TRAIN_EVERY=1 fails each
# one (about 10 minutes). MALLOC_SWEEP_EVERY=0 skips it, as it does the other.
if [ "${MALLOC_SWEEP_EVERY:-1}" = 0 ] || [ "${MALLOC_SWEEP_TRAIN_EVERY:-25}" = 0 ]; then
  echo "SKIP: MALLOC_SWEEP_EVERY or MALLOC_SWEEP_TRAIN_EVERY is 0"
  exit 77
fi
MALLOC_SWEEP_TARGET=train MALLOC_SWEEP_EVERY=${MALLOC_SWEEP_TRAIN_EVERY:-25} exec sh "$(dirname "$0")/malloc_sweep.sh"
