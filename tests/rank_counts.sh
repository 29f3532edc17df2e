#!/bin/sh
# The rank counts of the collective suite: each of its cases declares the
# rank counts it applies at ("PROG --list" prints "ranks MIN MAX SUITE / CASE"
# for every case the program runs), and Makefile.am lists the runs
# (tests/PROG-npN.mpi, and tests/test_coll_cuda-npN-staged.mpi / -nccl.mpi for
# each device engine). They must agree: every case runs at one listed count at
# least, every listed count runs some case (none above the table's bound), and
# every engine of the device program runs at the host program's counts.
set -u
B=${top_builddir:-.}
S=$(cd "$(dirname "$0")/.." && pwd)
failures=0
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }

# counts PROG SUFFIX: the N of every tests/PROG-npN$SUFFIX.mpi in Makefile.am, sorted.
counts() { grep -o "tests/$1-np[0-9]*$2\.mpi" "$S/Makefile.am" | sed "s|^tests/$1-np\([0-9]*\).*|\1|" | sort -nu | tr '\n' ' '; }

host=$(counts test_coll '')
[ -n "$host" ] || fail "Makefile.am runs test_coll at no rank count"
for prog in test_coll test_coll_cuda; do
  list=$("$B/tests/$prog" --list) || { fail "$prog --list"; continue; }
  [ -n "$list" ] || fail "$prog --list printed no case"
  for suffix in '' -staged -nccl; do
    [ "$prog" = test_coll ] && [ -n "$suffix" ] && continue
    run=$(counts "$prog" "$suffix")
    echo "$prog$suffix: runs at ${run:-no rank count}"
    [ "$run" = "$host" ] || fail "$prog$suffix runs at '$run', test_coll at '$host'"
    # every case at one of the counts
    echo "$list" | while read -r word lo hi name; do
      hit=0
      for n in $run; do [ "$n" -ge "$lo" ] && [ "$n" -le "$hi" ] && hit=1; done
      [ $hit -eq 1 ] || echo "FAIL: $prog$suffix: case '$name' applies at $lo to $hi ranks, never run"
    done | grep . && failures=$((failures + 1))
    # some case at every count
    for n in $run; do
      echo "$list" | awk -v n="$n" '$2 <= n && n <= $3 {hit = 1} END {exit !hit}' ||
        fail "$prog$suffix runs at $n ranks, where no case applies"
    done
  done
done
echo "rank_counts: $failures failure(s)"
[ $failures -eq 0 ]
