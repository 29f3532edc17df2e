#!/bin/sh
# distmgr under a newer torch (>= 2.2: the store speaks VALIDATE first and
# shifted opcodes, and torchrun leaves MASTER_PORT to the workers' rank 0):
#  - the store both ways against that torch's TCPStore (tests/store_torch.py);
#  - tests/torchrun_coll under its torchrun: --standalone at 2 and 4 (the agent
#    store is off: distmgr's rank 0 serves), static rendezvous at 3 (the
#    agent serves, the dialect read from TORCH_NCCL_ASYNC_ERROR_HANDLING);
#  - tests/torch_share.py (torch.distributed and distmgr in one process):
#    --standalone at 2 (PyTorch's rank 0 holds MASTER_PORT; distmgr uses that
#    store) and static at 3.
# TORCH_NEWER: a Python with torch >= 2.2 (default /opt/torch22/bin/python,
# which tests/torch_newer_setup.sh makes from PyPI). Skipped (77) without one:
# Debian 12 ships torch 1.13 (tests/torchrun.sh).
if [ "${CI_SKIP_TESTS_WITHOUT_MPI:-}" = skip ] || [ "${CI_SKIP_TESTS_WITHOUT_MPI:-}" = extra ]; then
  echo "SKIP: no MPI here; another CI pass runs it (CI_SKIP_TESTS_WITHOUT_MPI=$CI_SKIP_TESTS_WITHOUT_MPI)"
  exit 77
fi
py=${TORCH_NEWER:-/opt/torch22/bin/python}
B=$(cd "${top_builddir:-.}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONWARNINGS=ignore # torch's wheel warns that numpy is missing
version=$("$py" -c "import torch; print(torch.__version__)" 2>/dev/null) || {
  echo "SKIP: no newer torch at $py (TORCH_NEWER; tests/torch_newer_setup.sh installs torch 2.2 from PyPI)"
  exit 77
}
case $version in 1.* | 2.[01].*) echo "SKIP: torch $version at $py is not >= 2.2"; exit 77 ;; esac
[ -x "$B/tests/torchrun_coll" ] || { echo "SKIP: tests/torchrun_coll not built (no Gloo)"; exit 77; }
echo "torch_newer: torch $version ($py)"
failures=0
free_port() { "$py" -c "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"; }
# expect NAME N CMD...: CMD prints N "... rank R of N ok" lines and exits 0
expect() {
  name=$1 n=$2
  shift 2
  out=$("$@" 2>&1)
  rc=$? ok=$(printf '%s\n' "$out" | grep -c "^\(torchrun_coll\|torch_share\): rank .* ok")
  if [ $rc -eq 0 ] && [ "$ok" -eq "$n" ]; then echo "ok   $name"
  else echo "FAIL $name (exit $rc, $ok of $n ranks ok)"; printf '%s\n' "$out" | tail -20 | sed 's/^/     /'; failures=$((failures + 1)); fi
}
torchrun() { timeout -k 5 120 "$py" -m torch.distributed.run "$@"; }
static() { n=$1; shift; torchrun --nnodes=1 --node_rank=0 --master_addr=127.0.0.1 --master_port="$(free_port)" --nproc_per_node="$n" "$@"; }

if timeout -k 5 120 "$py" "$here/store_torch.py" "$B/tests/store_tool" "$version" > store.$$ 2>&1; then
  echo "ok   the store both ways against torch $version's TCPStore"
else
  echo "FAIL the store against torch $version's TCPStore"; tail -20 store.$$ | sed 's/^/     /'; failures=$((failures + 1))
fi
rm -f store.$$
export DIST_TIMEOUT=60
for n in 2 4; do
  expect "torchrun_coll under torchrun $version --standalone, $n processes (rank 0's store)" $n \
    torchrun --standalone --nproc_per_node=$n --no_python "$B/tests/torchrun_coll"
done
expect "torchrun_coll under torchrun $version, static rendezvous, 3 processes (the agent's store)" 3 \
  static 3 --no_python "$B/tests/torchrun_coll"
expect "torchrun_coll under torchrun $version, 1 process, DIST_HOST_ENGINE=gloo" 1 \
  env DIST_HOST_ENGINE=gloo "$py" -m torch.distributed.run --standalone --nproc_per_node=1 --no_python "$B/tests/torchrun_coll"
share=$B/tests/.libs/torch_share.so
if grep -q -- "-fsanitize" "$B/config.log" 2>/dev/null; then
  echo "skip torch.distributed + distmgr in one process: a sanitized build"
elif [ ! -f "$share" ]; then
  echo "skip torch.distributed + distmgr in one process: $share not built (--disable-shared)"
else
  expect "torch $version and distmgr in one process, --standalone, 2 processes (PyTorch's store)" 2 \
    torchrun --standalone --nproc_per_node=2 "$here/torch_share.py" "$share"
  expect "torch $version and distmgr in one process, static rendezvous, 3 processes (the agent's store)" 3 \
    static 3 "$here/torch_share.py" "$share"
fi
echo "torch_newer: $failures failure(s)"
[ $failures -eq 0 ]
