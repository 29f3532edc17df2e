#!/bin/sh
# The surrogate pipeline end to end on a tiny problem (make check):
#  - training at 1 rank and at 4 ranks (dp 2 x sp 2, and mp 2 x sp 2) gives
#    the same loss curve within f32 tolerance;
#  - a rank SIGKILLed between checkpoints, then --resume: the same loss.csv
#    as the uninterrupted run, bit for bit;
#  - the 4-rank checkpoint resumed at 1 rank ends on the 1-rank curve;
#  - outputs: rollout.csv with a finite error, PNGs that decode;
#  - bad input: missing/corrupt dataset or checkpoint, a mesh or grid that
#    does not fit, flags out of range, a disk that fills up during a
#    checkpoint (the previous one survives): an error naming the cause on
#    every rank, no hang.
# Environment: LAUNCHER (e.g. "mpirun --oversubscribe -n"; unset: the launcher
# configure chose for this build's MPI, from config.h), top_builddir.
set -u
. "$(dirname "$0")/mpi_jobs_only.sh"
# Under the sanitizer configuration (tests/sanitizer/env.sh) the pipeline runs
# with ASan's fast unwinder and no leak check (SANITIZER_PIPELINE_ASAN_OPTIONS;
# why: there): with whole stacks at every malloc its multi-rank runs exceed
# their time limits.
if [ -n "${SANITIZER_PIPELINE_ASAN_OPTIONS:-}" ]; then
  echo "note: sanitizer configuration: ASAN_OPTIONS=$SANITIZER_PIPELINE_ASAN_OPTIONS (memory errors and UB, no leak check)"
  ASAN_OPTIONS=$SANITIZER_PIPELINE_ASAN_OPTIONS
  export ASAN_OPTIONS
fi
B=${top_builddir:-.}
L=${LAUNCHER:-$(sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :)}
L=${L:-mpirun --oversubscribe --allow-run-as-root -n}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
run() { timeout 120 "$@" >"$T/out" 2>&1; }

DATA=$T/flow.h5
run $L 3 $B/examples/ns2d_sim --out "$DATA" --n 32 --trajectories 10 --held-out 2 --snapshots 9 --quiet \
  || { cat "$T/out"; echo "FAIL dataset"; exit 1; }
ok "dataset at 3 ranks"

MODEL="--embed 16 --depth 2 --patch 4 --blocks 4 --mlp-ratio 2"
TRAIN="--data $DATA --epochs 2 --batch 8 --log-every 2 --ckpt-every 4 --val-samples 8 --rollout-steps 4 --pictures 2 $MODEL --quiet"
train() { # NP OUT FLAGS...
  np=$1 out=$2; shift 2
  run $L "$np" $B/examples/ns2d_train $TRAIN --out "$out" "$@"
}
# col N FILE: column N of loss.csv without the header.
col() { awk -F, -v c="$1" 'NR > 1 { print $c }' "$2"; }
# close A B TOL: every train and val loss of A within relative TOL of B's.
close() {
  [ -s "$1" ] && [ -s "$2" ] && awk -F, -v tol="$3" 'NR == FNR { a[FNR] = $4; v[FNR] = $5; n = FNR; next }
    { m = FNR; if (m > n) exit 1
      for (k = 4; k <= 5; k++) { x = (k == 4 ? a[m] : v[m]); y = $k
        if (m > 1 && (x - y > tol * y || y - x > tol * y)) { print "row " m ": " x " vs " y; exit 1 } } }
    END { if (m != n) exit 1 }' "$1" "$2"
}

train 1 "$T/a" && ok "train 1 rank" || { cat "$T/out"; bad "train 1 rank"; }
train 4 "$T/b" --dp 2 --sp 2 && ok "train dp 2 x sp 2" || { cat "$T/out"; bad "train dp 2 x sp 2"; }
train 4 "$T/c" --mp 2 --sp 2 --dp 1 && ok "train mp 2 x sp 2" || { cat "$T/out"; bad "train mp 2 x sp 2"; }
[ "$(col 1 "$T/a/loss.csv" | wc -l)" -eq 8 ] && ok "loss.csv has 8 rows" || bad "loss.csv rows"
close "$T/a/loss.csv" "$T/b/loss.csv" 2e-4 && ok "dp 2 x sp 2 loss curve = 1 rank (2e-4)" || bad "dp x sp loss curve differs"
close "$T/a/loss.csv" "$T/c/loss.csv" 2e-4 && ok "mp 2 x sp 2 loss curve = 1 rank (2e-4)" || bad "mp x sp loss curve differs"

# A rank killed at step 6 (checkpoint at 4), then --resume.
train 4 "$T/k" --dp 2 --sp 2 --kill-at-step 6 --kill-rank 3 && bad "the killed run exited 0" || ok "killed run ended"
[ -f "$T/k/ckpt/step_00000004.safetensors" ] && [ ! -f "$T/k/ckpt/step_00000008.safetensors" ] \
  && ok "checkpoint 4 there, 8 not" || bad "checkpoints after the kill: $(ls "$T/k/ckpt")"
cp -r "$T/k" "$T/k1"
train 4 "$T/k" --dp 2 --sp 2 --resume && grep -q "resumed from .*step_00000004" "$T/out" && ok "resumed from step 4" \
  || { cat "$T/out"; bad "resume"; }
cmp -s "$T/b/loss.csv" "$T/k/loss.csv" && ok "resumed loss.csv = uninterrupted, bit for bit" \
  || { diff "$T/b/loss.csv" "$T/k/loss.csv"; bad "resumed run differs"; }
# The same checkpoint (written at dp 2 x sp 2) resumed at 1 rank.
train 1 "$T/k1" --resume && grep -q "resumed from" "$T/out" && ok "resumed at another layout" || { cat "$T/out"; bad "cross-layout resume"; }
close "$T/a/loss.csv" "$T/k1/loss.csv" 2e-4 && ok "cross-layout resume = 1-rank curve (2e-4)" || bad "cross-layout curve differs"

# Outputs.
err=$(awk -F, 'END { print $3 }' "$T/b/rollout.csv" 2>/dev/null)
awk -v e="${err:-x}" 'BEGIN { exit !(e + 0 == e && e > 0 && e < 2) }' && ok "rollout error $err finite, < 2" || bad "rollout error '$err'"
$B/examples/png_check "$T/b/vorticity.png" --min-width 200 --min-colours 50 && ok "vorticity.png decodes" || bad "vorticity.png"
if [ -f "$T/b/loss.png" ]; then $B/examples/png_check "$T/b/loss.png" --min-colours 3 && ok "loss.png decodes" || bad "loss.png";
else echo "SKIP loss.png (no gnuplot)"; fi

# expect_error NAME TEXT CMD...: exits non-zero within the timeout, every rank's
# message (or rank 0's, for flags) names TEXT.
expect_error() {
  name=$1 text=$2; shift 2
  if run "$@"; then bad "$name: exited 0"; return; fi
  [ $? -eq 124 ] && { bad "$name: hung"; return; }
  grep -q -- "$text" "$T/out" && ok "$name: '$text'" || { cat "$T/out"; bad "$name: message lacks '$text'"; }
}
every_rank() { # TEXT N: N lines name TEXT
  [ "$(grep -c -- "$1" "$T/out")" -ge "$2" ] && ok "  on all $2 ranks" || { cat "$T/out"; bad "  not on all $2 ranks"; }
}
expect_error "missing dataset" "$T/none.h5" $L 2 $B/examples/ns2d_train --data "$T/none.h5" --out "$T/e"
every_rank "$T/none.h5" 2
head -c 3000 "$DATA" >"$T/cut.h5"
expect_error "truncated dataset" "cut.h5" $L 2 $B/examples/ns2d_train --data "$T/cut.h5" --out "$T/e"
every_rank "cut.h5" 2
expect_error "mesh that does not fit" "does not make the 4 ranks" $L 4 $B/examples/ns2d_train $TRAIN --out "$T/e" --dp 3
expect_error "grid that does not fit" "patch" $L 2 $B/examples/ns2d_train $TRAIN --out "$T/e" --patch 5
expect_error "too many spatial ranks" "spatial" $L 4 $B/examples/ns2d_train $TRAIN --out "$T/e" --sp 4 --patch 16
expect_error "batch over dp" "does not divide" $L 4 $B/examples/ns2d_train $TRAIN --out "$T/e" --batch 6 --dp 4
expect_error "flag out of range" "--batch: 0 is out of range" $L 2 $B/examples/ns2d_train $TRAIN --out "$T/e" --batch 0
expect_error "flag not a number" "--lr: 'fast'" $L 2 $B/examples/ns2d_train $TRAIN --out "$T/e" --lr fast
expect_error "unknown flag" "unknown flag '--bogus'" $L 2 $B/examples/ns2d_train $TRAIN --out "$T/e" --bogus
latest=$T/k/ckpt/step_00000016.safetensors
head -c 2000 "$latest" >"$T/cut.safetensors" && mv "$T/cut.safetensors" "$latest"
expect_error "truncated checkpoint" "step_00000016" $L 2 $B/examples/ns2d_train $TRAIN --out "$T/k" --resume
every_rank "step_00000016" 2
expect_error "checkpoint of another model" "different model" $L 2 $B/examples/ns2d_train $TRAIN --out "$T/e" --embed 32 \
  --resume-from "$T/b/ckpt/step_00000016.safetensors"

# Disk full while checkpointing: a 160 KiB tmpfs holds two checkpoints, the
# third save fails; the second must survive and load. Needs root (mount).
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
  mkdir -p "$T/full"
  if unshare -m sh -c "mount -t tmpfs -o size=160k tmpfs '$T/full' && timeout 120 $L 2 $B/examples/ns2d_train $TRAIN \
      --out '$T/full/run' --keep 5 >'$T/out' 2>&1; echo \$? >'$T/rc'; ls '$T/full/run/ckpt' >'$T/left'; \
      cp '$T/full/run/ckpt/'step_*.safetensors '$T/' 2>/dev/null; true"; then
    [ "$(cat "$T/rc")" != 0 ] && grep -q "No space left on device" "$T/out" && ok "disk full: error names it" \
      || { cat "$T/out"; bad "disk full: no error"; }
    last=$(ls "$T"/step_*.safetensors 2>/dev/null | tail -n 1)
    [ -n "$last" ] && run $L 1 $B/examples/ns2d_train $TRAIN --out "$T/f" --resume-from "$last" --eval-only \
      && ok "disk full: the previous checkpoint $(basename "$last") loads" || bad "disk full: no loadable checkpoint left ($(cat "$T/left"))"
  else bad "disk full: tmpfs mount failed"; fi
else
  echo "SKIP disk full (needs root and unshare -m to mount a small tmpfs)"
fi

echo "surrogate.sh: $fails failure(s)"
[ "$fails" -eq 0 ]
