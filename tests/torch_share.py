#!/usr/bin/python3
"""A PyTorch program and distmgr sharing one torchrun rendezvous.

Run under torchrun (tests/torchrun.sh): torch.distributed joins with env://
(the agent's store at MASTER_ADDR:MASTER_PORT), then distmgr initializes in
the same process through tests/torch_share.c (ctypes), on the same store.
Each side all-reduces the other's result; the sums must agree exactly, and
torch must still work after distmgr has come and gone. Prints one
"torch_share: rank R ok" line per rank; exit 1 on any mismatch.
"""
import ctypes
import os
import sys

import torch
import torch.distributed as dist


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.share_error.restype = ctypes.c_char_p
    lib.share_engine.restype = ctypes.c_char_p
    lib.share_all_reduce.argtypes = [ctypes.c_void_p, ctypes.c_longlong]

    def check(status, what):
        if status != 0:
            raise SystemExit(f"torch_share: {what}: status {status}: {lib.share_error().decode()}")

    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    check(lib.share_initialize(), "dist_manager_initialize")
    ranks = (ctypes.c_int * 2)()
    check(lib.share_ranks(ranks), "ranks")
    if (ranks[0], ranks[1]) != (rank, size):
        raise SystemExit(f"torch_share: distmgr says rank {ranks[0]} of {ranks[1]}, torch {rank} of {size}")
    engine = lib.share_engine().decode()
    # Without MPI: shared memory on one node (DIST_SHM_DATA=auto, the default), else Gloo.
    want = "gloo" if os.environ.get("DIST_SHM_DATA", "auto").lower() == "off" else "shm"
    if size > 1 and engine != want:
        raise SystemExit(f"torch_share: distmgr's host engine is {engine}, expected {want}")

    n = 1000
    x = torch.arange(n, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(x)  # torch: sum over ranks
    y = x.clone()
    check(lib.share_all_reduce(y.data_ptr(), n), "dist_all_reduce")  # distmgr: sum again
    want = torch.arange(n, dtype=torch.float32) * (size * (size + 1) // 2) * size
    z = y.clone()
    check(lib.share_finalize(), "dist_manager_finalize")
    dist.all_reduce(z, op=dist.ReduceOp.MAX)  # torch after distmgr finalized
    if not torch.equal(y, want) or not torch.equal(z, want):
        raise SystemExit(f"torch_share: rank {rank}: sums differ (max error {float((y - want).abs().max())})")
    dist.destroy_process_group()
    # one write: the ranks share torchrun's stdout
    os.write(1, f"torch_share: rank {rank} of {size} ok (distmgr on {engine})\n".encode())


if __name__ == "__main__":
    main()
