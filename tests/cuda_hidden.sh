#!/bin/sh
# A CUDA build on a node without CUDA: with every CUDA runtime, cuFFT, NCCL
# and driver library of this machine hidden (/dev/null bound over each file
# in a private mount namespace), the library still loads, host-memory
# programs and tests run at 1 and 2 ranks, and the first use of cuFFT or
# NCCL gets an error naming the missing library. Skipped (77) in builds
# without CUDA, with --disable-cuda-dlopen, or where mount namespaces cannot
# be made (not root).
set -u
. "$(dirname "$0")/mpi_jobs_only.sh"
B=$(cd "${top_builddir:-.}" && pwd)
LAUNCHER=${LAUNCHER:-$(sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :)}
LAUNCHER=${LAUNCHER:-mpirun --oversubscribe --allow-run-as-root -n}
grep -q '^#define HAVE_CUDA 1' "$B/config.h" || { echo "SKIP: a build without CUDA"; exit 77; }
grep -q '^#define DIST_CUDA_DLOPEN 1' "$B/config.h" || { echo "SKIP: built with --disable-cuda-dlopen (CUDA libraries linked)"; exit 77; }
[ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null || { echo "SKIP: no mount namespace (needs root)"; exit 77; }

failures=0
lib=$B/lib/.libs/libdistmgr.so
if [ -f "$lib" ]; then
  if ldd "$lib" | grep -Eq 'libcudart|libcufft|libnccl|libcuda\.'; then
    failures=$((failures + 1)); echo "FAIL: libdistmgr.so needs CUDA libraries:"; ldd "$lib" | grep -E 'cuda|cufft|nccl'
  else echo "PASS: libdistmgr.so names no CUDA library (ldd)"; fi
fi

# Every CUDA library file the loader could find: the cache and the build's CUDA folder.
cudadir=$(sed -n 's/^CUDA_LDFLAGS = -L\([^ ]*\).*/\1/p' "$B/Makefile")
files=$( (ldconfig -p | awk '/lib(cudart|cufft|cufftw|nccl|cuda)\.so/ {print $NF}'
          [ -n "$cudadir" ] && ls "$cudadir"/libcudart.so* "$cudadir"/libcufft.so* "$cudadir"/libnccl.so* 2>/dev/null) |
        while read -r f; do readlink -f "$f"; done | sort -u)
[ -n "$files" ] || { echo "SKIP: no CUDA library found to hide"; exit 77; }

out=$(unshare -m sh -c '
  for f in $0; do mount --bind /dev/null "$f" || exit 3; done
  cd "$1"
  echo "== probe"; ./tests/cuda_libs_probe
  echo "== hello 1"; timeout 60 ./examples/hello; echo "rc=$?"
  echo "== hello 2"; timeout 60 $2 2 ./examples/hello; echo "rc=$?"
  for t in test_coll test_fft test_ddp; do
    echo "== $t 2"; o=$(timeout 120 $2 2 "./tests/$t" 2>&1); r=$?; printf "%s\n" "$o" | grep -E "^$t(: |\\[)"; echo "rc=$r"
  done' "$(echo $files)" "$B" "$LAUNCHER" 2>&1)
rc=$?
[ $rc -eq 3 ] && { echo "SKIP: cannot bind-mount over the CUDA libraries"; exit 77; }

# expect NAME PATTERN: the namespace's output has a line matching PATTERN.
expect() {
  if printf '%s\n' "$out" | grep -Eq -- "$2"; then echo "PASS: $1"
  else failures=$((failures + 1)); echo "FAIL: $1 (no line matching '$2')"; fi
}
expect "cuFFT missing: named at first use" '^cufft: error: libcufft\.so\.[0-9]+ cannot be loaded \(.*\), so the FFT of CUDA memory \(cuFFT\) is unavailable'
expect "NCCL missing: named at first use" '^nccl: error: libnccl\.so\.[0-9]+ cannot be loaded'
expect "hello runs alone, on the CPU" '^\[SINGLE\] rank 0/1 .*device cpu:0'
expect "hello runs at 2 ranks" '^\[[A-Z]+\] rank 1/2 '
# The ranks' agreed count (an all-reduce, printed by rank 0), or else each
# rank's own line: Open MPI's output forwarding sometimes loses a line, or
# glues one rank's to another's unfinished one (CI runs, exit status 0).
for t in test_coll test_fft test_ddp; do
  n=$(printf '%s\n' "$out" | grep -Ec "^$t\\[rank [01]/2\\]: .* 0 failures\$")
  if printf '%s\n' "$out" | grep -q "^$t: 0 failure(s) over 2 rank(s)\$" || [ "$n" -eq 2 ]; then
    echo "PASS: $t passes at 2 ranks"
  else failures=$((failures + 1)); echo "FAIL: $t passes at 2 ranks (no agreed count; $n of 2 ranks report 0 failures)"; fi
done
[ $(printf '%s\n' "$out" | grep -c '^rc=0$') -eq 5 ] || { failures=$((failures + 1)); echo "FAIL: a run exited non-zero"; }
[ $failures -eq 0 ] || printf '%s\n' "$out" | sed 's/^/    /'
echo "cuda_hidden: $failures failure(s)"
[ $failures -eq 0 ]
