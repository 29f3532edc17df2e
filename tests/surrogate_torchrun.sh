#!/bin/sh
# The surrogate pipeline (examples/surrogate.sh's two steps) under torchrun,
# without MPI (Gloo; the dataset through serial HDF5 and pwrite(), see
# examples/flowdata.c), on a tiny problem:
#  - ns2d_sim at 1 and 2 processes: the same file but for a few bytes of
#    HDF5's metadata (times, the statistics' last bits), no .part left;
#  - ns2d_train at 2 processes (dp 2) and 4 (dp 2 x sp 2) on it: the
#    1-process loss curve within f32 tolerance, a finite rollout error, a picture that decodes;
#  - errors on every rank, never a hang: a missing and a truncated dataset; a
#    simulation that blows up abandons its file (the .part is removed, the
#    older file at the path stays as it was).
# The burn-in is short: on Gloo's TCP (DIST_SHM_DATA=off) the solver's
# collectives cost 3-6 ms a step at 2 processes on 2 cores; through the
# shared-memory engine (the default on one node) 0.07 ms, as under MPI.
# Exit 77 (SKIP) without torch or Gloo, and with CI_SKIP_TESTS_WITHOUT_MPI=skip
# (as tests/torchrun.sh).
set -u
if [ "${CI_SKIP_TESTS_WITHOUT_MPI:-}" = skip ] || [ "${CI_SKIP_TESTS_WITHOUT_MPI:-}" = extra ]; then
  echo "SKIP: no MPI here; another CI pass runs it (CI_SKIP_TESTS_WITHOUT_MPI=$CI_SKIP_TESTS_WITHOUT_MPI)"
  exit 77
fi
# Under the sanitizer configuration: as tests/surrogate.sh (fast unwinder, no leak check).
if [ -n "${SANITIZER_PIPELINE_ASAN_OPTIONS:-}" ]; then
  ASAN_OPTIONS=$SANITIZER_PIPELINE_ASAN_OPTIONS
  export ASAN_OPTIONS
fi
B=${top_builddir:-.}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
if ! "$py" -c "import torch.distributed.run" 2>/dev/null; then
  echo "SKIP: no torch for $py (apt-get install python3-torch)"
  exit 77
fi
if [ ! -x "$B/tests/torchrun_gloo" ]; then
  echo "SKIP: distmgr was built without Gloo (configure found no libgloo-dev): nothing runs without MPI"
  exit 77
fi
export DIST_HOST_ENGINE=gloo DIST_TIMEOUT=60
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
# run N PROG ARGS...: under torchrun (tests/torchrun-launch.sh), output in $T/out
run() { n=$1; shift; timeout -k 5 120 sh "$here/torchrun-launch.sh" "$n" "$@" >"$T/out" 2>&1; }

SIM="--n 32 --trajectories 6 --held-out 2 --snapshots 9 --burn-in 1 --quiet"
run 1 $B/examples/ns2d_sim --out "$T/one.h5" $SIM && ok "dataset at 1 process" || { cat "$T/out"; bad "dataset at 1 process"; }
run 2 $B/examples/ns2d_sim --out "$T/two.h5" $SIM && ok "dataset at 2 processes" || { cat "$T/out"; bad "dataset at 2 processes"; }
[ -f "$T/two.h5" ] && [ ! -e "$T/two.h5.part" ] && ok "renamed, no .part left" || bad "no dataset, or a .part left"
# The fields are ~200 KiB: a row written to the wrong place would differ in
# hundreds of bytes.
ndiff=$(cmp -l "$T/one.h5" "$T/two.h5" 2>/dev/null | wc -l)
[ "$(wc -c <"$T/one.h5")" = "$(wc -c <"$T/two.h5")" ] && [ "$ndiff" -le 32 ] \
  && ok "1 and 2 processes wrote the same file ($ndiff bytes of metadata differ)" || bad "the files differ ($ndiff bytes)"

MODEL="--embed 16 --depth 2 --patch 4 --blocks 4 --mlp-ratio 2"
TRAIN="--epochs 2 --batch 8 --log-every 2 --ckpt-every 4 --val-samples 8 --rollout-steps 4 --pictures 2 $MODEL --quiet"
run 1 $B/examples/ns2d_train --data "$T/one.h5" --out "$T/a" $TRAIN && ok "train 1 process" || { cat "$T/out"; bad "train 1 process"; }
run 2 $B/examples/ns2d_train --data "$T/two.h5" --out "$T/b" $TRAIN --dp 2 --sp 1 && ok "train dp 2" \
  || { cat "$T/out"; bad "train dp 2"; }
# close A B: every train and val loss of B within relative 2e-4 of A's, as many rows
close() {
  [ -s "$1" ] && [ -s "$2" ] && awk -F, 'NR == FNR { a[FNR] = $4; v[FNR] = $5; n = FNR; next }
  { m = FNR; if (m > n) exit 1
    for (k = 4; k <= 5; k++) { x = (k == 4 ? a[m] : v[m]); y = $k
      if (m > 1 && (x - y > 2e-4 * y || y - x > 2e-4 * y)) { print "row " m ": " x " vs " y; exit 1 } } }
  END { if (m != n || n < 2) exit 1 }' "$1" "$2"
}
close "$T/a/loss.csv" "$T/b/loss.csv" && ok "dp 2 loss curve = 1 process (2e-4)" || bad "dp 2 loss curve differs"
# Spatial parallel: each rank reads its own rows of every sample.
run 4 $B/examples/ns2d_train --data "$T/two.h5" --out "$T/c" $TRAIN --dp 2 --sp 2 && ok "train dp 2 x sp 2" \
  || { cat "$T/out"; bad "train dp 2 x sp 2"; }
close "$T/a/loss.csv" "$T/c/loss.csv" && ok "dp 2 x sp 2 loss curve = 1 process (2e-4)" || bad "dp 2 x sp 2 loss curve differs"
err=$(awk -F, 'END { print $3 }' "$T/b/rollout.csv" 2>/dev/null)
awk -v e="${err:-x}" 'BEGIN { exit !(e + 0 == e && e > 0 && e < 2) }' && ok "rollout error $err finite, < 2" || bad "rollout error '$err'"
$B/examples/png_check "$T/b/vorticity.png" --min-width 200 --min-colours 50 >/dev/null && ok "vorticity.png decodes" || bad "vorticity.png"

# expect_error NAME TEXT LINES N PROG ARGS...: fails within the timeout, at
# least LINES lines of output naming TEXT.
expect_error() {
  name=$1 text=$2 lines=$3; shift 3
  if run "$@"; then bad "$name: exited 0"; return; fi
  [ $? -eq 124 ] && { bad "$name: hung"; return; }
  [ "$(grep -c -- "$text" "$T/out")" -ge "$lines" ] && ok "$name: '$text' ($lines ranks)" \
    || { cat "$T/out"; bad "$name: not $lines lines naming '$text'"; }
}
expect_error "missing dataset" "$T/none.h5" 2 2 $B/examples/ns2d_train --data "$T/none.h5" --out "$T/e" $TRAIN
head -c 3000 "$T/two.h5" >"$T/cut.h5"
expect_error "truncated dataset" "cut.h5" 2 2 $B/examples/ns2d_train --data "$T/cut.h5" --out "$T/e" $TRAIN
cp "$T/two.h5" "$T/keep.h5"
expect_error "a simulation that blows up" "blew up" 1 2 $B/examples/ns2d_sim --out "$T/keep.h5" $SIM --dt 0.5 --interval 0.5
cmp -s "$T/keep.h5" "$T/two.h5" && [ ! -e "$T/keep.h5.part" ] && ok "  abandoned: .part removed, the older file kept" \
  || bad "  abandoned file: .part left or the older file changed"

echo "surrogate_torchrun.sh: $fails failure(s)"
[ "$fails" -eq 0 ]
