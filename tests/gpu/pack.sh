#!/bin/bash
# Pack a CUDA build for a GPU machine that has CUDA, NCCL and cuFFT but no MPI
# (the device machine of this project's workplace): the test, bench and example
# programs of BUILD (configure it with --disable-shared, so the programs carry
# libdistmgr and need no libtool wrapper), the list of tests `make check` runs,
# and a sysroot tarball with Debian's Open MPI (mpirun, orted, MCA and PMIx
# components, help files) and every other library those programs load, minus
# glibc, the C++ runtime and the CUDA libraries, which the GPU machine has.
#
#   tests/gpu/pack.sh BUILD OUT      then run tests/gpu/run.sh there with OUT
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$out" && mkdir -p "$out/build"

# The programs, at their paths inside the build folder.
progs=$(cd "$build" && find tests bench examples -maxdepth 1 -type f -perm -u+x ! -name '*.sh' 2>/dev/null)
for p in $progs; do
  file -b "$build/$p" | grep -q ELF || continue
  mkdir -p "$out/build/$(dirname "$p")"
  cp "$build/$p" "$out/build/$p"
done
cp "$src/tests/mpi-launch.sh" "$src/tests/torchrun-launch.sh" "$out/build/tests/"
install -D -m 644 "$src/tests/slurm/torchrun.py" "$out/build/tests/slurm/torchrun.py" # not a program: strip skips it
# make check's TESTS, as this build's Makefile lists them.
printf 'print-tests:\n\t@echo $(TESTS)\n' | make -s -C "$build" -f Makefile -f - print-tests >"$out/tests.list"

# Files of the Open MPI runtime packages (no docs), then the closure of the
# shared libraries that they and the programs need.
list=$(mktemp)
dpkg -L openmpi-bin libopenmpi3 openmpi-common libpmix2 |
  grep -Ev '^/usr/share/(doc|man|lintian)' | while read -r f; do [ -f "$f" ] && echo "$f"; done >"$list"
skip='^(linux-vdso|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|ld-linux|libresolv\.so|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcufft|libnccl|libnvidia)'
elves=$( (cat "$list"; for p in $progs; do echo "$build/$p"; done) | while read -r f; do
  file -b "$f" | grep -q ELF && echo "$f"; done)
for f in $elves; do ldd "$f" 2>/dev/null; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    echo "$name" | grep -Eq "$skip" && continue
    echo "$(dirname "$(readlink -f "$path")")/$name"
  done >>"$list"
sort -u "$list" | while read -r f; do [ -e "$f" ] && echo "$f"; done | sed 's|^/||' | tar -czhf "$out/sysroot.tar.gz" -C / -T -
rm -f "$list"
# Each program carries the static CUDA runtime (about 1 MB): without debug
# sections and in one xz stream (whose window spans programs, so the copies
# cost nothing), the folder fits the device tool's 64 MiB. run.sh unpacks it.
find "$out/build" -type f -perm -u+x ! -name '*.sh' -exec strip --strip-debug {} +
tar -C "$out" -cf - build | xz -9 -T2 >"$out/build.tar.xz" && rm -rf "$out/build"
cp "$src/tests/gpu/run.sh" "$out/"
du -sh "$out"
