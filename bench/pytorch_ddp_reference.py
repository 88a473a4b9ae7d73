#!/usr/bin/env python3
"""PyTorch DDP (gloo) reference for `distrain bench --strategy multi_worker_mirrored`.

Weak scaling of the default CNN: each of N processes trains on its own batch of
--batch examples, gradients all-reduced by DDP over gloo; the threads of the machine are
split between the processes as distrain splits them. Prints one JSON line per N.
For comparison figures only; never used by distrain.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

from pytorch_reference import seed_cnn


def worker(rank, world, args, out):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + world))
    torch.set_num_threads(args.threads_each or max(1, args.threads // world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(seed_cnn())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(args.batch, 1, 28, 28) * 255
    y = torch.randint(0, 10, (args.batch,))
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    if rank == 0:
        out.put(statistics.median(times))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", default="1,2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="threads of the machine, split between the processes")
    ap.add_argument("--threads-each", type=int, default=0, help="threads per process instead (weak scaling of threads too)")
    args = ap.parse_args()
    base = None
    for world in [int(n) for n in args.replicas.split(",")]:
        out = mp.get_context("spawn").SimpleQueue()
        mp.start_processes(worker, args=(world, args, out), nprocs=world, start_method="spawn")
        med = out.get()
        ips = world * args.batch / med
        base = base or ips
        print(json.dumps({"framework": f"pytorch {torch.__version__} DDP gloo", "replicas": world,
                          "global_batch": world * args.batch, "images_per_sec": round(ips, 1),
                          "efficiency": round(ips / (world * base), 4), "step_ms": round(med * 1e3, 3)}))


if __name__ == "__main__":
    main()
