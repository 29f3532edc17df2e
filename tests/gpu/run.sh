#!/bin/bash
# On a GPU machine without MPI, from a folder made by tests/gpu/pack.sh:
#   run.sh DIR check [REGEX]      make check's tests (those matching REGEX)
#   run.sh DIR torchrun [REGEX]   the device tests under this machine's torchrun,
#                                 no MPI: Gloo for host memory, NCCL's id
#                                 through the rendezvous store
#   run.sh DIR sanitize TOOL...   the CUDA tests at 1 and 2 ranks under compute-sanitizer
#   run.sh DIR exec CMD...        any command in the prepared environment
# Installs the packed sysroot without replacing any file the machine has, finds
# NCCL and cuFFT, and sets LAUNCHER. Multi-rank device collectives share the one
# GPU, which NCCL refuses: DIST_CUDA_BACKEND picks the backend as in any run
# (test names ending -staged or -nccl set it: tests/mpi-launch.sh).
# Writes logs under $OUT (or DIR/out) and prints one line per test.
set -u
dir=$(cd "$1" && pwd); mode=$2; shift 2
out=${OUT:-$dir/out}; mkdir -p "$out"
[ -d "$dir/build" ] || tar -xJf "$dir/build.tar.xz" -C "$dir" || exit 1
if [ ! -e /tmp/.distmgr-sysroot ]; then
  tar -xzf "$dir/sysroot.tar.gz" -C / --skip-old-files && ldconfig && touch /tmp/.distmgr-sysroot || exit 1
fi
libs=
for l in libnccl.so.2 libcufft.so.12 libcudart.so.13; do
  f=$(find /usr/local/cuda* /usr/lib /opt -name "$l" 2>/dev/null | head -1)
  [ -n "$f" ] && libs="$libs:$(dirname "$f")" || echo "run.sh: $l not found" >&2
done
export LD_LIBRARY_PATH=${libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export LAUNCHER=${LAUNCHER:-mpirun --oversubscribe -n} TEST_TIMEOUT=${TEST_TIMEOUT:-300}
cd "$dir/build"

# one_test NAME: run as make check would; print "RESULT NAME (seconds)".
one_test() {
  local t=$1 log rc start
  log=$out/$(basename "$t").log
  start=$(date +%s)
  case $t in
    *.mpi) sh tests/mpi-launch.sh "$t" >"$log" 2>&1 ;;
    *.sh) echo "not run here (needs SLURM or network namespaces)" >"$log"; echo "SKIP $t"; return ;;
    *) timeout "$TEST_TIMEOUT" "./$t" >"$log" 2>&1 ;;
  esac
  rc=$?
  case $rc in 0) r=PASS ;; 77) r=SKIP ;; *) r="FAIL($rc)" ;; esac
  echo "$r $t ($(($(date +%s) - start)) s)"
}
export -f one_test; export out

# san_counts LOG: compute-sanitizer reports split into those raised inside
# NCCL's own code (its initialisation probes kernels of other architectures,
# cudaErrorNoKernelImageForDevice, and checks the result) and all the others.
# A report may begin on the line a test printed last (no newline before it).
san_counts() {
  awk '/========= [A-Z]/ && !/SUMMARY|COMPUTE-SANITIZER/ {n++; blk[n] = ""}
       n && /Host Frame/ && !seen[n] && /libnccl/ {nccl[n] = 1}
       n && /Host Frame/ && !seen[n] && !/libnccl|libcuda/ {seen[n] = 1}
       END {o = 0; c = 0; for (i = 1; i <= n; i++) if (nccl[i]) c++; else o++;
            printf "%d report(s) outside NCCL, %d inside NCCL", o, c}' "$1"
}

pack_logs() { tar -czf "$out/logs.tar.gz" -C "$out" --exclude=logs.tar.gz . 2>/dev/null; }
trap pack_logs EXIT

# check_tests REGEX: make check's tests matching REGEX, in parallel; a summary line.
check_tests() {
  tr ' ' '\n' <"$dir/tests.list" | grep -E "$1" | xargs -P "${JOBS:-6}" -I{} bash -c 'one_test {}' |
    sort -k2 | tee "$out/summary.txt"
  echo "$mode: $(grep -c ^PASS "$out/summary.txt") passed, $(grep -c ^FAIL "$out/summary.txt") failed, $(grep -c ^SKIP "$out/summary.txt") skipped"
}

case $mode in
  check) check_tests "${1:-.}" ;;
  torchrun)
    # The multi-rank suites that touch device memory, each process started by
    # torchrun (tests/torchrun-launch.sh, --standalone) with the Python that
    # holds this machine's torch; DIST_HOST_ENGINE=gloo there.
    export LAUNCHER="sh tests/torchrun-launch.sh" TORCHRUN_PYTHON=${TORCHRUN_PYTHON:-$(command -v python3)}
    check_tests "${1:-(cuda|staged|nccl|ddp|dpo|daso|afno).*[.]mpi$}"
    ;;
  sanitize)
    for tool in "$@"; do
      for t in ${SAN_TESTS:-test_coll_cuda test_fft_cuda test_staged test_nccl_id test_ddp test_dpo test_daso}; do
        for np in ${SAN_NP:-1 2}; do
          log=$out/san-$tool-$t-np$np.log
          timeout 600 mpirun --oversubscribe -n "$np" compute-sanitizer --tool "$tool" --error-exitcode 99 \
            --print-limit 20 "tests/$t" >"$log" 2>&1
          rc=$?
          echo "$tool $t np$np: rc $rc, $(san_counts "$log"), $(grep -m1 'SUMMARY' "$log")"
        done
      done
      log=$out/san-$tool-test_optim.log
      timeout 600 compute-sanitizer --tool "$tool" --error-exitcode 99 tests/test_optim >"$log" 2>&1
      echo "$tool test_optim: rc $?, $(san_counts "$log"), $(grep -m1 'SUMMARY' "$log")"
    done
    ;;
  exec) "$@" ;;
  *) echo "run.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac
