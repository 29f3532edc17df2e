"""bench/gloo_torch.py: torch.distributed's Gloo all-reduce, timed as bench/gloo
times distmgr's: the same sizes, ~20 ms blocks, the median over rounds of the
slowest rank's time per call. Prints "init_s T" and "OP BYTES US" lines. Run
under torchrun by bench/collectives (torch 1.13 has no Gloo all-to-all-v).

--init-only (bench/init): start-up alone, the same work as bench/init's
distmgr worker: init_process_group("gloo") plus the groups of its tree
world -> {tp 2, dp N/2} (new_group, called by every rank for every group).
Prints "total_us=T groups_us=G", the slowest rank's. The ranks first wait for
each other through files (one node), so that one rank's slower `import torch`
does not count as the others' init time (distmgr's C workers start within
milliseconds of each other)."""
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

init_only = "--init-only" in sys.argv
argv = [a for a in sys.argv[1:] if a != "--init-only"]
args = dict(zip(argv[0::2], argv[1::2]))
min_bytes = int(args.get("--min-bytes", 4096))
max_bytes = int(args.get("--max-bytes", 4 << 20))
rounds = int(args.get("--rounds", 5))


def align():
    """Return once every rank of this one-node run got here: a file per rank."""
    d = os.path.join(tempfile.gettempdir(), "gloo_torch.%s" % os.environ["TORCHELASTIC_RUN_ID"])
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, os.environ["RANK"]), "w").close()
    while len(os.listdir(d)) < int(os.environ["WORLD_SIZE"]):
        time.sleep(0.001)
    return d


if init_only:
    aligned = align()
t0 = time.perf_counter()
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()


def slowest(t):
    x = torch.tensor([t], dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return x.item()


if init_only:
    t1 = time.perf_counter()
    k = 2 if size % 2 == 0 else 1
    for g in range(size // k):  # tp: ranks g*k .. g*k+k-1
        dist.new_group(list(range(g * k, g * k + k)))
    for g in range(k):  # dp: ranks g, g+k, ...
        dist.new_group(list(range(g, size, k)))
    t2 = time.perf_counter()
    x = torch.tensor([t2 - t0, t2 - t1], dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)  # every rank is past align() now
    if rank == 0:
        shutil.rmtree(aligned, ignore_errors=True)
        print("total_us=%.1f groups_us=%.1f" % (x[0].item() * 1e6, x[1].item() * 1e6), flush=True)
    dist.destroy_process_group()
    sys.exit(0)

init = slowest(time.perf_counter() - t0)
if rank == 0:
    print("init_s %.4f" % init, flush=True)


def time_op(fn):
    for _ in range(3):
        fn()
    t = time.perf_counter()
    fn()
    one = slowest(time.perf_counter() - t)
    n = torch.tensor([max(1, min(100000, int(0.02 / one) if one > 0 else 1000))])
    dist.broadcast(n, 0)
    n = int(n.item())
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        times.append(slowest(time.perf_counter() - t) / n)
    return statistics.median(times) * 1e6


b = min_bytes
while b <= max_bytes:
    a = torch.arange(b // 4, dtype=torch.float32) % 7
    us = time_op(lambda: dist.all_reduce(a))
    if rank == 0:
        print("all_reduce %d %.2f" % (b, us), flush=True)
    b *= 4
dist.destroy_process_group()
