# Sourced from the source root (". tests/sanitizer/env.sh"): the sanitizer
# configuration of make check (ASan + UBSan; CI step "ASan + UBSan", README,
# Tests). Sets SANITIZE_CFLAGS and SANITIZE_LDFLAGS for configure and
# SANITIZE_LAUNCHER for make check, and exports the runtime options.
#
# Build flags:
#   -fsanitize=address,undefined   ASan and UBSan. In LDFLAGS too: libtool
#                                  (2.4.7) passes -fsanitize=* to the shared
#                                  libraries' link, and the programs link with
#                                  CFLAGS and LDFLAGS (checked with V=1).
#   -O1 -g -fno-omit-frame-pointer readable stacks at a usable speed.
#   -fno-sanitize-recover=undefined the first undefined behaviour ends the
#                                  process (exit status 1): the test fails.
# Runtime options (mpirun forwards them to the ranks only with -x, hence
# SANITIZE_LAUNCHER; srun forwards the whole environment):
#   ASAN_OPTIONS
#     detect_leaks=1               LeakSanitizer at exit (the x86-64 Linux
#                                  default; written out so it stays on).
#     fast_unwind_on_malloc=0      Open MPI's libraries have no frame
#                                  pointers: the fast unwinder stops at the
#                                  first Open MPI frame, so a leak's stack
#                                  would not show the libmpi/libopen-* frame
#                                  that lsan.supp matches. The DWARF unwinder
#                                  gives whole stacks, at a cost: a malloc
#                                  or free with 20 frames takes ~10 us instead
#                                  of 0.5 us (see SANITIZER_PIPELINE_...).
#     log_path=$SANITIZER_LOG_DIR/asan  only when SANITIZER_LOG_DIR is set (CI):
#                                  ASan and LSan reports go to asan.<pid>
#                                  there instead of stderr, so a report from
#                                  a run whose output a script test discards
#                                  (the runs that must fail) is still seen.
#                                  UBSan reports stay on stderr (GCC's UBSan
#                                  ignores log_path next to ASan).
#   LSAN_OPTIONS
#     suppressions=lsan.supp       Open MPI's own leaks at exit (see there).
#     print_suppressions=0         else every process of every test prints
#                                  the list of suppressions it used.
#   UBSAN_OPTIONS
#     print_stacktrace=1           say where, not only what.
#     halt_on_error=1              stop at the first report (as the build flag).
# Not set: detect_odr_violation (no ODR report here), abort_on_error (an
# exit status is enough for automake and mpirun).
_san_dir=${SANITIZER_DIR:-$PWD/tests/sanitizer}
if [ ! -f "$_san_dir/lsan.supp" ]; then
  echo "tests/sanitizer/env.sh: source it from the distmgr source root (or set SANITIZER_DIR)" >&2
  return 1 2>/dev/null || exit 1
fi
SANITIZE_CFLAGS="-g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
SANITIZE_LDFLAGS="-fsanitize=address,undefined"
SANITIZE_LAUNCHER="mpirun --oversubscribe --allow-run-as-root --mca pml ob1 -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS -n"
ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0${SANITIZER_LOG_DIR:+:log_path=$SANITIZER_LOG_DIR/asan}"
LSAN_OPTIONS="suppressions=$_san_dir/lsan.supp:print_suppressions=0"
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# SANITIZER_PIPELINE_ASAN_OPTIONS: what tests/surrogate.sh (the whole example
# pipeline, six multi-rank runs) uses instead of ASAN_OPTIONS: the fast
# unwinder and no leak check. With fast_unwind_on_malloc=0 every malloc and
# free of Open MPI's libnbc (the MPI_Iallreduce of each call's check round,
# also while ranks poll) costs a DWARF unwind, and oversubscribed polling
# ranks then starve the working ones: the 3-rank dataset of the test took
# 118-142 s (over its 120 s limit) instead of 17-29 s, the whole script 40 s.
# Without whole stacks Open MPI's leaks cannot be told from distmgr's, so the
# pipeline is checked for memory errors and undefined behaviour only; leaks
# on its library paths are checked by test_ns2d, test_flowdata, test_afno*,
# test_picture and test_sampler.
SANITIZER_PIPELINE_ASAN_OPTIONS="detect_leaks=0:fast_unwind_on_malloc=1${SANITIZER_LOG_DIR:+:log_path=$SANITIZER_LOG_DIR/asan}"
export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS SANITIZER_PIPELINE_ASAN_OPTIONS
unset _san_dir
