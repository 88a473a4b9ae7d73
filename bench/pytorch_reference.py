#!/usr/bin/env python3
"""PyTorch reference for `distrain bench`: the same model, batch, optimizer and threads.

Prints one JSON object with the median training-step throughput, measured the way
`distrain bench` measures (median over steps after warm-up; forward, backward, update).
Used only for comparison figures in docs/BENCHMARKS.md, never by distrain itself.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn


def seed_cnn():
    # The TensorFlow tutorial CNN of recipes/fashion_mnist_cnn.toml, channels-last input.
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 5 * 5, 64), nn.ReLU(), nn.Linear(64, 10))


def convnet():
    # The Keras guide's net of recipes/fashion_mnist_convnet.toml.
    return nn.Sequential(
        nn.Conv2d(1, 12, 3, padding="same", bias=False), nn.BatchNorm2d(12, momentum=0.01, eps=1e-3, affine=True), nn.ReLU(),
        nn.Conv2d(12, 24, 6, stride=2, bias=False), nn.BatchNorm2d(24, momentum=0.01, eps=1e-3), nn.ReLU(),
        nn.Conv2d(24, 32, 6, stride=2, padding=2), nn.BatchNorm2d(32, momentum=0.01, eps=1e-3), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["cnn", "convnet"], default="cnn")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--channels-last", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = seed_cnn() if args.model == "cnn" else convnet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(args.batch, 1, 28, 28) * 255
    y = torch.randint(0, 10, (args.batch,))
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(json.dumps({"framework": f"pytorch {torch.__version__}", "model": args.model, "batch": args.batch,
                      "threads": args.threads, "images_per_sec": args.batch / med,
                      "step_ms": {"min": min(times) * 1e3, "median": med * 1e3, "max": max(times) * 1e3}}))


if __name__ == "__main__":
    main()
