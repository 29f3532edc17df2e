#!/bin/sh
# make check: the layering rules of lib/ (tests/layers.py): includes and calls
# point down the layers, MPI and NCCL only in their engine's places, no
# circles; known exceptions in tests/layers.known may only shrink.
S=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${top_builddir:-.}" && pwd)
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not found"; exit 77; }
exec python3 "$S/tests/layers.py" "$S" "$B"
