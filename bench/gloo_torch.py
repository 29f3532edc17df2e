"""bench/gloo_torch.py: torch.distributed's Gloo all-reduce (and all-to-all-v
where this torch has it for Gloo), timed as bench/gloo times distmgr's: the
same sizes, ~20 ms blocks, the median over rounds of the slowest rank's time
per call. Run under torchrun by bench/gloo.sh. Prints "init_s T" and "OP BYTES US"."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
min_bytes = int(args.get("--min-bytes", 4096))
max_bytes = int(args.get("--max-bytes", 4 << 20))
rounds = int(args.get("--rounds", 5))

t0 = time.perf_counter()
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()


def slowest(t):
    x = torch.tensor([t], dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return x.item()


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
