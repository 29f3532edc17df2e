#!/bin/sh
# CI: the README's main command (make run-surrogate) on a tiny problem, with
# one training rank SIGKILLed from outside once the first checkpoint exists,
# then the same command again (it resumes). Checks: the kill ended the job,
# the rerun resumed from a checkpoint and finished, loss.csv has every row,
# the PNGs decode, the rollout error is finite and below BOUND.
# usage: tests/surrogate_ci.sh BUILD_DIR   (LAUNCHER as for make check)
set -u
B=$(cd "${1:-_build}" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
BOUND=${BOUND:-1.0}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
export NP=4 OUT
export SIM_FLAGS="--n 32 --trajectories 12 --held-out 2 --snapshots 11 --quiet"
export TRAIN_FLAGS="--dp 2 --sp 2 --epochs 40 --batch 8 --embed 32 --depth 2 --blocks 4 --log-every 25 --ckpt-every 50 --rollout-steps 6"
fail() { echo "FAIL: $*"; cat "$OUT/log1" "$OUT/log2" 2>/dev/null | tail -n 40; exit 1; }

timeout 300 make -s -C "$B" run-surrogate >"$OUT/log1" 2>&1 &
job=$!
i=0
until ls "$OUT"/ckpt/step_*.safetensors >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -gt 1200 ] && fail "no checkpoint after 120 s"
  kill -0 $job 2>/dev/null || fail "the run ended before its first checkpoint"
  sleep 0.1
done
victim=$(pgrep -f "ns2d_train --data $OUT" | tail -n 1)
[ -n "$victim" ] || fail "no ns2d_train process to kill"
kill -9 "$victim"
echo "killed ns2d_train pid $victim after $(ls "$OUT"/ckpt | tr '\n' ' ')"
wait $job && fail "the job with a killed rank exited 0"
[ $? -eq 124 ] && fail "the job with a killed rank hung"

timeout 300 make -s -C "$B" run-surrogate >"$OUT/log2" 2>&1 || fail "the rerun failed"
grep "resumed from" "$OUT/log2" || fail "the rerun did not resume"
tail -n 6 "$OUT/log2"
total=$(sed -n 's/.* \([0-9]*\) steps\/epoch, \([0-9]*\) epochs.*/\1 \2/p' "$OUT/log1" | awk '{ print $1 * $2; exit }')
awk -F, -v t="${total:-0}" -v every=25 'NR > 1 { if ($1 != (NR - 1) * every && $1 != t) exit 1; last = $1; n++ }
  END { exit !(t > 0 && last == t && n == int((t + every - 1) / every)) }' "$OUT/loss.csv" \
  || fail "loss.csv does not hold every 25th step up to $total once"
"$B/examples/png_check" "$OUT/vorticity.png" --min-width 200 --min-colours 50 || fail "vorticity.png"
if [ -f "$OUT/loss.png" ]; then "$B/examples/png_check" "$OUT/loss.png" --min-colours 3 || fail "loss.png"; fi
err=$(awk -F, 'END { print $3 }' "$OUT/rollout.csv")
awk -v e="$err" -v b="$BOUND" 'BEGIN { exit !(e + 0 == e && e > 0 && e < b) }' || fail "rollout error '$err' not in (0, $BOUND)"
echo "surrogate CI: killed, resumed, rollout error $err < $BOUND after 6 steps"
