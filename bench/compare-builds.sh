#!/bin/sh
# bench/compare-builds.sh: bench/collectives of two builds (before and after a
# change), side by side in one run, quiet enough to show a 1 % difference.
#
#   bench/compare-builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [options]
#
# It runs OLD/bench/collectives and NEW/bench/collectives alternately, --pairs
# times per rank count, the order swapped every pair (old, new, then new, old,
# ...), so that a drift in the machine's load or clock falls on both builds
# alike. Every run measures distmgr against MPI on the same buffers in
# alternating blocks, and the figure taken from a run is distmgr's time
# normalised by that run's own MPI time: the table's `ratio` column (the median
# over rounds of distmgr/MPI of adjacent blocks), or with --stat times
# distmgr_us / MPI_us (printed to 0.1 us, i.e. 2 % of a 5 us call: too coarse
# at 64 KiB). For each pair it takes new/old of that figure:
#
#   (new_dist / new_mpi) / (old_dist / old_mpi)
#
# and prints, per op, rank count, DIST_VERIFY and size, the median over pairs
# with the spread (min, max, quartiles); per op, rank count and DIST_VERIFY the
# same for each pair's geometric mean over the sizes, with one line
#   ratio: collectives <op> np=N verify=V new/old distmgr/MPI = X (target <= 1.01)
# in the format of every bench's ratio: lines (bench/bench_util.h), and, for
# reference, the median over runs of each build's own worst-ratio line.
#
# Quieter where it can be done honestly: ranks bound to cores (Open MPI
# --bind-to core, MPICH -bind-to core, srun --cpu-bind=cores) when there are no
# more ranks than cores, more rounds per size than bench/collectives' default,
# a fixed size range, both builds under one launcher. It does not make a busy
# machine quiet: run it on an idle one (and, on a shared one, under the lock
# the others use, e.g. flock /tmp/bench.lock nice bench/compare-builds.sh ...).
#
# Options:
#   --pairs N       runs of each build per rank count (default 10)
#   --ranks LIST    rank counts, comma-separated (default 2)
#   --min-bytes N   smallest size per rank (default 65536)
#   --max-bytes N   largest size (default 4194304; sizes go up by 4x)
#   --rounds N      bench/collectives --rounds (default 15)
#   --stat S        ratio (default) or times, see above
#   --no-bind       leave binding to the launcher's defaults
#   --out DIR       keep the runs' outputs in DIR (default: a new /tmp/compare-builds.XXXXXX)
#   --parse DIR     run nothing: analyse the outputs an earlier run left in DIR
# Environment: LAUNCHER (as for make check; default: OLD's configured launcher).
# Exits 0 when every run worked, whatever the figures (they are reported, not
# judged); 1 on a failed run, 2 on bad usage.
set -eu

usage() {
  cat >&2 <<'EOF'
usage: bench/compare-builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [--pairs 10] [--ranks 2] [--min-bytes 65536]
         [--max-bytes 4194304] [--rounds 15] [--stat ratio|times] [--no-bind] [--out DIR]
       bench/compare-builds.sh --parse DIR [--stat ratio|times]
  (the comment at the top of the script says what each does)
EOF
  exit 2
}
die() {
  echo "compare-builds: $*" >&2
  exit 1
}

[ $# -ge 1 ] || usage
old='' new=''
case ${1-} in --parse) ;; -*) usage ;; *) [ $# -ge 2 ] || usage; old=$1 new=$2; shift 2 ;; esac
pairs=10 ranks=2 min_bytes=65536 max_bytes=4194304 rounds=15 stat=ratio bind=1 out='' parse=''
while [ $# -gt 0 ]; do
  case $1 in
  --no-bind) bind=0; shift; continue ;;
  --pairs | --ranks | --min-bytes | --max-bytes | --rounds | --stat | --out | --parse) [ $# -ge 2 ] || usage ;;
  *) usage ;;
  esac
  case $1 in
  --pairs) pairs=$2 ;;
  --ranks) ranks=$2 ;;
  --min-bytes) min_bytes=$2 ;;
  --max-bytes) max_bytes=$2 ;;
  --rounds) rounds=$2 ;;
  --stat) stat=$2 ;;
  --out) out=$2 ;;
  --parse) parse=$2 ;;
  esac
  shift 2
done
for v in "$pairs" "$min_bytes" "$max_bytes" "$rounds"; do
  case $v in '' | *[!0-9]*) echo "compare-builds: '$v' is not a whole number" >&2; usage ;; esac
done
case $ranks in '' | *[!0-9,]*) echo "compare-builds: --ranks '$ranks' is not a list like 2,4" >&2; usage ;; esac
case $stat in ratio | times) ;; *) echo "compare-builds: --stat is ratio or times" >&2; usage ;; esac
[ "$pairs" -ge 1 ] || usage

# ---- the runs -------------------------------------------------------------------

# The launcher with the binding options after its command word; $1 = rank count.
bound_launcher() {
  if [ "$bind" = 0 ] || [ -z "$bind_opt" ] || [ "$1" -gt "$cores" ]; then
    printf '%s\n' "$launcher"
  else
    printf '%s\n' "$launcher" | sed "s/^\([^ ]*\)/\1 $bind_opt/"
  fi
}

run_one() { # build-name build-dir pair np
  f=$out/$1-pair$3-np$4.txt
  t0=$(date +%s)
  if ! LAUNCHER=$(bound_launcher "$4") "$2/bench/collectives" --ranks "$4" --min-bytes "$min_bytes" \
    --max-bytes "$max_bytes" --rounds "$rounds" >"$f" 2>&1; then
    tail -n 20 "$f" >&2
    die "the $1 build's run failed (pair $3, $4 ranks): $f"
  fi
  printf ' %s %ss' "$1" $(($(date +%s) - t0))
}

if [ -z "$parse" ]; then
  for b in "$old" "$new"; do
    [ -x "$b/bench/collectives" ] || die "$b/bench/collectives not found (build it: make -C $b bench/collectives)"
  done
  old=$(cd "$old" && pwd) new=$(cd "$new" && pwd)
  conf_launcher() { sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$1/config.h" 2>/dev/null; }
  launcher=${LAUNCHER:-$(conf_launcher "$old")}
  [ -n "$launcher" ] || launcher="mpirun --oversubscribe -n"
  [ -n "${LAUNCHER:-}" ] || [ "$(conf_launcher "$new")" = "$launcher" ] ||
    echo "compare-builds: note: the builds name different launchers; both run under '$launcher'"
  cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
  cmd=${launcher%% *} bind_opt=''
  case ${cmd##*/} in
  srun) bind_opt="--cpu-bind=cores" ;;
  mpirun* | mpiexec* | orterun)
    case $($cmd --version 2>&1 | head -n 3) in
    *"Open MPI"* | *OpenRTE*) bind_opt="--bind-to core" ;;
    *HYDRA*) bind_opt="-bind-to core" ;;
    esac ;;
  esac
  if [ -z "$out" ]; then out=$(mktemp -d /tmp/compare-builds.XXXXXX); else mkdir -p "$out"; fi
  {
    echo "old=$old"
    echo "new=$new"
    echo "pairs=$pairs ranks=$ranks bytes=$min_bytes..$max_bytes rounds=$rounds"
    echo "launcher=$launcher"
    if [ "$bind" = 1 ] && [ -n "$bind_opt" ]; then echo "binding=$bind_opt (rank counts up to $cores cores)"
    else echo "binding=the launcher's default"; fi
  } >"$out/setup.txt"
  echo "compare-builds: bench/collectives of two builds, alternately, order swapped every pair"
  sed 's/^/  /' "$out/setup.txt"
  echo "  outputs: $out"
  p=1
  while [ "$p" -le "$pairs" ]; do
    for np in $(echo "$ranks" | tr ',' ' '); do
      printf 'pair %d/%d, %d ranks:' "$p" "$pairs" "$np"
      if [ $((p % 2)) = 1 ]; then run_one old "$old" "$p" "$np"; run_one new "$new" "$p" "$np"
      else run_one new "$new" "$p" "$np"; run_one old "$old" "$p" "$np"; fi
      echo
    done
    p=$((p + 1))
  done
else
  out=$parse
  [ -d "$out" ] || die "--parse: no folder $out"
  [ -f "$out/setup.txt" ] && sed 's/^/  /' "$out/setup.txt"
fi

# ---- the analysis ---------------------------------------------------------------

# One row per table line: build pair op np verify bytes MPI_us distmgr_us ratio;
# and "worst" rows from the runs' own ratio: lines.
rows=$out/rows.txt
: >"$rows"
for f in "$out"/old-pair*-np*.txt "$out"/new-pair*-np*.txt; do
  [ -f "$f" ] || die "no run outputs in $out"
  b=${f##*/}
  p=${b#*-pair}
  p=${p%%-*}
  awk -v build="${b%%-*}" -v pair="$p" '
    ($1 == "all_reduce" || $1 == "all_to_all_v") && NF == 9 { print build, pair, $1, $2, $3, $4, $5, $6, $9 }
    /^ratio: / && / worst / {
      split($0, a, " = "); split($4, n, "="); split($5, v, "=")
      print build, pair, $2, n[2], v[2], "worst", 0, 0, a[2] + 0
    }' "$f" >>"$rows"
done

awk -v stat="$stat" '
  function sort(x, n,   i, j, t) { for (i = 2; i <= n; i++) { t = x[i]; for (j = i - 1; j >= 1 && x[j] > t; j--) x[j + 1] = x[j]; x[j + 1] = t } }
  function q(x, n, f,   pos, lo) { pos = 1 + f * (n - 1); lo = int(pos); return lo >= n ? x[n] : x[lo] + (pos - lo) * (x[lo + 1] - x[lo]) }
  # prints median, min, max, q1, q3 of vals[1..n] (sorted in place)
  function spread(x, n) { sort(x, n); return sprintf("%8.4f %8.4f %8.4f %8.4f %8.4f", q(x, n, 0.5), x[1], x[n], q(x, n, 0.25), q(x, n, 0.75)) }
  {
    key = $3 " " $4 " " $5; size = $6
    if ($6 == "worst") { w[$1, key, ++nw[$1, key]] = $9; next }
    norm = stat == "times" ? ($7 > 0 ? $8 / $7 : 0) : $9
    if (!((key, size) in seen)) { seen[key, size] = 1; sizes[key, ++ns[key]] = size; if (!(key in kseen)) { kseen[key] = 1; keys[++nk] = key } }
    val[$1, $2, key, size] = norm; pairs[$2] = 1
  }
  END {
    if (!nk) { print "compare-builds: no table rows found" > "/dev/stderr"; exit 1 }
    printf "per run: distmgr/MPI of the same run (%s); per pair: new/old of that\n", stat == "times" ? "distmgr_us / MPI_us" : "the table'"'"'s ratio column: median over rounds of adjacent blocks"
    printf "%-13s %3s %6s %10s %5s %8s %8s %8s %8s %8s\n", "op", "np", "verify", "bytes", "pairs", "median", "min", "max", "q1", "q3"
    for (k = 1; k <= nk; k++) {
      key = keys[k]; split(key, kk, " ")
      split("", gm); ng = 0
      for (p in pairs) { lg[p] = 0; cnt[p] = 0 }
      for (s = 1; s <= ns[key]; s++) {
        size = sizes[key, s]; n = 0; split("", x)
        for (p in pairs)
          if (("old", p, key, size) in val && ("new", p, key, size) in val && val["old", p, key, size] > 0) {
            r = val["new", p, key, size] / val["old", p, key, size]
            x[++n] = r; lg[p] += log(r); cnt[p]++
          }
        if (n) printf "%-13s %3d %6d %10d %5d %s\n", kk[1], kk[2], kk[3], size, n, spread(x, n)
      }
      for (p in pairs) if (cnt[p] == ns[key]) gm[++ng] = exp(lg[p] / cnt[p])
      if (!ng) continue
      line = spread(gm, ng)
      printf "%-13s %3d %6d %10s %5d %s  (geometric mean over sizes)\n", kk[1], kk[2], kk[3], "all", ng, line
      summary[k] = sprintf("ratio: collectives %s np=%d verify=%d new/old distmgr/MPI = %.3f (target <= 1.01)", kk[1], kk[2], kk[3], q(gm, ng, 0.5))
      for (b = 0; b < 2; b++) {
        bn = b ? "new" : "old"; m = nw[bn, key]; split("", y)
        for (i = 1; i <= m; i++) y[i] = w[bn, key, i]
        if (m) { sort(y, m); own[k, bn] = sprintf("%.3f", q(y, m, 0.5)) } else own[k, bn] = "-"
      }
    }
    print ""
    print "each build'"'"'s own ratio: line (worst distmgr/MPI from 64 KiB), median over its runs:"
    for (k = 1; k <= nk; k++) { split(keys[k], kk, " "); printf "  %-13s np=%d verify=%d  old %s  new %s\n", kk[1], kk[2], kk[3], own[k, "old"], own[k, "new"] }
    print ""
    for (k = 1; k <= nk; k++) if (k in summary) print summary[k]
  }' "$rows"
