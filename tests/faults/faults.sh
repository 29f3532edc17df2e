#!/bin/sh
# The fault suite: at 4 ranks, one rank exits, is killed, hangs, skips a
# call, calls another collective, passes another shape or group, finalizes
# early, or has other settings. Each run must end (under `timeout`) with an
# error on every live rank naming the cause: never a hang, never a success
# reported for the broken call. Lines checked are those tests/faults/faults.c
# prints ("rank R: CALL -> ok|error CODE: MESSAGE").
set -u
. "$(dirname "$0")/../mpi_jobs_only.sh"
B=${top_builddir:-.}
PROG="$B/tests/faults/faults"
# LAUNCHER unset: the launcher configure chose for this build's MPI (config.h).
LAUNCHER=${LAUNCHER:-$(sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :)}
LAUNCHER=${LAUNCHER:-mpirun --oversubscribe --allow-run-as-root -n}
NP=4
failures=0
RANKVAR='${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}'

# run SCENARIO [RANK VAR=VALUE]: start the program; sets $out, $rc, $took.
run() {
  scen=$1 only=${2:-} assign=${3:-}
  t0=$(date +%s)
  if [ -n "$only" ]; then
    out=$(timeout -k 5 60 $LAUNCHER $NP sh -c "if [ \"$RANKVAR\" = $only ]; then export $assign; fi; exec \"\$0\" $scen" "$PROG" 2>&1)
  else
    out=$(timeout -k 5 60 $LAUNCHER $NP "$PROG" "$scen" 2>&1)
  fi
  rc=$? took=$(($(date +%s) - t0))
}

fail() { failures=$((failures + 1)); echo "FAIL: $scen: $*"; printf '%s\n' "$out" | sed 's/^/    /' | head -40; }
pass() { echo "PASS: $scen ($*; ${took} s, exit $rc)"; }

# lines_with N TEXT...: at least N lines contain every TEXT.
lines_with() {
  n=$1
  shift
  sel=$(printf '%s\n' "$out")
  for t in "$@"; do sel=$(printf '%s\n' "$sel" | grep -F -- "$t"); done
  [ "$(printf '%s\n' "$sel" | grep -c .)" -ge "$n" ]
}
# Ended by itself: not by `timeout` (124; 137 is also what mpirun returns for a rank killed by signal 9).
ended() { [ "$rc" -ne 124 ] && [ "$took" -lt 55 ]; }
no_success() { ! printf '%s\n' "$out" | grep -E "rank [0-9]+: $1 -> ok" >/dev/null; }

run exit
if ended && [ "$rc" -ne 0 ] && lines_with 1 "rank 1 of $NP exited without calling dist_manager_finalize" &&
   lines_with 1 "dist_all_reduce -> error" "rank 1 will not take part: it exited without calling dist_manager_finalize" &&
   no_success dist_all_reduce; then pass "a rank exits: the others say so, the job ends"
else fail "expected an error naming rank 1's exit (ranks that MPI_Abort kills first print nothing) and the job ended"; fi

run kill
if ended && [ "$rc" -ne 0 ] && no_success dist_all_reduce; then pass "a rank is killed: the job ends"
else fail "expected the job to end without a success"; fi

for verify in 1 0; do
  scen="stuck (DIST_TIMEOUT=2, DIST_VERIFY=$verify)"
  t0=$(date +%s)
  out=$(DIST_TIMEOUT=2 DIST_VERIFY=$verify timeout -k 5 60 $LAUNCHER $NP "$PROG" stuck 2>&1)
  rc=$? took=$(($(date +%s) - t0))
  if lines_with 3 "dist_all_reduce -> error" "did not complete within DIST_TIMEOUT=2 s" "not arrived: rank 3" &&
     no_success dist_all_reduce && [ "$took" -lt 25 ]; then pass "a rank hangs: every other rank names it after 2 s"
  else fail "expected a DIST_TIMEOUT error naming rank 3 on ranks 0-2 within 25 s"; fi
done

run skip
if ended && lines_with $NP "-> error" "disagrees" "dist_broadcast" "dist_all_reduce" && no_success dist_all_reduce &&
   no_success dist_broadcast; then pass "a rank skips a broadcast: every rank names both calls"
else fail "expected a mismatch naming dist_broadcast and dist_all_reduce on every rank"; fi

run skip_same
if ended && lines_with $NP "-> error" "disagrees" "dist_manager_finalize" "call #"; then
  pass "a rank skips one of identical reductions: the next call fails everywhere"
else fail "expected the call after the skipped one to fail on every rank"; fi

run other
if ended && [ "$rc" -eq 0 ] && lines_with $NP "-> error" "dist_all_to_all" "dist_all_gather"; then
  pass "all_to_all against all_gather: a mismatch on every rank"
else fail "expected a mismatch naming both collectives on every rank"; fi

run start
if ended && [ "$rc" -eq 0 ] && lines_with $NP "-> error" "dist_all_reduce_start" && no_success dist_all_reduce; then
  pass "non-blocking against blocking: a mismatch on every rank"
else fail "expected a mismatch naming dist_all_reduce_start on every rank"; fi

run shape
if ended && [ "$rc" -eq 0 ] && lines_with $NP "-> error" "f32[3]" "f32[4]"; then pass "other shapes: a mismatch on every rank"
else fail "expected a mismatch naming both shapes on every rank"; fi

run barrier
if ended && [ "$rc" -eq 0 ] && lines_with $NP "-> error" "dist_barrier" "dist_all_reduce"; then
  pass "a barrier against a reduction: a mismatch on every rank"
else fail "expected a mismatch naming dist_barrier on every rank"; fi

# The others either see rank 1's notice while they wait, or meet its next
# call (finalize) in their check round: either way they name its mistake.
run unknown
if ended && lines_with 1 "rank 1: dist_all_reduce -> error" "wrold" &&
   lines_with 3 "dist_all_reduce -> error" "rank 1" "no process group named 'wrold'" && no_success dist_all_reduce; then
  pass "a misspelt group on one rank: the others name it"
else fail "expected rank 1's unknown group named on every rank"; fi

run finalize_early
if ended && lines_with 1 "rank 0: dist_all_reduce -> error" "rank 1 will not take part: it called dist_manager_finalize"; then
  pass "finalize while a partner waits: the partner names it"
else fail "expected rank 0 to name rank 1's finalize"; fi

run after_mpi_finalize
if ended && [ "$rc" -eq 0 ] && lines_with $NP "dist_all_reduce -> error" "MPI was finalized"; then
  pass "a collective after MPI_Finalize: an error, not an abort"
else fail "expected an error naming MPI_Finalize on every rank"; fi

run stuck 1 DIST_VERIFY=0
scen="DIST_VERIFY=0 on rank 1"
if ended && lines_with $NP "dist_manager_initialize -> error" "DIST_VERIFY must be the same on every rank" "rank 1"; then
  pass "every rank names the setting and the rank"
else fail "expected initialize to fail on every rank naming DIST_VERIFY and rank 1"; fi

run stuck 2 DIST_RANKS_PER_NODE=1
scen="DIST_RANKS_PER_NODE=1 on rank 2"
if ended && lines_with $NP "dist_manager_initialize -> error" "DIST_RANKS_PER_NODE must be the same" "rank 2"; then
  pass "every rank names the setting and the rank"
else fail "expected initialize to fail on every rank naming DIST_RANKS_PER_NODE and rank 2"; fi

echo "faults: $failures failure(s)"
[ $failures -eq 0 ]
