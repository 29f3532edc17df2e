#!/bin/sh
# The store rendezvous for launches without MPI (tests/torchrun_rdzv.c), the
# Gloo engine met through it (tests/torchrun_gloo.c, when built) and the
# manager started on them (tests/torchrun_coll.c: DIST_HOST_ENGINE=gloo), for real:
#  - under Debian's torchrun (torch 1.13, through tests/slurm/torchrun.py, the
#    same agent), --standalone and static, 1-4 processes: torchrun's agent
#    serves the store and distmgr is its client;
#  - under a bare launcher that sets only RANK, WORLD_SIZE, MASTER_ADDR and
#    MASTER_PORT, 1-4 processes: rank 0 serves distmgr's own store;
#  - DASO on Gloo under two torchrun agents (torchrun's nodes): mpirun's
#    losses digit for digit; a PyTorch program and distmgr in one process
#    on torchrun's one rendezvous (tests/torch_share.py), 1-4 processes;
#  - failures, each a clear error within DIST_TIMEOUT, never a hang: nobody
#    serving the agent's port, a rank that never arrives, MASTER_PORT taken,
#    an agent store of another torch dialect.
# Exit 77 (SKIP) without torch.
# They use no MPI: a CI pass that differs only in its MPI or pml skips them
# (.ci/run runs them in each build's pml ob1 pass and under ASan).
if [ "${CI_SKIP_TESTS_WITHOUT_MPI:-}" = skip ]; then
  echo "SKIP: no MPI in these tests; this CI pass differs from the one that ran them only in its MPI or launcher"
  exit 77
fi
B=${top_builddir:-.}
here=$(cd "$(dirname "$0")" && pwd)
prog=$B/tests/torchrun_rdzv
gloo=$B/tests/torchrun_gloo
coll=$B/tests/torchrun_coll
py=/usr/bin/python3
if ! "$py" -c "import torch.distributed.run" 2>/dev/null; then
  echo "SKIP: no torch for $py (apt-get install python3-torch)"
  exit 77
fi
failures=0
free_port() { "$py" -c "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"; }
# expect NAME N CMD...: CMD prints N "ok" lines and exits 0
expect() {
  name=$1 n=$2
  shift 2
  out=$("$@" 2>&1) # every CMD here runs under a timeout itself
  rc=$? ok=$(printf '%s\n' "$out" | grep -c "^\(torchrun_[a-z]*\|torch_share\): rank .* ok")
  if [ $rc -eq 0 ] && [ "$ok" -eq "$n" ]; then echo "ok   $name"
  else echo "FAIL $name (exit $rc, $ok of $n ranks ok)"; printf '%s\n' "$out" | tail -20 | sed 's/^/     /'; failures=$((failures + 1)); fi
}
# refuse NAME TEXT SECONDS CMD...: CMD fails within SECONDS, its output containing TEXT
refuse() {
  name=$1 text=$2 limit=$3
  shift 3
  t0=$(date +%s)
  out=$("$@" 2>&1) # every CMD here runs under a timeout itself
  rc=$? dt=$(($(date +%s) - t0))
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -le "$limit" ] && printf '%s' "$out" | grep -q -- "$text"; then
    echo "ok   $name ($dt s): $(printf '%s\n' "$out" | grep -- "$text" | head -1 | cut -c1-200)"
  else echo "FAIL $name (exit $rc after $dt s; wanted '$text')"; printf '%s\n' "$out" | tail -20 | sed 's/^/     /'; failures=$((failures + 1)); fi
}
# bare PROG N [ENV...]: N processes with only the four variables (and ENV)
bare() {
  prog=$1 n=$2 port=$(free_port)
  shift 2
  pids= r=0
  while [ $r -lt "$n" ]; do
    # shellcheck disable=SC2086 # BARE_ARGS: the program's arguments, split on spaces
    env "$@" RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout -k 5 60 "$prog" ${BARE_ARGS:-} & pids="$pids $!"
    r=$((r + 1))
  done
  rc=0
  for p in $pids; do wait "$p" || rc=1; done
  return $rc
}

# The rendezvous alone at 1 and 3 (the Gloo and manager runs below go through it at 1-4).
for n in 1 3; do
  expect "torchrun --standalone --nproc_per_node=$n (agent store)" $n \
    timeout -k 5 90 "$py" "$here/slurm/torchrun.py" --no_python --standalone --nproc_per_node=$n "$prog"
done
for n in 2 4; do
  expect "torchrun static rendezvous, --nproc_per_node=$n (agent store)" $n \
    timeout -k 5 90 "$py" "$here/slurm/torchrun.py" --no_python --nnodes=1 --node_rank=0 --master_addr=127.0.0.1 \
    --master_port="$(free_port)" --nproc_per_node=$n "$prog"
done
for n in 2 4; do
  expect "bare launcher, $n processes (rank 0 serves the store)" $n bare "$prog" $n
done
if [ -x "$gloo" ]; then
  # 1-4 processes over the Gloo engine alone, the manager, the sharing with
  # PyTorch (make check's suites under tests/torchrun-launch.sh run the
  # manager at 1-4 too)
  for n in 2 4; do
    expect "Gloo under torchrun --standalone, $n processes" $n \
      timeout -k 5 120 "$py" "$here/slurm/torchrun.py" --no_python --standalone --nproc_per_node=$n "$gloo"
  done
  expect "Gloo under a bare launcher, 3 processes" 3 bare "$gloo" 3
  for n in 1 3; do
    expect "dist_manager_initialize without MPI (DIST_HOST_ENGINE=gloo) under torchrun, $n processes" $n \
      env DIST_HOST_ENGINE=gloo DIST_TIMEOUT=60 timeout -k 5 120 "$py" "$here/slurm/torchrun.py" --no_python \
      --standalone --nproc_per_node=$n "$coll"
  done
  expect "dist_manager_initialize without MPI under a bare launcher, 3 processes" 3 \
    bare "$coll" 3 DIST_HOST_ENGINE=gloo DIST_TIMEOUT=60
  refuse "Gloo: a rank quits before connecting" "rank 2 did not join the context in time" 20 \
    bare "$gloo" 3 DIST_TIMEOUT=3 TORCHRUN_GLOO_QUIT=connect
  refuse "Gloo: a rank quits before the first collective" "all-reduce: Gloo all-reduce:" 20 \
    bare "$gloo" 3 DIST_TIMEOUT=3 TORCHRUN_GLOO_QUIT=collective
  # quit_case LABEL MAX_S WANT VAR=VALUE...: torchrun_coll at 4 (bare), its
  # last rank leaving as the variables say; passes when the 3 others fail,
  # each naming WANT, within MAX_S seconds.
  quit_case() {
    label=$1 max=$2 want=$3
    shift 3
    t0=$(date +%s)
    out=$(bare "$coll" 4 "$@" 2>&1)
    rc=$? dt=$(($(date +%s) - t0)) n=$(printf '%s\n' "$out" | grep -c "after the last rank died: .*$want")
    if [ $rc -ne 0 ] && [ "$n" -eq 3 ] && [ $dt -le "$max" ]; then
      echo "ok   $label ($dt s)"
    else
      echo "FAIL $label (exit $rc, $n of 3 ranks said so, $dt s)"; printf '%s\n' "$out" | tail -8 | sed 's/^/     /'
      failures=$((failures + 1))
    fi
  }
  # The shared-memory engine's own waits (DIST_VERIFY=0: no check round
  # before the data; one all-reduce first, which makes the segment): the last
  # rank dies, or stalls, before the next all-reduce; the others fail at once
  # naming it (the peer's process is gone: well before DIST_TIMEOUT=20), or
  # at DIST_TIMEOUT.
  quit_case "shared memory: the last rank dies before an all-reduce (DIST_VERIFY=0): the 3 others fail naming it" 14 \
    "is gone while the others waited for it in a shared-memory collective" \
    DIST_TIMEOUT=20 DIST_VERIFY=0 TORCHRUN_COLL_WARM=1 TORCHRUN_COLL_QUIT=1
  # The same with a child it forked (without exec) still alive: the child's
  # copies of its descriptors must not keep its liveness lock held.
  quit_case "shared memory: the last rank dies, its forked child lives on: the 3 others fail naming it" 8 \
    "is gone while the others waited for it in a shared-memory collective" \
    DIST_TIMEOUT=20 DIST_VERIFY=0 TORCHRUN_COLL_WARM=1 TORCHRUN_COLL_QUIT=fork
  quit_case "shared memory: the last rank stalls before an all-reduce (DIST_VERIFY=0): the 3 others fail naming it" 60 \
    "did not reach a shared-memory collective within DIST_TIMEOUT=3" \
    DIST_TIMEOUT=3 DIST_VERIFY=0 TORCHRUN_COLL_WARM=1 TORCHRUN_COLL_QUIT=stall
  # One rank in a pid namespace of its own (OWN_NS_RANK; as in a container
  # that shares the host name and /dev/shm but not the process ids). Rank 0
  # there, the last rank alive but 1 s late: rank 0, asleep on it, must not
  # take it for gone. The last rank there, dying: the others must name it at
  # once, not at DIST_TIMEOUT (its process id means nothing to them).
  if unshare --pid --fork --kill-child true 2>/dev/null; then
    own_ns=$B/tests/own_ns.$$.sh # in the build tree: /tmp may be mounted noexec
    # (LeakSanitizer cannot stop the threads of a process in a pid namespace
    # of its own, and reports false leaks there: off for that rank only.)
    cat > "$own_ns" <<'WRAP'
#!/bin/sh
if [ "$RANK" = "$OWN_NS_RANK" ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  exec unshare --pid --fork --kill-child "$@"
fi
exec "$@"
WRAP
    chmod +x "$own_ns"
    for c in "late 0 came late: no error" "1 2 died: .*is gone while the others waited"; do
      set -- $c
      quit=$1 ns=$2
      shift 2
      want=$*
      t0=$(date +%s)
      out=$(BARE_ARGS=$coll bare "$own_ns" 3 OWN_NS_RANK=$ns DIST_TIMEOUT=20 DIST_VERIFY=0 TORCHRUN_COLL_WARM=1 \
            TORCHRUN_COLL_QUIT=$quit 2>&1)
      rc=$? dt=$(($(date +%s) - t0)) n=$(printf '%s\n' "$out" | grep -c "after the last rank $want")
      if [ "$quit" = late ]; then label="rank 0 in its own pid namespace waits for a late peer" k=3 good=$((rc == 0))
      else label="the last rank, in its own pid namespace, dies: the 2 others name it at once" k=2 good=$((rc != 0)); fi
      if [ $good = 1 ] && [ "$n" -eq $k ] && [ $dt -lt 15 ]; then echo "ok   shared memory: $label ($dt s)"
      else
        echo "FAIL shared memory: $label (exit $rc, $n of $k ranks said so, $dt s)"
        printf '%s\n' "$out" | tail -8 | sed 's/^/     /'
        failures=$((failures + 1))
      fi
    done
    rm -f "$own_ns"
  else
    echo "skip shared memory across pid namespaces: unshare --pid --fork is not permitted here"
  fi
  # gives_up_case LABEL N ARGS NAMED_RE WANT_NAMED [VAR=VALUE...]: N ranks of
  # tests/faults/gives_up ARGS; passes within 10 s when every rank's call fails,
  # WANT_NAMED lines match NAMED_RE, and after a failed subgroup ("group")
  # the three later calls work on every rank.
  gives_up_case() {
    label=$1 n=$2 args=$3 named_re=$4 want_named=$5
    shift 5
    t0=$(date +%s)
    out=$(BARE_ARGS=$args bare "$B/tests/faults/gives_up" "$n" DIST_TIMEOUT=30 "$@" 2>&1)
    rc=$? dt=$(($(date +%s) - t0))
    failed=$(printf '%s\n' "$out" | grep -c "gives_up: rank [0-9]*: dist_\(manager_initialize\|group_create_subgroup\) -> error")
    named=$(printf '%s\n' "$out" | grep -c "$named_re")
    after=$(printf '%s\n' "$out" | grep -c "gives_up: rank [0-9]*: \(dist_group_create_subgroup again\|dist_all_reduce on it\|dist_manager_finalize\) -> ok")
    want_after=0
    case $args in *group) want_after=$((3 * n)) ;; esac
    if [ $rc -eq 0 ] && [ "$failed" -eq "$n" ] && [ "$named" -eq "$want_named" ] && [ "$after" -eq $want_after ] && [ $dt -lt 10 ]; then
      echo "ok   $label ($dt s)"
    else
      echo "FAIL $label (exit $rc, $failed of $n failed, $named of $want_named named it, $after of $want_after later calls ok, $dt s)"
      printf '%s\n' "$out" | tail -8 | sed 's/^/     /'
      failures=$((failures + 1))
    fi
  }
  # A rank that fails (alive) says so on the store: the last rank fails in
  # start-up's third exchange, in the first built-in group's Gloo connect, or
  # in a subgroup's connect after start-up (an injected out of memory); the
  # others stop at once (not at DIST_TIMEOUT=30) naming it, with its code. After the failed subgroup the job goes on: a
  # second creation, an all-reduce on it and finalize work on every rank.
  for c in "rdzv_set 2 init" "gloo_connect 0 init" "gloo_connect 0 group"; do
    gives_up_case "a rank fails at $c: the others stop at once naming it" 3 "$c" \
      "gives_up: rank [01]: .* -> error: \[out of memory\] .*\(rank 2 of 3 gave up: \|failed on rank 2\)" 2
  done
  # The same with two copies: 4 ranks, rank 1 fails in the connect of a
  # subgroup of 2. Its copy-mate stops at once, the other copy connects, the
  # creation fails on all four, and the job goes on.
  gives_up_case "a rank fails in one copy's connect: its copy-mate stops at once, the job goes on" 4 \
    "gloo_connect 0 group" "gives_up: rank 0: .* -> error: \[out of memory\] .*rank 1 of 4 gave up: " 1 GIVES_UP_RANK=1 GIVES_UP_GROUP=2
  # The last rank returns from main after initialize without finalize: the
  # others' next call (a subgroup's creation) fails at once naming it, and
  # their later calls say how the job ends without MPI (through the store,
  # not MPI_Abort).
  t0=$(date +%s)
  out=$(BARE_ARGS="- 0 exit" bare "$B/tests/faults/gives_up" 3 DIST_TIMEOUT=30 2>&1)
  rc=$? dt=$(($(date +%s) - t0))
  named=$(printf '%s\n' "$out" | grep -c "gives_up: rank [01]: dist_group_create_subgroup -> error: .*rank 2 of the group")
  store=$(printf '%s\n' "$out" | grep -c "gives_up: rank [01]: dist_manager_finalize -> error: .*tells the other ranks through the rendezvous store")
  abort=$(printf '%s\n' "$out" | grep -c "MPI_Abort")
  if [ $rc -eq 0 ] && [ "$named" -eq 2 ] && [ "$store" -eq 2 ] && [ "$abort" -eq 0 ] && [ $dt -lt 10 ]; then
    echo "ok   a rank exits without finalize: the 2 others fail at once naming it ($dt s)"
  else
    echo "FAIL a rank exits without finalize (exit $rc, $named of 2 named it, $store of 2 said the store ends the job, $abort MPI_Abort, $dt s)"
    printf '%s\n' "$out" | tail -8 | sed 's/^/     /'
    failures=$((failures + 1))
  fi
  # The manager on Gloo: the last rank dies after initialize; the others'
  # next collective fails, each with a message, within DIST_TIMEOUT.
  quit_case "a rank dies after initialize: the 3 others fail in their next collective" 20 \
    "(a peer process left or died)" DIST_TIMEOUT=5 TORCHRUN_COLL_QUIT=1
  # Remote calls: a worker dies after dist_rpc_init; each other rank's call to
  # it fails within DIST_TIMEOUT naming it, and calls among the living work.
  # Once with its endpoints unused (the first send fails), once used
  # (RPC_PEER_DIES_WARM: shared memory notices nothing, DIST_TIMEOUT ends it).
  for warm in 0 1; do
    t0=$(date +%s)
    if [ $warm = 1 ]; then out=$(bare "$B/tests/rpc_peer_dies" 4 DIST_TIMEOUT=3 RPC_PEER_DIES_WARM=1 2>&1)
    else out=$(bare "$B/tests/rpc_peer_dies" 4 DIST_TIMEOUT=3 2>&1); fi
    rc=$? dt=$(($(date +%s) - t0)) n=$(printf '%s\n' "$out" | grep -c "^survived: .*worker3")
    if [ $rc -eq 0 ] && [ "$n" -eq 3 ] && [ $dt -le 20 ]; then
      echo "ok   remote calls: a worker dies (endpoints used before: $warm); the 3 others' calls to it fail naming it, theirs go on ($dt s)"
    else
      echo "FAIL remote calls: a worker dies (endpoints used before: $warm; exit $rc, $n of 3 ranks survived, $dt s)"
      printf '%s\n' "$out" | tail -8 | sed 's/^/     /'
      failures=$((failures + 1))
    fi
  done
  # The same on two nodes of 2 (DIST_RANKS_PER_NODE), the calls in flight
  # when the worker dies serving them (RPC_PEER_DIES_IN_CALL): endpoints to
  # the other node detect a dead peer (UCX's error callback), so ranks 0 and 1
  # fail at once; rank 2, on the dead rank's node (shared memory), at
  # DIST_TIMEOUT.
  out=$(bare "$B/tests/rpc_peer_dies" 4 DIST_TIMEOUT=4 DIST_RANKS_PER_NODE=2 RPC_PEER_DIES_IN_CALL=1 2>&1)
  rc=$? fast=$(printf '%s\n' "$out" | grep -cE "^survived: rank [01], after [0-2] s: .*worker3")
  slow=$(printf '%s\n' "$out" | grep -cE "^survived: rank 2, after [3-9] s: .*worker3")
  if [ $rc -eq 0 ] && [ "$fast" -eq 2 ] && [ "$slow" -eq 1 ]; then
    echo "ok   remote calls: a worker dies in a call, 2 nodes of 2: the other node's ranks fail at once, its neighbour at DIST_TIMEOUT"
  else
    echo "FAIL remote calls: a worker dies in a call, 2 nodes of 2 (exit $rc, $fast of 2 fast, $slow of 1 at DIST_TIMEOUT)"
    printf '%s\n' "$out" | tail -8 | sed 's/^/     /'
    failures=$((failures + 1))
  fi
  # DASO on Gloo (private cross groups, bf16 sums kept 16-bit on the wire)
  # under two torchrun agents of 2 (torchrun's nodes): every epoch's loss as
  # under mpirun with 2 simulated nodes of 2, digit for digit.
  daso=$B/examples/train_daso
  port=$(free_port)
  for node in 0 1; do
    DIST_TIMEOUT=60 timeout -k 5 120 "$py" "$here/slurm/torchrun.py" --no_python --nnodes=2 --node_rank=$node \
      --master_addr=127.0.0.1 --master_port="$port" --nproc_per_node=2 "$daso" > daso.$node.$$ 2>&1 &
    eval "agent$node=\$!"
  done
  wait "$agent0"; rc0=$?; wait "$agent1"; rc1=$?
  timeout -k 5 120 ${LAUNCHER:-mpirun --oversubscribe --allow-run-as-root -n} 4 env DIST_RANKS_PER_NODE=2 "$daso" > daso.mpi.$$ 2>&1
  rcm=$?
  losses() { grep -ho "loss [0-9.e+-]*\|final loss [0-9.]*" "$@" | sort; }
  if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ $rcm -eq 0 ] && [ "$(losses daso.0.$$ daso.1.$$)" = "$(losses daso.mpi.$$)" ] &&
    grep -q "4 ranks on 2 nodes" daso.0.$$; then
    echo "ok   DASO under torchrun --nnodes=2 (Gloo): the losses of mpirun's run, $(losses daso.mpi.$$ | grep -c .) lines"
  else
    echo "FAIL DASO under torchrun --nnodes=2 (exit $rc0 $rc1, mpirun $rcm): losses differ from mpirun's or a run failed"
    tail -5 daso.0.$$ daso.1.$$ daso.mpi.$$ | sed 's/^/     /'
    failures=$((failures + 1))
  fi
  rm -f daso.0.$$ daso.1.$$ daso.mpi.$$
  # A PyTorch program and distmgr in the same processes, on torchrun's one
  # rendezvous (the agent's store): each all-reduces the other's result.
  # (Not in a sanitized build: an uninstrumented python3 cannot load it.)
  share=$B/tests/.libs/torch_share.so
  in_python=1
  if grep -q -- "-fsanitize" "$B/config.log" 2>/dev/null; then
    in_python=0 && echo "skip torch.distributed + distmgr in one process: a sanitized build"
  elif [ ! -f "$share" ]; then # --disable-shared, as the GPU pack's build: no module for ctypes
    in_python=0 && echo "skip torch.distributed + distmgr in one process: $share not built (--disable-shared)"
  fi
  [ $in_python -eq 1 ] && for n in 2 4; do
    expect "torch.distributed and distmgr sharing torchrun's rendezvous, $n processes" $n \
      env DIST_TIMEOUT=60 timeout -k 5 120 "$py" "$here/slurm/torchrun.py" --standalone --nproc_per_node=$n \
      "$here/torch_share.py" "$share"
  done
  # Without torchrun, PyTorch's rank 0 serves the store at MASTER_PORT
  # (init_process_group, env://): distmgr is told so and only connects.
  if [ $in_python -eq 1 ]; then
    BARE_ARGS="$here/torch_share.py $share" expect "torch.distributed and distmgr under a bare launcher, 3 processes (DIST_STORE_SERVER=external)" 3 \
      bare "$py" 3 DIST_STORE_SERVER=external DIST_STORE_DIALECT=1.13 DIST_TIMEOUT=30
    BARE_ARGS="$here/torch_share.py $share" refuse "torch.distributed and distmgr under a bare launcher, no DIST_STORE_SERVER: PyTorch holds the port" \
      "which DIST_STORE_SERVER=external makes distmgr use" 30 bare "$py" 2 DIST_TIMEOUT=5
  fi
else
  echo "skip Gloo: tests/torchrun_gloo not built (configure found no libgloo-dev)"
fi

port=$(free_port)
refuse "agent store claimed, nobody serving" "no store answered at 127.0.0.1 port $port" 10 \
  timeout -k 5 60 env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_USE_AGENT_STORE=True \
  NCCL_ASYNC_ERROR_HANDLING=1 DIST_TIMEOUT=2 "$prog"
refuse "rank 1 never arrives" "rank 1 did not arrive within 2 s" 15 \
  timeout -k 5 60 env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" DIST_TIMEOUT=2 "$prog"
# MASTER_PORT held by another process: a listening socket kept open by Python.
"$py" -c "
import socket, sys, time
s = socket.socket(); s.bind(('', 0)); s.listen(1); print(s.getsockname()[1], flush=True); time.sleep(30)" > port.$$ &
holder=$!
sleep 1
port=$(cat port.$$)
refuse "MASTER_PORT taken" "cannot listen on port $port" 10 \
  timeout -k 5 60 env RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DIST_TIMEOUT=2 "$prog"
kill $holder 2>/dev/null
rm -f port.$$
# torch 1.13's agent store spoken to as torch >= 2.2 (VALIDATE first): it resets
# the connection, and the error points at the dialect.
refuse "agent store of another dialect" "a TCPStore of another torch version" 30 \
  timeout -k 5 60 env DIST_STORE_DIALECT=2.2 DIST_TIMEOUT=2 "$py" "$here/slurm/torchrun.py" --no_python --standalone \
  --nproc_per_node=1 "$prog"

echo "torchrun: $failures failure(s)"
[ $failures -eq 0 ]
