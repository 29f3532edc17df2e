#!/bin/sh
# Run the libFuzzer targets (tests/fuzz/*.c) for a bounded time each.
#
#   tests/fuzz/run.sh [TARGET...]      (default: every target)
#
# make check runs it for FUZZ_TIME=10 seconds per target; make fuzz runs it with
# FUZZ_TIME (default 60) and FUZZ_KEEP=1. Each target starts from a copy of its
# seeds (tests/fuzz/corpus/<target>/ in the source tree, never written) in
# <build>/tests/fuzz/work-<target>/corpus; with FUZZ_KEEP=1 the inputs found by
# earlier runs stay there, otherwise the copy is fresh. A crash, a sanitizer
# report, a failed check, a leak or an input that runs over 10 s fails the test;
# the input is left in <build>/tests/fuzz/work-<target>/ as crash-*, leak-* or
# timeout-* (rerun: <build>/tests/fuzz/<target> that-file). Exit 77 (SKIP) when
# the targets were not built: configure found no clang with -fsanitize=fuzzer.
here=$(cd "$(dirname "$0")" && pwd)
build=${top_builddir:-.}/tests/fuzz
time=${FUZZ_TIME:-10}
targets=${*:-fuzz_safetensors fuzz_launch fuzz_settings fuzz_store fuzz_rpc}

# CI fuzzes once, in its torchrun pass: the targets are the same sources,
# built by clang with their own sanitizers, in every build.
if [ "${CI_SKIP_FUZZ:-}" = 1 ]; then
  echo "SKIP: CI_SKIP_FUZZ=1: CI runs the fuzz targets once, in its torchrun pass"
  exit 77
fi

for t in $targets; do
  if [ ! -x "$build/$t" ]; then
    echo "SKIP: $build/$t was not built: configure found no clang with -fsanitize=fuzzer (see README, Tests)"
    exit 77
  fi
  if [ ! -d "$here/corpus/$t" ]; then
    echo "FAIL: no seed corpus $here/corpus/$t"
    exit 1
  fi
done

failures=0
for t in $targets; do
  work=$build/work-$t
  [ "${FUZZ_KEEP:-0}" = 1 ] || rm -rf "$work"
  mkdir -p "$work/corpus" || exit 1
  rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*
  cp "$here/corpus/$t"/* "$work/corpus/" || exit 1
  chmod u+w "$work/corpus"/* # seeds may come read-only (distcheck)
  # -error_exitcode/-timeout_exitcode: libFuzzer's default 77 would read as SKIP.
  # -close_fd_mask=2: the targets' own log lines are dropped; libFuzzer's output
  # and sanitizer reports still reach the log.
  timeout $((time + 120)) "$build/$t" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 \
    -error_exitcode=1 -timeout_exitcode=1 -close_fd_mask=2 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/corpus" > "$work/log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
  secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -n 1)
  if [ $rc -eq 0 ]; then
    echo "PASS: $t: ${runs:-?} inputs in ${time} s (${secs:-?}/s), ${cov:-cov: ?}, corpus $(ls "$work/corpus" | wc -l) files"
  else
    failures=$((failures + 1))
    echo "FAIL: $t exited with $rc; input and log in $work:"
    ls "$work" | grep -E '^(crash|leak|timeout|oom)-' | sed 's/^/  /'
    tail -n 60 "$work/log"
    # The target's own message (a failed check) went to the closed stderr: rerun.
    for f in "$work"/crash-*; do
      [ -f "$f" ] && timeout 60 "$build/$t" "$f" 2>&1 | grep -E 'check failed|runtime error|ERROR: AddressSanitizer' | head -n 3
    done
  fi
done
[ $failures -eq 0 ]
