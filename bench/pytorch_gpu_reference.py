#!/usr/bin/env python3
"""PyTorch reference for `distrain bench` on a GPU: the default CNN, Adam, one GPU,
in eager mode and under torch.compile(mode="reduce-overhead") (CUDA graphs).

Prints one JSON object per mode with the median training-step throughput, measured as
`distrain bench` measures: median over steps after warm-up, each step forward, backward
and update, finished on the GPU (synchronised) before the clock stops. The data sit on
the GPU already, as distrain's do. Used only for figures in docs/BENCHMARKS.md.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn


def seed_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 5 * 5, 64), nn.ReLU(), nn.Linear(64, 10))


def run(mode, batch, steps, warmup):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = seed_cnn().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7, fused=(mode != "eager"))
    loss_fn = nn.CrossEntropyLoss()
    x = (torch.rand(batch, 1, 28, 28, device=dev) * 255).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if mode == "compile":
        model = torch.compile(model, mode="reduce-overhead")
    times = []
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return {"framework": f"pytorch {torch.__version__} {mode}", "device": torch.cuda.get_device_name(), "batch": batch,
            "tf32": torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32,
            "images_per_sec": batch / med, "step_ms": {"min": min(times) * 1e3, "median": med * 1e3, "max": max(times) * 1e3}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--modes", default="eager,compile")
    args = ap.parse_args()
    # float32 without TF32, as distrain's default (train.allow_tf32 = false).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    for mode in args.modes.split(","):
        print(json.dumps(run(mode, args.batch, args.steps, args.warmup)), flush=True)


if __name__ == "__main__":
    main()
