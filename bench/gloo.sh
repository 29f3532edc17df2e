#!/bin/sh
# bench/gloo.sh: distmgr without MPI (DIST_HOST_ENGINE=gloo under torchrun)
# against torch.distributed's Gloo under the same torchrun, and against
# distmgr on MPI under mpirun, in one run, at each rank count:
#
#   bench/gloo.sh [--ranks 2,4] [--min-bytes 4096] [--max-bytes 4194304] [--rounds 5]
#
# Run from the build folder (or with top_builddir set). Prints each side's
# start-up time and microseconds per call, and ratio: lines for
# distmgr-on-Gloo / torch-on-Gloo (target <= 1.0) and distmgr-on-Gloo /
# distmgr-on-MPI. torch's side is skipped, visibly, without torch.
set -eu
B=${top_builddir:-.}
here=$(cd "$(dirname "$0")" && pwd)
ranks=2,4 rest=
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --min-bytes|--max-bytes|--rounds) rest="$rest $1 $2"; shift 2 ;;
    *) echo "usage: bench/gloo.sh [--ranks 2,4] [--min-bytes N] [--max-bytes N] [--rounds R]" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
torchrun() { timeout -k 5 600 "$py" "$here/../tests/slurm/torchrun.py" --standalone --nproc_per_node="$@"; }
have_torch=1
"$py" -c "import torch.distributed" 2>/dev/null || have_torch=0
launcher=${LAUNCHER:-mpirun --oversubscribe --allow-run-as-root -n}
out=$(mktemp -d)
for n in $(echo "$ranks" | tr , ' '); do
  echo "== $n ranks"
  # shellcheck disable=SC2086
  DIST_HOST_ENGINE=gloo torchrun "$n" --no_python "$B/bench/gloo" $rest 2>/dev/null > "$out/gloo.$n"
  # shellcheck disable=SC2086
  timeout -k 5 600 $launcher "$n" "$B/bench/gloo" $rest 2>/dev/null > "$out/mpi.$n"
  if [ $have_torch = 1 ]; then
    # shellcheck disable=SC2086
    torchrun "$n" "$here/gloo_torch.py" $rest 2>/dev/null > "$out/torch.$n"
  else
    echo "SKIP torch.distributed: no torch for $py"; : > "$out/torch.$n"
  fi
  "$py" - "$out" "$n" <<'PY'
import sys
out, n = sys.argv[1], sys.argv[2]
def read(name):
    d, init = {}, None
    for line in open("%s/%s.%s" % (out, name, n)):
        f = line.split()
        if f[0] == "init_s": init = float(f[1])
        elif len(f) == 3 and f[0] in ("all_reduce", "all_to_all_v"): d[(f[0], int(f[1]))] = float(f[2])
    return d, init
g, gi = read("gloo"); m, mi = read("mpi"); t, ti = read("torch")
print("start-up (s, slowest rank): distmgr on Gloo %s, distmgr on MPI %s, torch Gloo %s" % (gi, mi, ti))
print("%-13s %9s %12s %12s %12s %9s %9s" % ("op", "bytes", "dist_gloo_us", "dist_mpi_us", "torch_us", "g/torch", "g/mpi"))
worst_t = worst_m = 0
for (op, b) in sorted(g):
    gu, mu, tu = g[(op, b)], m.get((op, b)), t.get((op, b))
    rt = gu / tu if tu else None
    rm = gu / mu if mu else None
    if rt and b >= 65536: worst_t = max(worst_t, rt)
    if rm and b >= 65536 and op == "all_reduce": worst_m = max(worst_m, rm)
    print("%-13s %9d %12.2f %12s %12s %9s %9s" % (op, b, gu, "%.2f" % mu if mu else "-", "%.2f" % tu if tu else "-",
          "%.3f" % rt if rt else "-", "%.3f" % rm if rm else "-"))
if worst_t: print("ratio: gloo all_reduce distmgr/torch np=%s worst >=64KiB = %.3f (target <= 1.0)" % (n, worst_t))
if worst_m: print("ratio: gloo all_reduce distmgr-on-Gloo/distmgr-on-MPI np=%s worst >=64KiB = %.3f (MPI is the engine to beat)" % (n, worst_m))
PY
done
rm -rf "$out"
