#!/usr/bin/env python3
"""TensorFlow/Keras reference for `distrain bench`: the same model, batch, optimizer and threads.

Prints one JSON object with the median training-step throughput, measured the way
`distrain bench` measures (median over steps after warm-up; forward, backward, update),
on one synthetic in-memory batch (pixels 0..255 as float32, labels 0..9), as
bench/pytorch_reference.py does. The step is a compiled tf.function (graph mode, no XLA,
as model.fit runs on a CPU-only machine) with Keras 3 layers and Adam. Used only for
comparison figures (bench/compare_keras.sh), never by distrain itself.
"""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep stdout to the one JSON line


def seed_cnn(keras):
    # recipes/fashion_mnist_cnn.toml: the TensorFlow tutorial's CNN.
    L = keras.layers
    return keras.Sequential([
        keras.Input((28, 28, 1)), L.Rescaling(1 / 255),
        L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2),
        L.Flatten(), L.Dense(64, activation="relu"), L.Dense(10)])


def convnet(keras):
    # recipes/fashion_mnist_convnet.toml: the Keras distributed-training guide's net.
    L = keras.layers
    return keras.Sequential([
        keras.Input((28, 28, 1)), L.Rescaling(1 / 255),
        L.Conv2D(12, 3, padding="same", use_bias=False), L.BatchNormalization(center=True, scale=False), L.ReLU(),
        L.Conv2D(24, 6, strides=2, use_bias=False), L.BatchNormalization(center=True, scale=False), L.ReLU(),
        L.Conv2D(32, 6, padding="same", strides=2), L.BatchNormalization(center=True, scale=False), L.ReLU(),
        L.GlobalAveragePooling2D(), L.Dense(256, activation="relu"), L.Dropout(0.5), L.Dense(10)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["cnn", "convnet"], default="cnn")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import tensorflow as tf  # after the environment above; threads before any op runs
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    keras.utils.set_random_seed(0)
    model = seed_cnn(keras) if args.model == "cnn" else convnet(keras)
    # The recipes' learning-rate schedule (cosine decay for cnn) costs nothing per step: a constant rate.
    opt = keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-7)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    rng = tf.random.Generator.from_seed(0)
    x = tf.floor(rng.uniform((args.batch, 28, 28, 1), 0, 256))
    y = rng.uniform((args.batch,), 0, 10, dtype=tf.int32)

    @tf.function(jit_compile=False)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        train_step(x, y).numpy()  # waits for the step
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(json.dumps({"framework": f"tensorflow {tf.__version__}, keras {keras.__version__}", "model": args.model,
                      "batch": args.batch, "threads": args.threads, "images_per_sec": args.batch / med,
                      "step_ms": {"min": min(times) * 1e3, "median": med * 1e3, "max": max(times) * 1e3}}))


if __name__ == "__main__":
    main()
