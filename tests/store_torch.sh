#!/bin/sh
# distmgr's store against torch's own TCPStore, both ways (tests/store_torch.py),
# in the dialect of the torch that is installed (Debian 12: torch 1.13).
# Exit 77 (SKIP) when no Python has torch.
# They use no MPI: a CI pass that differs only in its MPI or pml skips them
# (.ci/run runs them in each build's pml ob1 pass and under ASan).
if [ "${CI_SKIP_TESTS_WITHOUT_MPI:-}" = skip ]; then
  echo "SKIP: no MPI in these tests; this CI pass differs from the one that ran them only in its MPI or launcher"
  exit 77
fi
build=${top_builddir:-.}
here=$(cd "$(dirname "$0")" && pwd)
py=
for p in python3 /usr/bin/python3 /usr/bin/python3.11; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c "import torch.distributed" 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "SKIP: no Python with torch (apt-get install python3-torch)"
  exit 77
fi
version=$("$py" -c "import torch; print(torch.__version__)")
echo "store_torch: torch $version ($py)"
exec timeout -k 5 120 "$py" "$here/store_torch.py" "$build/tests/store_tool" "$version"
