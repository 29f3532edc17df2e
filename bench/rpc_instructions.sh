#!/bin/sh
# bench/rpc_instructions.sh: what a remote call costs distmgr, counted in
# instructions rather than timed. On a VM whose speed jumps between launches
# (bench/RESULTS.md, "Instructions and locked operations off the path"), a
# count moves only when the code does: the figure to compare two builds by.
#
#   bench/rpc_instructions.sh [BUILD_DIR] [--calls 20000] [--top 12]
#
# Runs BUILD_DIR/bench/rpc_loop (default _build; 2 ranks through LAUNCHER, as
# for make check) with both ranks under valgrind's callgrind, then prints for
# each rank (0 the caller, 1 the worker that serves "echo") the instructions a
# call spent in distmgr's call path: lib/rpc, lib/mem and the thread-local
# helpers, each function's own instructions. Left out: the spin loops (the
# executor's and the waiter's, whose turns depend on timing) and start-up.
# Then the --top functions of that path, and UCX's send and receive for
# comparison (ucp_am_send_nbx, uct_mm_ep_am_short_iov, ucp_am_handler).
# Valgrind runs the calls about 50x slower; the counts do not depend on it.
#
# Prints "skipped: ..." and exits 0 when valgrind is not installed; exits 1
# when the run fails, 2 on bad usage.
set -eu

usage() {
  echo "usage: bench/rpc_instructions.sh [BUILD_DIR] [--calls 20000] [--top 12]" >&2
  exit 2
}
build=_build calls=20000 top=12
case ${1-} in -*|'') ;; *) build=$1; shift ;; esac
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case $1 in
  --calls) calls=$2 ;;
  --top) top=$2 ;;
  *) usage ;;
  esac
  shift 2
done
case $calls$top in *[!0-9]*) usage ;; esac
[ "$calls" -gt 0 ] || usage

if ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_annotate >/dev/null 2>&1; then
  echo "skipped: valgrind (callgrind) is not installed (apt-get install valgrind)"
  exit 0
fi
loop=$build/bench/rpc_loop
[ -x "$loop" ] || { echo "rpc_instructions: no $loop (make -C $build bench/rpc_loop)" >&2; exit 1; }
conf_launcher() { sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$1/config.h" 2>/dev/null; }
launcher=${LAUNCHER:-$(conf_launcher "$build")}
[ -n "$launcher" ] || launcher="mpirun --oversubscribe -n"

out=$(mktemp -d /tmp/rpc_instructions.XXXXXX)
trap 'rm -rf "$out"' EXIT
# Each rank writes its own profile (Open MPI's, MPICH's or SLURM's rank variable).
cat >"$out/wrap.sh" <<EOF
#!/bin/sh
r=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-\${SLURM_PROCID:-0}}}
exec valgrind -q --tool=callgrind --callgrind-out-file=$out/cg.\$r "\$@"
EOF
chmod +x "$out/wrap.sh"
# libtool's wrapper script would be profiled instead of the program: run the
# real binary with the build's library on the path.
real=$build/bench/.libs/rpc_loop
[ -x "$real" ] || real=$loop
if ! LD_LIBRARY_PATH=$build/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  timeout 1800 $launcher 2 "$out/wrap.sh" "$real" --calls "$calls" >"$out/run.log" 2>&1; then
  echo "rpc_instructions: the run failed:" >&2
  tail -20 "$out/run.log" >&2
  exit 1
fi

# Own instructions of one function per line: "<Ir> <file:function>".
own() {
  callgrind_annotate "$1" 2>/dev/null | grep -E '\[' | awk '{gsub(",", "", $1); print $1, $(NF-1)}'
}
path='/lib/rpc/|/lib/mem/|tlsdesc|tls_get_addr|dtype\.h|rpc_internal\.h|core/status'
loops='executor_main|spin_for_work|wait_done|dist_rpc_init|register|exchange|connect|teardown'
ucx='ucp_am_send_nbx|uct_mm_ep_am_short_iov|ucp_am_handler'
echo "rpc_instructions: $calls calls of 8 B ($real), instructions a call"
for r in 0 1; do
  f=$out/cg.$r
  [ -s "$f" ] || { echo "rpc_instructions: no profile from rank $r" >&2; exit 1; }
  role=caller; [ "$r" = 1 ] && role=worker
  own "$f" | grep -E "$path" | grep -vE "$loops" >"$out/path.$r" || true
  own "$f" | grep -E "$ucx" >"$out/ucx.$r" || true
  awk -v c="$calls" -v r="$r" -v role="$role" '{s += $1} END {printf "rank %d (%s): distmgr %.0f", r, role, s / c}' "$out/path.$r"
  awk -v c="$calls" '{s += $1} END {printf ", UCX send + receive %.0f\n", s / c}' "$out/ucx.$r"
  sort -rn "$out/path.$r" | head -n "$top" |
    awk -v c="$calls" '{n = $2; sub(/^.*\//, "", n); printf "  %7.1f  %s\n", $1 / c, n}'
done
