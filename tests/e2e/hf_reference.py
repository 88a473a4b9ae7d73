"""transformers' side of tests/e2e/hf_test.sh (reference only: distrain never needs Python).

  make DIR ARCH DTYPE TEXT  a tiny random model of ARCH (gpt2, llama, llama_tied, qwen2,
                        mistral) saved by save_pretrained in DTYPE (float32, bfloat16) with a
                        byte-level BPE tokenizer.json of its 300 tokens (<|endoftext|> id 0);
                        DIR/ids.npy (token
                        windows) and DIR/logits.npy, the saved model's float32 logits on them
  bad DIR               broken copies of DIR's model.safetensors: DIR.<case>/
  zero_head DIR OUT     DIR with every logit 0 (lm_head zeroed): greedy decoding picks id 0
  logits REF GOT        max |REF - GOT| over the largest |REF| (NPY files)
  same_tensors A B      every tensor of folder B equals folder A's, same dtype, bit for bit
  load DIR IDS          DIR loaded by from_pretrained; its logits on IDS to DIR/logits.npy
  adamw DIR TEXT B T GOT  one AdamW step (lr 1e-3, betas 0.9/0.99, eps 1e-2, no decay) of
                        DIR's model on the first B windows of T tokens of TEXT's training
                        split (DIR's tokenizer, 10% held out at the end), shuffle off, as
                        distrain takes them; prints max |step - GOT's tensors| over the
                        largest weight (GOT: distrain's step, exported to a folder)
"""
import glob
import json
import os
import shutil
import sys

import numpy as np
import tokenizers
import torch
import transformers
from safetensors.torch import load_file

torch.manual_seed(0)


VOCAB = 300


def config(arch):
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=64, rms_norm_eps=1e-5)
    if arch == "gpt2":
        return transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                       resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    if arch == "llama":
        return transformers.LlamaConfig(num_key_value_heads=2, rope_theta=500.0, tie_word_embeddings=False, **common)
    if arch == "llama_tied":
        return transformers.LlamaConfig(num_key_value_heads=1, tie_word_embeddings=True,
                                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0,
                                                      "original_max_position_embeddings": 16}, **common)
    if arch == "qwen2":
        return transformers.Qwen2Config(num_key_value_heads=2, tie_word_embeddings=False, **common)
    if arch == "mistral":
        return transformers.MistralConfig(num_key_value_heads=2, sliding_window=None, **common)
    raise SystemExit(f"unknown architecture {arch}")


def model_logits(model, ids):
    with torch.no_grad():
        return model(torch.from_numpy(ids).long()).logits.float().numpy()


def make(folder, arch, dtype):
    model = transformers.AutoModelForCausalLM.from_config(config(arch))
    with torch.no_grad():  # larger than the 0.02 initialisation, so every weight matters
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    model.to(getattr(torch, dtype)).save_pretrained(folder, safe_serialization=True)
    tokenizer = tokenizers.ByteLevelBPETokenizer()
    tokenizer.train_from_iterator([open(sys.argv[5]).read()], vocab_size=VOCAB, show_progress=False,
                                  special_tokens=["<|endoftext|>"])
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    ids = np.random.default_rng(1).integers(0, VOCAB, size=(3, 16)).astype(np.int64)
    np.save(os.path.join(folder, "ids.npy"), ids)
    # From the saved files: a model cast in memory keeps its rotary frequencies rounded.
    saved = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    np.save(os.path.join(folder, "logits.npy"), model_logits(saved, ids))


def bad(folder):
    """Each case a folder of its own with config.json and one broken model.safetensors."""
    good = open(os.path.join(folder, "model.safetensors"), "rb").read()
    n = int.from_bytes(good[:8], "little")
    header = json.loads(good[8:8 + n])
    data = good[8 + n:]
    name = sorted(k for k in header if k != "__metadata__")[0]

    def write(case, blob):
        os.makedirs(f"{folder}.{case}", exist_ok=True)
        shutil.copy(os.path.join(folder, "config.json"), f"{folder}.{case}/config.json")
        open(f"{folder}.{case}/model.safetensors", "wb").write(blob)

    def with_header(h, more=b""):
        text = json.dumps(h).encode()
        return len(text).to_bytes(8, "little") + text + data + more

    write("truncated", good[:len(good) // 2])
    write("huge_header", (10 ** 12).to_bytes(8, "little") + good[8:])
    lying = json.loads(json.dumps(header))
    lying[name]["data_offsets"][1] += 4
    write("lying_offsets", with_header(lying))
    far = json.loads(json.dumps(header))
    far[name]["data_offsets"] = [len(data) - 4, len(data) + 4096]
    write("past_the_end", with_header(far))
    odd = json.loads(json.dumps(header))
    odd[name]["dtype"] = "F8_E4M3"
    write("unknown_dtype", with_header(odd))
    extra = json.loads(json.dumps(header))
    begin, end = header[name]["data_offsets"]
    extra["model.layers.0.mystery.weight"] = dict(header[name], data_offsets=[len(data), len(data) + end - begin])
    write("unknown_tensor", with_header(extra, data[begin:end]))
    missing = {k: v for k, v in header.items() if k != name}
    write("missing_tensor", with_header(missing))
    write("not_json", (5).to_bytes(8, "little") + b"{nope" + data)


def tensors(folder):
    out = {}
    for f in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        out.update(load_file(f))
    return out


def main():
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "bad":
        bad(sys.argv[2])
    elif cmd == "zero_head":
        model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32)
        with torch.no_grad():
            model.lm_head.weight.zero_()
        model.save_pretrained(sys.argv[3], safe_serialization=True)
        shutil.copy(os.path.join(sys.argv[2], "tokenizer.json"), sys.argv[3])
    elif cmd == "logits":
        ref, got = np.load(sys.argv[2]), np.load(sys.argv[3])
        assert ref.shape == got.shape, (ref.shape, got.shape)
        print(f"{np.abs(ref - got).max() / np.abs(ref).max():.3e}")
    elif cmd == "same_tensors":
        a, b = tensors(sys.argv[2]), tensors(sys.argv[3])
        tied = {"lm_head.weight"} if "lm_head.weight" not in b else set()
        missing = sorted(set(a) - set(b) - tied)
        extra = sorted(set(b) - set(a))
        differ = [k for k in sorted(set(a) & set(b)) if a[k].dtype != b[k].dtype or not torch.equal(a[k], b[k])]
        print(f"{len(a)} tensors: {len(missing)} missing {missing[:3]}, {len(extra)} extra {extra[:3]}, "
              f"{len(differ)} differ {differ[:3]}")
        sys.exit(1 if missing or extra or differ else 0)
    elif cmd == "adamw":
        folder, text, b, t, got = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
        ids = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(open(text).read()).ids
        train = ids[:int(len(ids) * (1 - 0.1))]
        x = torch.tensor([train[k * t:k * t + t] for k in range(b)])
        y = torch.tensor([train[k * t + 1:k * t + t + 1] for k in range(b)])
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        model.train()
        # distrain's Adam is Keras's: epsilon joins sqrt(v) before the bias correction, so
        # its 1e-3 is PyTorch's 1e-3 / sqrt(1 - 0.99^t), 1e-2 at the first step.
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), eps=1e-2, weight_decay=0.0)
        logits = model(x).logits
        torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
        opt.step()
        want = model.state_dict()
        theirs = tensors(got)
        largest = max(v.abs().max().item() for v in want.values())
        diff = max((want[k] - theirs[k].float()).abs().max().item() for k in theirs)
        moved = max((want[k] - v.float()).abs().max().item() for k, v in tensors(folder).items())
        print(f"{diff / largest:.3e} (the step moved weights by up to {moved:.1e})")
    elif cmd == "load":
        model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32).eval()
        np.save(os.path.join(sys.argv[2], "logits.npy"), model_logits(model, np.load(sys.argv[3])))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
