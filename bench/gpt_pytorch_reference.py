#!/usr/bin/env python3
"""PyTorch reference for `distrain bench` on the GPTs of recipes/gpt2_124m.toml and
recipes/shakespeare_char_gpt.toml, and the Llama of recipes/llama_shakespeare.toml: the same
model, batch, AdamW and threads, eager mode.

GPT-2 as nanoGPT writes it: pre-LayerNorm blocks (ln_1, causal attention with one C->3C
projection and a C->C output projection, residual add, ln_2, C->4C, GELU tanh form, 4C->C,
residual add), final ln_f, head tied to the token table, no dropout, LayerNorm eps 1e-5.
GPT-2 initialisation: N(0, 0.02) everywhere, N(0, 0.02/sqrt(2 layers)) on the two residual
projections, zero biases. Random tokens, one batch in memory.

The Llama as transformers' LlamaForCausalLM computes it: RMSNorm (eps 1e-6), grouped-query
attention (scaled_dot_product_attention with enable_gqa) with rotary positions (rotate half,
theta 10000), a SwiGLU MLP, no biases, an untied head; the same initialisation.

--precision bf16 runs forward and loss under torch.autocast(device, torch.bfloat16): matrix
products in bf16, master weights and AdamW in float32 (distrain's train.precision = "bf16").
--device cuda runs on the GPU (TF32 off, fused AdamW, the step timed to its end on the GPU);
--compile wraps the model in torch.compile (default mode; its compilation is in warm-up).

Prints one JSON line with the median step time (forward, backward, AdamW step, after
warm-up), tokens/s and the parameter count. With --sgemm-peak, prints this machine's fp32
matmul rate at the given threads instead (torch's BLAS and, if installed, NumPy's). For comparison figures only
(bench/compare_gpt.sh); llmc_files.py imports SIZES and GPT from here.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# vocab, layers, heads, width, position rows, sequence, batch: as the recipes have them.
SIZES = {
    "gpt2_124m": dict(vocab=50257, layers=12, heads=12, width=768, max_len=1024, seq=64, batch=4),
    "shakespeare_char": dict(vocab=65, layers=4, heads=4, width=128, max_len=64, seq=64, batch=12),
    "llama_shakespeare": dict(vocab=65, layers=4, heads=4, kv_heads=2, width=128, ffn=384, seq=64, batch=12),
}


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.qkv = nn.Linear(width, 3 * width)
        self.attn_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, layers, heads, width, max_len, **_):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(max_len, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied: one table
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, width, heads, kv_heads, ffn, seq):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, width // heads
        self.input_layernorm = nn.RMSNorm(width, eps=1e-6)
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * self.d, bias=False)
        self.o_proj = nn.Linear(width, width, bias=False)
        self.post_attention_layernorm = nn.RMSNorm(width, eps=1e-6)
        self.gate_proj = nn.Linear(width, ffn, bias=False)
        self.up_proj = nn.Linear(width, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, width, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, self.heads, self.d).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.kv_heads, self.d).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.kv_heads, self.d).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, C))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, vocab, layers, heads, kv_heads, width, ffn, seq, **_):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(LlamaBlock(width, heads, kv_heads, ffn, seq) for _ in range(layers))
        self.norm = nn.RMSNorm(width, eps=1e-6)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        d = width // heads
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(seq).float(), inv)
        self.register_buffer("cos", torch.cat((angles, angles), dim=-1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat((angles, angles), dim=-1).sin(), persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        x = self.embed_tokens(idx)
        T = idx.shape[1]
        for block in self.layers:
            x = block(x, self.cos[:T], self.sin[:T])
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def best_seconds(f, repeats):
    f()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def sgemm_peak(n=4096, repeats=5):
    # Best of several large square fp32 products on these threads: torch's BLAS (MKL, which
    # on AMD processors may keep to its AVX2 kernels) and NumPy's (OpenBLAS) when NumPy is
    # there (its threads: OMP_NUM_THREADS or OPENBLAS_NUM_THREADS, read when it loads); the
    # peak is the faster of the two.
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = {"n": n, "threads": torch.get_num_threads(), "torch": torch.__version__,
           "torch_gflops": 2 * n ** 3 / best_seconds(lambda: torch.mm(a, b), repeats) / 1e9}
    try:
        import numpy as np
        x, y = a.numpy(), b.numpy()
        out["numpy"] = np.__version__
        out["numpy_gflops"] = 2 * n ** 3 / best_seconds(lambda: x @ y, repeats) / 1e9
    except ImportError:
        pass
    out["gflops"] = max(out["torch_gflops"], out.get("numpy_gflops", 0.0))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=sorted(SIZES), default="gpt2_124m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, help="examples a step (default: the size's)")
    ap.add_argument("--seq", type=int, help="tokens a window (default: the size's)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--precision", choices=["float32", "bf16"], default="float32",
                    help="bf16: torch.autocast(cpu, bfloat16) around forward and loss, as distrain's train.precision")
    ap.add_argument("--sgemm-peak", action="store_true", help="print the fp32 matmul rate and exit")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.sgemm_peak:
        print(json.dumps(sgemm_peak()))
        return
    torch.manual_seed(0)
    cfg = SIZES[args.size]
    batch, seq = args.batch or cfg["batch"], args.seq or cfg["seq"]
    dev = torch.device(args.device)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    model = (Llama(**cfg) if "kv_heads" in cfg else GPT(**cfg)).to(dev)
    run = torch.compile(model) if args.compile else model
    # Weight decay on the 2-D matrices only (the tables and kernels), as nanoGPT.
    params = list(model.parameters())  # the tied table once
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), **({"fused": True} if args.device == "cuda" else {}))
    x = torch.randint(0, cfg["vocab"], (batch, seq), device=dev)
    y = torch.randint(0, cfg["vocab"], (batch, seq), device=dev)
    times, first_loss = [], None
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = run(x, y)
        loss.backward()
        opt.step()
        if args.device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if first_loss is None:
            first_loss = loss.item()
        if step >= args.warmup:
            times.append(dt)
    med = statistics.median(times)
    framework = f"pytorch {torch.__version__}" + (" compile" if args.compile else " eager")
    print(json.dumps({"framework": framework, "device": args.device, "size": args.size, "batch": batch,
                      "seq": seq, "threads": args.threads, "precision": args.precision, "parameters": sum(p.numel() for p in params),
                      "tokens_per_sec": batch * seq / med, "first_loss": first_loss,
                      "step_ms": {"min": min(times) * 1e3, "median": med * 1e3, "max": max(times) * 1e3},
                      "step_ms_median": med * 1e3, "steps": args.steps, "warmup": args.warmup}))


if __name__ == "__main__":
    main()
