#!/usr/bin/env python3
"""JAX reference for `distrain bench` on a GPU: the default CNN and Adam under jax.jit.

The model is written in plain JAX (lax convolutions, reduce_window pooling) and optax's
Adam, so it depends on no layer library's API. float32 without TF32
(jax_default_matmul_precision = "highest"). Prints one JSON object per batch size with the
median step throughput, measured as `distrain bench` measures: median over steps after
warm-up, each step forward, backward and update, finished on the GPU (block_until_ready)
before the clock stops. The data sit on the GPU already. Used only for docs/BENCHMARKS.md.
"""
import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import optax

jax.config.update("jax_default_matmul_precision", "highest")


def glorot(key, shape, fan_in, fan_out):
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    return jax.random.uniform(key, shape, jnp.float32, -limit, limit)


def init_cnn(key):
    k = jax.random.split(key, 4)
    return {
        "c1": (glorot(k[0], (3, 3, 1, 32), 9, 9 * 32), jnp.zeros(32)),
        "c2": (glorot(k[1], (3, 3, 32, 64), 9 * 32, 9 * 64), jnp.zeros(64)),
        "d1": (glorot(k[2], (1600, 64), 1600, 64), jnp.zeros(64)),
        "d2": (glorot(k[3], (64, 10), 64, 10), jnp.zeros(10)),
    }


def conv_relu_pool(x, w, b):
    y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y + b)
    return jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def logits_of(params, images):
    x = images.astype(jnp.float32) / 255.0
    x = conv_relu_pool(x, *params["c1"])
    x = conv_relu_pool(x, *params["c2"])
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.relu(x @ params["d1"][0] + params["d1"][1])
    return x @ params["d2"][0] + params["d2"][1]


def loss_of(params, images, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits_of(params, images), labels).mean()


def run(batch, steps, warmup):
    key = jax.random.PRNGKey(0)
    params = init_cnn(key)
    opt = optax.adam(1e-3, eps=1e-7)
    state = opt.init(params)
    images = jax.random.randint(key, (batch, 28, 28, 1), 0, 256).astype(jnp.uint8)
    labels = jax.random.randint(key, (batch,), 0, 10)

    @jax.jit
    def step(params, state, images, labels):
        loss, grads = jax.value_and_grad(loss_of)(params, images, labels)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        params, state, loss = step(params, state, images, labels)
        loss.block_until_ready()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return {"framework": f"jax {jax.__version__} jit", "device": str(jax.devices()[0].device_kind), "batch": batch,
            "tf32": False, "images_per_sec": batch / med,
            "step_ms": {"min": min(times) * 1e3, "median": med * 1e3, "max": max(times) * 1e3}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="+", default=[64])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    args = ap.parse_args()
    for batch in args.batch:
        print(json.dumps(run(batch, args.steps, args.warmup)), flush=True)


if __name__ == "__main__":
    main()
