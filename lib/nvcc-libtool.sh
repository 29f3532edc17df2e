#!/bin/sh
# libtool passes gcc-style PIC flags; nvcc needs them forwarded to the host compiler.
nvcc=$1; shift
for a in "$@"; do
  shift
  case $a in
    -fPIC|-fpic) set -- "$@" -Xcompiler "$a" ;;
    *) set -- "$@" "$a" ;;
  esac
done
exec "$nvcc" "$@"
