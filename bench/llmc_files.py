#!/usr/bin/env python3
"""Writes the files llm.c's CPU reference (train_gpt2.c) reads, for bench/compare_gpt.sh:

  DIR/gpt2_124M.bin                                      the model: a 256-int32 header
      (20240326, version 3, maxT, V, L, NH, C, Vp), then the float32 parameters in
      llm.c's order (fill_in_parameter_sizes): wte (Vp, C), wpe (maxT, C), then each
      per-layer tensor for all L layers at once, ln1w, ln1b, qkvw (3C, C), qkvb,
      attprojw (C, C), attprojb, ln2w, ln2b, fcw (4C, C), fcb, fcprojw (C, 4C), fcprojb,
      and lnfw, lnfb. Weights as PyTorch's nn.Linear stores them, (out, in).
  DIR/dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin   random tokens in [0, V):
      a 256-int32 header (20240520, version 1, count), then uint16 tokens.

The weights are bench/gpt_pytorch_reference.py's model at its GPT-2 initialisation (same
seed), the vocabulary padded to a multiple of 128 rows with zeros as llm.c's
train_gpt2.py writes it. Whatever the size, the file keeps llm.c's name gpt2_124M.bin,
which train_gpt2.c opens. Prints one JSON line: the counts compare_gpt.sh checks against.
No tokenizer file: train_gpt2 goes on without one (it only decodes generated samples).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_pytorch_reference import GPT, SIZES  # noqa: E402

TRAIN_TOKENS = (1 << 20) + 1  # many batches for any B: the batch count tells B*T back
VAL_TOKENS = (1 << 16) + 1


def header(*values):
    return struct.pack("<256i", *values, *([0] * (256 - len(values))))


def write_tokens(path, count, vocab, rng):
    with open(path, "wb") as f:
        f.write(header(20240520, 1, count))
        f.write(rng.integers(0, vocab, size=count, dtype=np.uint16).astype("<u2").tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=sorted(SIZES), required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    cfg = SIZES[args.size]
    V, L, NH, C, maxT = cfg["vocab"], cfg["layers"], cfg["heads"], cfg["width"], cfg["max_len"]
    Vp = (V + 127) // 128 * 128
    torch.manual_seed(0)
    model = GPT(**cfg)
    h = model.h
    wte = torch.zeros(Vp, C)
    wte[:V] = model.wte.weight.detach()
    tensors = [wte, model.wpe.weight,
               *[torch.stack([getattr(b, m).weight if w else getattr(b, m).bias for b in h])
                 for m, w in (("ln_1", 1), ("ln_1", 0), ("qkv", 1), ("qkv", 0), ("attn_proj", 1),
                              ("attn_proj", 0), ("ln_2", 1), ("ln_2", 0), ("fc", 1), ("fc", 0),
                              ("mlp_proj", 1), ("mlp_proj", 0))],
               model.ln_f.weight, model.ln_f.bias]
    expected = [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
                (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]
    assert [tuple(t.shape) for t in tensors] == expected, [tuple(t.shape) for t in tensors]
    os.makedirs(os.path.join(args.dir, "dev/data/tinyshakespeare"), exist_ok=True)
    count = 0
    with open(os.path.join(args.dir, "gpt2_124M.bin"), "wb") as f:
        f.write(header(20240326, 3, maxT, V, L, NH, C, Vp))
        for t in tensors:
            a = t.detach().to(torch.float32).contiguous().numpy().astype("<f4")
            f.write(a.tobytes())
            count += a.size
    rng = np.random.default_rng(0)
    base = os.path.join(args.dir, "dev/data/tinyshakespeare/tiny_shakespeare")
    write_tokens(base + "_train.bin", TRAIN_TOKENS, V, rng)
    write_tokens(base + "_val.bin", VAL_TOKENS, V, rng)
    print(json.dumps({"size": args.size, "llmc_parameters": count, "padded_vocab": Vp,
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "train_tokens": TRAIN_TOKENS, "val_tokens": VAL_TOKENS}))


if __name__ == "__main__":
    main()
