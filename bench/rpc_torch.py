"""bench/rpc_torch.py: torch.distributed.rpc.rpc_sync round trips (TensorPipe),
timed as bench/rpc times distmgr's dist_rpc_call_sync: worker0 calls
rpc_sync("worker1", echo, (x,)) with a uint8 tensor x of N bytes, and echo
returns its argument. Two processes on this machine (torch.multiprocessing,
spawn), rendezvous over 127.0.0.1 on a free port. Sizes as bench/rpc's up to
--max-bytes; each answer is checked once per size, then --rounds blocks of
~--block-seconds each. Prints "BYTES US" per size: the median over blocks of
microseconds per round trip. Run by bench/rpc (the driver, not its MPI job)."""
import os
import socket
import statistics
import sys

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def echo(x):
    return x


def run(rank, port, max_bytes, rounds, block_s):
    import time

    torch.set_num_threads(1)
    opts = rpc.TensorPipeRpcBackendOptions(init_method="tcp://127.0.0.1:%d" % port, rpc_timeout=600)
    rpc.init_rpc("worker%d" % rank, rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        for b in SIZES:
            if b > max_bytes:
                break
            x = (torch.arange(b, dtype=torch.int32) % 251).to(torch.uint8)
            y = rpc.rpc_sync("worker1", echo, args=(x,))
            if not torch.equal(x, y):
                raise SystemExit("bench/rpc_torch.py: the echo of %d bytes differs from what was sent" % b)
            for _ in range(3):
                rpc.rpc_sync("worker1", echo, args=(x,))
            calib = 1 if b >= 16 << 20 else 4 if b >= 1 << 20 else 50
            t = time.perf_counter()
            for _ in range(calib):
                rpc.rpc_sync("worker1", echo, args=(x,))
            one = (time.perf_counter() - t) / calib
            n = max(1, min(200000, int(block_s / one) + 1))
            times = []
            for _ in range(rounds):
                t = time.perf_counter()
                for _ in range(n):
                    rpc.rpc_sync("worker1", echo, args=(x,))
                times.append((time.perf_counter() - t) / n)
            print("%d %.4f" % (b, statistics.median(times) * 1e6), flush=True)
    rpc.shutdown()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    max_bytes = int(args.get("--max-bytes", 64 << 20))
    rounds = int(args.get("--rounds", 9))
    block_s = float(args.get("--block-seconds", 0.02))
    os.environ.setdefault("TP_SOCKET_IFNAME", "lo")  # TensorPipe's uv transport: the loopback, as the store
    mp.spawn(run, args=(free_port(), max_bytes, rounds, block_s), nprocs=2, join=True)
