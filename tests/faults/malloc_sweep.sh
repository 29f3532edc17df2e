#!/bin/sh
# The allocation-failure sweep: at 3 ranks, for every allocation k that
# distmgr's own code makes on rank 1 during tests/faults/malloc_sweep (start-
# up, groups, collectives, FFT, DDP, finalize), run the program with that one
# allocation failing (tests/faults/failmalloc.so). Each run must end by
# itself (no rank left waiting for the one that failed), without a crash
# (exit 0, or distmgr's own MPI_Abort after a finalize that failed), and never
# report a success with a wrong result.
#   MALLOC_SWEEP_RANK  the failing rank (default 1)
#   MALLOC_SWEEP_EVERY every n-th allocation only, from the first (default 1:
#                      all of them); 0 skips (.ci/run: all passes but one)
#   MALLOC_SWEEP_ONLY  "k1 k2 ...": only these allocations (to rerun a failure)
#   MALLOC_SWEEP_TARGET  coll (the default, above) or train: the main
#                      example's training (examples/ns2d_train, 4 ranks as
#                      data-parallel 2 x spatial 2, one short epoch with a
#                      checkpoint, validation and rollout; ~430 allocations)
#                      on a small dataset made first; it exits 1 on an error
#                      or load: tests/faults/load_sweep, 3 ranks, the
#                      allocations of one dist_afno_load (those before it
#                      are not swept), which must leave every rank's model
#                      as it was, or every rank's as the file's
set -u
. "$(dirname "$0")/../mpi_jobs_only.sh"
B=${top_builddir:-.}
SHIM=$(cd "$B/tests/faults/.libs" 2>/dev/null && pwd)/failmalloc.so
LAUNCHER=${LAUNCHER:-$(sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :)}
LAUNCHER=${LAUNCHER:-mpirun --oversubscribe --allow-run-as-root -n}
EVERY=${MALLOC_SWEEP_EVERY:-1}
if [ "$EVERY" = 0 ]; then
  echo "SKIP: MALLOC_SWEEP_EVERY=0"
  exit 77
fi
RANK=${MALLOC_SWEEP_RANK:-1}
TARGET=${MALLOC_SWEEP_TARGET:-coll}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
case $TARGET in
  coll) NP=3 PROG="$B/tests/faults/malloc_sweep" ARGS= ;;
  train)
    NP=4 PROG="$B/examples/ns2d_train"
    [ -x "$PROG" ] || { echo "SKIP: examples/ns2d_train is not built (no HDF5)"; exit 77; }
    ARGS="--data $WORK/flow.h5 --epochs 1 --batch 8 --log-every 2 --ckpt-every 4 --val-samples 8 --rollout-steps 2
          --pictures 1 --embed 16 --depth 2 --patch 4 --blocks 4 --mlp-ratio 2 --quiet --out $WORK/out --dp 2 --sp 2"
    timeout 120 $LAUNCHER 3 "$B/examples/ns2d_sim" --out "$WORK/flow.h5" --n 32 --trajectories 10 --held-out 2 \
      --snapshots 9 --quiet >/dev/null 2>&1 || { echo "FAIL: making the dataset"; exit 1; } ;;
  load)
    NP=3 PROG="$B/tests/faults/load_sweep" ARGS="$WORK/model.safetensors"
    [ -x "$PROG" ] || { echo "SKIP: tests/faults/load_sweep is not built"; exit 77; } ;;
  *) echo "FAIL: MALLOC_SWEEP_TARGET=$TARGET: coll, train or load"; exit 1 ;;
esac
# A static build links distmgr into the program, where the shim cannot tell
# its calls apart: skipped.
[ -f "$SHIM" ] || { echo "SKIP: no shared build, so no tests/faults/failmalloc.so"; exit 77; }
# ASan must be the first library a process loads; the shim would be.
if ldd "$B/lib/.libs/libdistmgr.so" 2>/dev/null | grep -q libasan; then
  echo "SKIP: an ASan build (the shim cannot be preloaded before ASan's runtime)"
  exit 77
fi

# run K: the program with allocation K failing on $RANK (0: none); sets $out, $rc, $took.
# DIST_TIMEOUT is on (the progress board's allocations count too), and a
# rank it had to free counts as left waiting.
# The shim goes in through the environment (mpirun passes it to local ranks);
# libtool's wrapper script runs under it too, harmlessly: only calls from
# libdistmgr count.
run() {
  t0=$(date +%s)
  rm -rf "$WORK/out"
  # shellcheck disable=SC2086 # ARGS: words
  out=$(LD_PRELOAD="$SHIM" FAILMALLOC_RANK=$RANK FAILMALLOC_AT=$1 DIST_TIMEOUT=20 \
        timeout -k 5 45 $LAUNCHER $NP "$PROG" $ARGS 2>&1)
  rc=$? took=$(($(date +%s) - t0))
}

run 0
total=$(printf '%s\n' "$out" | sed -n 's/^failmalloc: \([0-9]*\) counted.*/\1/p' | sort -n | tail -1)
done_lines=$NP
[ "$TARGET" = train ] && done_lines=0
if [ "$rc" -ne 0 ] || [ -z "$total" ] || [ "$(printf '%s\n' "$out" | grep -c ': done$')" -ne $done_lines ]; then
  echo "FAIL: the run without failures did not finish cleanly (exit $rc)"
  printf '%s\n' "$out" | sed 's/^/    /' | head -40
  exit 1
fi
first=$(printf '%s\n' "$out" | sed -n "s/^rank $RANK: sweep from allocation \([0-9]*\)$/\1/p")
first=${first:-1}
echo "rank $RANK makes $total allocations of its own; failing each in turn from #$first"

failures=0 errors=0 absorbed=0
# The failing allocation's frames as functions (the shim prints addresses).
frames() {
  printf '%s\n' "$out" | sed -n 's/^\(.*libdistmgr[^(]*\)(+\(0x[0-9a-f]*\)).*/\1 \2/p' | while read -r lib off; do
    addr2line -f -i -e "$lib" "$off" 2>/dev/null | paste -sd ' ' | sed 's/^/    at /'
  done
}

for k in ${MALLOC_SWEEP_ONLY:-$(seq "$first" "$EVERY" "$total")}; do
  run "$k"
  why=
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || [ "$took" -ge 40 ]; then why="did not end (timeout)"
  elif printf '%s\n' "$out" | grep -q 'within DIST_TIMEOUT'; then why="a rank was left waiting (DIST_TIMEOUT ended it)"
  elif printf '%s\n' "$out" | grep -q 'WRONG'; then why="a success with a wrong result"
  elif printf '%s\n' "$out" | grep -Eq 'exited on signal|Segmentation fault|core dumped|AddressSanitizer'; then why="a crash"
  elif [ "$rc" -ne 0 ] && ! { [ "$TARGET" = train ] && [ "$rc" -eq 1 ]; } &&
       ! printf '%s\n' "$out" | grep -q 'ending the job with MPI_Abort'; then why="exit $rc without distmgr's abort"
  elif ! printf '%s\n' "$out" | grep -q "failing allocation #$k at"; then why="allocation $k was not reached"
  fi
  if [ -n "$why" ]; then
    failures=$((failures + 1))
    echo "FAIL: allocation $k on rank $RANK: $why"
    printf '%s\n' "$out" | grep -v ' -> ok$' | sed 's/^/    /' | head -30
    frames
  elif printf '%s\n' "$out" | grep -Eq "^rank $RANK: .* -> error|^ns2d_train: rank $RANK: "; then errors=$((errors + 1))
  else absorbed=$((absorbed + 1)); fi
done
echo "$errors failed allocations gave errors, $absorbed were absorbed, $failures runs failed"
[ "$failures" -eq 0 ]
