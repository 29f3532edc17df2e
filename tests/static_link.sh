#!/bin/sh
# Static linking as pkg-config says: a program linked against libdistmgr.a
# with every archive member pulled in (--whole-archive, so each dependency
# of the library must be named) and only the flags of distmgr.pc
# (Libs.private: MPI, FFTW, the C++ runtime and CUDA of a CUDA build, -lm),
# run alone and at 2 ranks. Skipped (77) when the build made no static library.
set -u
B=$(cd "${top_builddir:-.}" && pwd)
S=$(cd "$(dirname "$0")/.." && pwd)
LAUNCHER=${LAUNCHER:-$(sed -n 's/^#define DIST_DEFAULT_LAUNCHER "\(.*\)"$/\1/p' "$B/config.h" 2>/dev/null || :)}
LAUNCHER=${LAUNCHER:-mpirun --oversubscribe --allow-run-as-root -n}
a=$B/lib/.libs/libdistmgr.a
[ -f "$a" ] || { echo "SKIP: no static library (configured with --disable-static)"; exit 77; }
# The installed .pc's private flags, with its variables (libdir) expanded.
libdir=$(PKG_CONFIG_PATH=$B pkg-config --variable=libdir distmgr)
private=$(PKG_CONFIG_PATH=$B pkg-config --static --libs distmgr | sed "s|-L$libdir ||; s|-ldistmgr||")
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat >"$d/use.c" <<'C'
#include <stdio.h>
#include <distmgr.h>
int main(void) {
  float x[2] = {1, 2};
  dist_tensor t = dist_tensor_host(x, DIST_F32, 1, (int64_t[1]){2});
  int size = 0;
  if (dist_manager_initialize() || dist_all_reduce(NULL, &t, DIST_SUM) || dist_manager_world_size(&size)) {
    fprintf(stderr, "use: %s\n", dist_last_error());
    return 1;
  }
  printf("static use: sum %g over %d rank(s)\n", x[0], size);
  return dist_manager_finalize();
}
C
# The build's compiler and flags (a sanitizer build's objects need its runtime).
cc=$(sed -n 's/^CC = //p' "$B/Makefile")
cflags=$(sed -n 's/^CFLAGS = //p' "$B/Makefile")
ldflags=$(sed -n 's/^LDFLAGS = //p' "$B/Makefile")
failures=0
if ${cc:-cc} $cflags -o "$d/use" "$d/use.c" -I"$S/include" -I"$B/include" $ldflags \
    -Wl,--whole-archive "$a" -Wl,--no-whole-archive $private >"$d/link.log" 2>&1; then
  echo "PASS: libdistmgr.a links with distmgr.pc's Libs.private ($private)"
else
  failures=$((failures + 1)); echo "FAIL: static link with distmgr.pc's Libs.private ($private)"; sed 's/^/    /' "$d/link.log" | head -20
fi
if [ $failures -eq 0 ]; then
  for n in 1 2; do
    out=$(timeout 60 $LAUNCHER $n "$d/use" 2>&1)
    if printf '%s\n' "$out" | grep -q "static use: sum $((n * 1)) over $n rank(s)"; then echo "PASS: statically linked program at $n rank(s)"
    else failures=$((failures + 1)); echo "FAIL: statically linked program at $n rank(s)"; printf '%s\n' "$out" | sed 's/^/    /'; fi
  done
fi
echo "static_link: $failures failure(s)"
[ $failures -eq 0 ]
