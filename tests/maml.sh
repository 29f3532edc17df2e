#!/bin/sh
# examples/maml (first-order MAML over remote calls) against its own --serial
# run: at 1, 2, 3 and 4 ranks the final meta-parameters are the serial run's,
# bit for bit (each task runs the same code on some worker, and the MEAN
# reducer sums the parts in task order in f64, as --serial does), and so are
# the printed losses; the evaluation meta-loss decreases; bad options fail
# with a message naming them. Multi-rank runs go through $LAUNCHER; under the
# torchrun LAUNCHER it skips (it passes there too, but the agent's start-up
# takes the 5 runs to ~30 s).
set -u
. "$(dirname "$0")/mpi_jobs_only.sh"
B=${top_builddir:-.}
MAML=$B/examples/maml
launcher=${LAUNCHER:-$(sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :)}
launcher=${launcher:-mpirun --oversubscribe --allow-run-as-root -n}
# A stuck call fails with a message instead of hanging until the timeout.
DIST_TIMEOUT=30
export DIST_TIMEOUT
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
ARGS="--iters 20 --tasks 8 --log-every 5 --seed 7"

timeout -k 5 60 "$MAML" --serial $ARGS --out "$T/serial.f64" >"$T/serial.out" 2>&1 \
  && ok "serial run" || { cat "$T/serial.out"; bad "serial run"; }
grep '^iter' "$T/serial.out" >"$T/serial.iter"
for n in 1 2 3 4; do
  if ! timeout -k 5 60 $launcher "$n" "$MAML" $ARGS --out "$T/np$n.f64" >"$T/np$n.out" 2>&1; then
    cat "$T/np$n.out"; bad "$n rank(s): the run failed"; continue
  fi
  cmp -s "$T/serial.f64" "$T/np$n.f64" && ok "$n rank(s): final parameters = serial, bit for bit" \
    || bad "$n rank(s): final parameters differ from the serial run's"
  grep '^iter' "$T/np$n.out" | cmp -s "$T/serial.iter" - && ok "$n rank(s): printed losses = serial" \
    || { diff "$T/serial.iter" "$T/np$n.out"; bad "$n rank(s): printed losses differ"; }
done
# 1761 f64: the MLP 1-40-40-1's weights and biases
[ "$(wc -c <"$T/serial.f64" 2>/dev/null)" = $((1761 * 8)) ] && ok "1761 parameters written" || bad "parameter file size"
# maml: final eval meta-loss END (start START)
awk '/^maml: final eval meta-loss/ { e = $5; s = $7; sub(/\)/, "", s); found = 1 }
     END { exit !(found && e + 0 < s + 0) }' "$T/serial.out" \
  && ok "eval meta-loss decreased: $(sed -n 's/^maml: final eval meta-loss //p' "$T/serial.out")" \
  || bad "eval meta-loss did not decrease"

# expect_error NAME TEXT CMD...: exits non-zero within the timeout, naming TEXT.
expect_error() {
  name=$1 text=$2
  shift 2
  timeout -k 5 60 "$@" >"$T/err.out" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then bad "$name: exited 0"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then bad "$name: hung"
  elif grep -qF -- "$text" "$T/err.out"; then ok "$name: exit $rc, '$text'"
  else cat "$T/err.out"; bad "$name: no '$text' in the output"; fi
}
expect_error "--tasks 0 (serial)" "--tasks: 0 is out of range" "$MAML" --serial --tasks 0
expect_error "--tasks 0 (2 ranks)" "--tasks: 0 is out of range" $launcher 2 "$MAML" --tasks 0
expect_error "--iters x" "--iters: 'x' is not a whole number" "$MAML" --serial --iters x
expect_error "unknown option" "unknown option '--task'" "$MAML" --serial --task 3

echo "maml.sh: $fails failure(s)"
[ "$fails" -eq 0 ]
