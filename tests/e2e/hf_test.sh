#!/usr/bin/env bash
# Hugging Face models in and out, checked by transformers itself: hf_test.sh DISTRAIN SOURCE_DIR
#   - tiny random GPT-2, Llama (grouped-query, untied), Llama (multi-query, tied head, Llama 3
#     rope scaling), Qwen2 (q/k/v biases) and Mistral, saved by save_pretrained: distrain
#     import, then `distrain predict`'s logits on token windows against transformers' within
#     1e-4 of the largest logit;
#   - import then export --format hf: every tensor bitwise the original, same dtype (float32,
#     and bfloat16 written as shards and read back through the index); transformers loads the
#     export with from_pretrained and its logits equal distrain's;
#   - a fine-tune from the import (checkpoint.init_from, 3 steps, 2 replicas) exported and
#     loaded by transformers, its logits distrain's within 1e-4;
#   - one AdamW step from each imported architecture against PyTorch's AdamW on
#     transformers' model: the weights within 1e-5 of the largest;
#   - generate ending at the tokenizer's <|endoftext|>, as ids and as text;
#   - broken safetensors files and folders: one line naming the file and the key, exit 2,
#     nothing written.
# The reference is transformers on torch in a virtual environment, $DISTRAIN_HF_VENV
# (default /tmp/distrain_hf_venv; reference only: distrain never needs Python). torch from
# PyPI is several GB (its CUDA libraries), so the test makes that environment only when
# DISTRAIN_FETCH_TORCH=1; otherwise, and without PyPI, it prints "[skipped] why" and exits
# 77 (ctest: skipped).
set -u
distrain=$1
src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_e2e_hf.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2
venv=${DISTRAIN_HF_VENV:-/tmp/distrain_hf_venv}
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }
skip() {
  echo "[skipped] $1"
  exit 77
}

exec 9>"$venv.lock"
flock 9  # parallel ctest runs share the cached environment
if ! "$venv/bin/python" -c 'import numpy, torch, transformers, safetensors, tokenizers' 2>/dev/null; then
  [ "${DISTRAIN_FETCH_TORCH:-0}" = 1 ] ||
    skip "no torch and transformers in $venv: DISTRAIN_FETCH_TORCH=1 makes it (torch from PyPI: several GB)"
  rm -rf "$venv"
  python3 -m venv "$venv" >"$work/venv.log" 2>&1 || skip "python3 -m venv failed (apt-get install python3-venv): $(tail -n 1 "$work/venv.log")"
  "$venv/bin/pip" install --disable-pip-version-check --timeout 20 --retries 1 -q numpy torch transformers safetensors \
    >"$work/pip.log" 2>&1 || { rm -rf "$venv"; skip "pip could not install torch and transformers: $(grep -m 1 -E 'ERROR|Error' "$work/pip.log")"; }
fi
flock -u 9
python=$venv/bin/python
ref="$python $src/tests/e2e/hf_reference.py"
"$python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
cd "$work" || exit 1
head -c 20000 "$src/data/tiny_shakespeare.txt" >text.txt

# within NAME REF GOT: the logits agree within 1e-4 of the largest.
within() {
  local diff
  diff=$($ref logits "$2" "$3" 2>&1)
  if "$python" -c "import sys; sys.exit(0 if float('$diff') <= 1e-4 else 1)" 2>/dev/null; then ok "$1 ($diff)"; else bad "$1: $diff"; fi
}

for arch in gpt2 llama llama_tied qwen2 mistral; do
  $ref make "$arch" "$arch" float32 text.txt >"$arch.make.log" 2>&1 || { bad "$arch: transformers could not make it: $(tail -n 1 "$arch.make.log")"; continue; }
  if ! "$distrain" import "$arch" --out "imp_$arch" --seq-len 16 --data text.txt >"$arch.import.log" 2>&1; then
    bad "$arch: import: $(tail -n 1 "$arch.import.log")"
    continue
  fi
  "$distrain" predict --ckpt "imp_$arch/model.h5" --data "$arch/ids.npy" --out "$arch.logits.npy" 2>/dev/null
  within "$arch: distrain's logits are transformers'" "$arch/logits.npy" "$arch.logits.npy"
  "$distrain" export --ckpt "imp_$arch/model.h5" --format hf --out "exp_$arch" >/dev/null 2>&1
  if $ref same_tensors "$arch" "exp_$arch" >"$arch.same.log" 2>&1; then ok "$arch: import then export is the original, bitwise"; else bad "$arch: round trip: $(tail -n 1 "$arch.same.log")"; fi
  $ref load "exp_$arch" "$arch/ids.npy" >/dev/null 2>&1
  within "$arch: transformers loads the export" "$arch.logits.npy" "exp_$arch/logits.npy"
done

# bfloat16: kept bitwise through float32 and written back as bf16 shards, read again by index.
$ref make llama_bf16 llama bfloat16 text.txt >/dev/null 2>&1
"$distrain" import llama_bf16 --out imp_bf16 --seq-len 16 --data text.txt >/dev/null 2>&1
"$distrain" export --ckpt imp_bf16/model.h5 --format hf --dtype bfloat16 --shard-mb 0.01 --out exp_bf16 >/dev/null 2>&1
shards=$(ls exp_bf16/model-*-of-*.safetensors 2>/dev/null | wc -l)
if [ "$shards" -gt 1 ] && $ref same_tensors llama_bf16 exp_bf16 >bf16.log 2>&1; then ok "bf16: $shards shards, bitwise the original"; else bad "bf16 shards ($shards): $(tail -n 1 bf16.log)"; fi
"$distrain" import exp_bf16 --out imp_bf16_again --seq-len 16 --data text.txt >/dev/null 2>&1
"$distrain" predict --ckpt imp_bf16_again/model.h5 --data llama_bf16/ids.npy --out bf16.logits.npy 2>/dev/null
within "bf16: the sharded export read back" llama_bf16/logits.npy bf16.logits.npy

# A fine-tune from the import on 2 replicas, exported and loaded by transformers.
if "$distrain" train imp_llama/recipe.toml --run-dir tune --progress none --set train.steps=3 --set train.validate=false \
  --set optimizer.learning_rate=0.01 \
  --set strategy.name=mirrored --set 'strategy.devices=["cpu:0","cpu:1"]' --set strategy.per_replica_batch=2 >tune.log 2>&1 &&
  grep -q "initialised weights from" tune.log; then
  ok "fine-tune from the import (init_from, mirrored): $(grep -m 1 '^done' tune.log | cut -c 1-60)"
else
  bad "fine-tune: $(tail -n 2 tune.log)"
fi
"$distrain" export --ckpt tune --format hf --out exp_tuned >/dev/null 2>&1
"$distrain" predict --ckpt tune --data llama/ids.npy --out tuned.logits.npy 2>/dev/null
$ref load exp_tuned llama/ids.npy >/dev/null 2>&1
within "the fine-tuned export in transformers" tuned.logits.npy exp_tuned/logits.npy
if $ref logits llama/logits.npy tuned.logits.npy | "$python" -c "import sys; sys.exit(0 if float(sys.stdin.read()) > 1e-3 else 1)"; then
  ok "the fine-tune moved the weights"; else bad "the fine-tune left the logits as imported"; fi

# One AdamW step from the imported Llama against PyTorch's AdamW on transformers' model: the
# same 4 windows (shuffle off), no warm-up, no decay; epsilon 1e-3 (PyTorch's 1e-2 at the
# first step: distrain's Adam is Keras's) keeps the update proportional to the gradient (a
# near-zero gradient's sign decides nothing).
for arch in gpt2 llama qwen2 mistral; do
  "$distrain" train "imp_$arch/recipe.toml" --run-dir "step_$arch" --progress none --set train.steps=1 \
    --set train.validate=false --set data.shuffle=false --set strategy.per_replica_batch=4 \
    --set optimizer.learning_rate=0.001 --set optimizer.beta_2=0.99 --set optimizer.epsilon=0.001 \
    --set optimizer.schedule.warmup_steps=0 >"step_$arch.log" 2>&1 &&
    "$distrain" export --ckpt "step_$arch" --format hf --out "step_$arch.hf" >/dev/null 2>&1
  step=$($ref adamw "$arch" text.txt 4 16 "step_$arch.hf" 2>&1 | tail -n 1)
  if "$python" -c "import sys; sys.exit(0 if float('${step%% *}') <= 1e-5 else 1)" 2>/dev/null; then
    ok "$arch: one AdamW step equals PyTorch's within 1e-5 of the largest weight ($step)"
  else
    bad "$arch: AdamW step: $step $(tail -n 1 "step_$arch.log")"
  fi
done

# generate stops at the tokenizer's end-of-text: every logit 0, greedy picks id 0, which is
# <|endoftext|>; --ids prints the prompt's ids and it, the text the prompt alone.
$ref zero_head llama eot >/dev/null 2>&1
"$distrain" import eot --out imp_eot --seq-len 16 --data text.txt >/dev/null 2>&1
prompt_ids=$("$python" -c "import tokenizers; print(' '.join(map(str, tokenizers.Tokenizer.from_file('llama/tokenizer.json').encode('ROMEO:').ids)))")
got_ids=$("$distrain" generate --ckpt imp_eot/model.h5 --prompt "ROMEO:" --temperature 0 --tokens 5 --ids 2>&1)
got_text=$("$distrain" generate --ckpt imp_eot/model.h5 --prompt "ROMEO:" --temperature 0 --tokens 5 2>&1)
if [ "$got_ids" = "$prompt_ids 0" ] && [ "$got_text" = "ROMEO:" ]; then
  ok "generate stops at <|endoftext|> (ids: $got_ids)"
else
  bad "generate at end-of-text: ids '$got_ids' (want '$prompt_ids 0'), text '$got_text'"
fi

# Broken files: one line naming the file, exit 2, nothing written.
$ref bad llama >/dev/null 2>&1
expect_refused() {
  local case=$1 message=$2
  "$distrain" import "llama.$case" --out "out_$case" >"$case.log" 2>&1
  local rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l <"$case.log")" -eq 1 ] && grep -qF -- "$message" "$case.log" && [ ! -e "out_$case" ]; then
    ok "refused: $case"
  else
    bad "$case (exit $rc): $(head -c 300 "$case.log")"
  fi
}
expect_refused truncated "llama.truncated/model.safetensors: not a safetensors file this version reads"
expect_refused huge_header "a header of 1000000000000 bytes"
expect_refused lying_offsets "claims"
expect_refused past_the_end "claims bytes"
expect_refused unknown_dtype "is F8_E4M3; distrain reads F32, BF16 and F16"
expect_refused unknown_tensor "tensor 'model.layers.0.mystery.weight' has no place"
expect_refused missing_tensor "no tensor"
expect_refused not_json "its header is not a JSON object"
mkdir -p no_weights && cp llama/config.json no_weights/
"$distrain" import no_weights --out out_nw >nw.log 2>&1
if [ $? -eq 2 ] && grep -q "neither model.safetensors" nw.log; then ok "refused: a folder without weights"; else bad "no weights: $(cat nw.log)"; fi
mkdir -p gemma && cp llama/model.safetensors gemma/ && sed 's/"model_type": "llama"/"model_type": "gemma"/' llama/config.json >gemma/config.json
"$distrain" import gemma --out out_gemma >gemma.log 2>&1
if [ $? -eq 2 ] && grep -q 'model_type: "gemma": distrain imports gpt2, llama, mistral and qwen2' gemma.log; then ok "refused: an architecture it does not know"; else bad "gemma: $(cat gemma.log)"; fi
mkdir -p act && cp llama/model.safetensors act/ && sed 's/"hidden_act": "silu"/"hidden_act": "relu"/' llama/config.json >act/config.json
"$distrain" import act --out out_act >act.log 2>&1
if [ $? -eq 2 ] && grep -q 'config.json: hidden_act: "relu"' act.log; then ok "refused: a config key that changes the function"; else bad "hidden_act: $(cat act.log)"; fi
mkdir -p shard && cp llama/config.json shard/ && echo '{"weight_map": {"model.norm.weight": "model-00009-of-00009.safetensors"}}' >shard/model.safetensors.index.json
"$distrain" import shard --out out_shard >shard.log 2>&1
if [ $? -eq 2 ] && grep -q "shard .*model-00009-of-00009.safetensors is missing" shard.log; then ok "refused: a missing shard"; else bad "missing shard: $(cat shard.log)"; fi

echo "passed $passed, failed $failed"
[ "$failed" -eq 0 ]
