#!/usr/bin/env bash
# Encode speed of distrain's byte-level BPE against the tokenizers library, one core each:
#   bench/tokenize_speed.sh [BUILD_DIR] [ROUNDS]
# A GPT-2-style tokenizer.json of 8,000 tokens trained by tokenizers on Tiny Shakespeare
# encodes 10 copies of it (11 MB; each copy with its first word changed, so words recur as
# in a larger corpus); rounds interleaved; MB/s of each, median of the rounds. distrain's
# time is the whole `distrain tokenize --count` process (start, reading, encoding);
# tokenizers' is its encode call alone, in Python, on one thread: of the whole text as one
# string, and encode_batch of its paragraphs (its usual input). Then the same for a
# SentencePiece BPE .model of 8,000 tokens that `distrain tokenizer train` makes from Tiny
# Shakespeare, against the sentencepiece package's encode of the whole text and of its lines.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
src=$(cd "$(dirname "$0")/.." && pwd)
venv=${DISTRAIN_TOKENIZER_VENV:-/tmp/distrain_tokenizer_venv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import tokenizers, sentencepiece' 2>/dev/null ||
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q tokenizers sentencepiece; }
export TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 OMP_NUM_THREADS=1
"$venv/bin/python" - "$src/data/tiny_shakespeare.txt" "$work" <<'PY'
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
text = open(sys.argv[1], encoding="utf-8", newline="").read()
t = Tokenizer(models.BPE())
t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
t.decoder = decoders.ByteLevel()
t.train_from_iterator([text], trainers.BpeTrainer(vocab_size=8000, special_tokens=["<|endoftext|>"],
                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
t.save(sys.argv[2] + "/tokenizer.json")
open(sys.argv[2] + "/big.txt", "w", encoding="utf-8", newline="").write("".join(f"Copy{i} " + text for i in range(10)))
PY
"$src/$build/distrain" tokenizer train "$src/data/tiny_shakespeare.txt" --vocab 8000 --out "$work/sp.model" >/dev/null
mb=$(python3 -c "import os,sys; print(os.path.getsize(sys.argv[1]) / 1e6)" "$work/big.txt")
for r in $(seq "$rounds"); do
  start=$(date +%s.%N)
  taskset -c 0 "$src/$build/distrain" tokenize --tokenizer "$work/tokenizer.json" --count "$work/big.txt" >"$work/d.out"
  end=$(date +%s.%N)
  echo "distrain $(python3 -c "print($mb / ($end - $start))") $(cat "$work/d.out")"
  taskset -c 0 "$venv/bin/python" - "$work" <<'PY'
import sys, time
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
text = open(sys.argv[1] + "/big.txt", encoding="utf-8", newline="").read()
start = time.perf_counter()
ids = t.encode(text, add_special_tokens=False).ids
s = time.perf_counter() - start
print(f"tokenizers_whole {len(text.encode()) / 1e6 / s} {len(ids)} tokens")
paragraphs = [p + "\n\n" for p in text.split("\n\n")]  # its usual input: many short texts
start = time.perf_counter()
n = sum(len(e.ids) for e in t.encode_batch(paragraphs, add_special_tokens=False))
s = time.perf_counter() - start
print(f"tokenizers_batch {len(text.encode()) / 1e6 / s} {n} tokens")
PY
  start=$(date +%s.%N)
  taskset -c 0 "$src/$build/distrain" tokenize --tokenizer "$work/sp.model" --count "$work/big.txt" >"$work/s.out"
  end=$(date +%s.%N)
  echo "distrain_sp $(python3 -c "print($mb / ($end - $start))") $(tail -n 1 "$work/s.out")"
  taskset -c 0 "$venv/bin/python" - "$work" <<'PY'
import sys, time
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1] + "/sp.model")
text = open(sys.argv[1] + "/big.txt", encoding="utf-8", newline="").read()
start = time.perf_counter()
ids = sp.encode(text)
s = time.perf_counter() - start
print(f"sentencepiece_whole {len(text.encode()) / 1e6 / s} {len(ids)} tokens")
lines = text.splitlines(keepends=True)
start = time.perf_counter()
n = sum(len(i) for i in sp.encode(lines))
s = time.perf_counter() - start
print(f"sentencepiece_lines {len(text.encode()) / 1e6 / s} {n} tokens")
PY
done | tee "$work/rounds.txt"
python3 - "$work/rounds.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
d = statistics.median(float(r[1]) for r in rows if r[0] == "distrain")
w = statistics.median(float(r[1]) for r in rows if r[0] == "tokenizers_whole")
b = statistics.median(float(r[1]) for r in rows if r[0] == "tokenizers_batch")
print(f"median MB/s: distrain {d:.1f}; tokenizers {w:.1f} (one string), {b:.1f} (encode_batch of paragraphs); "
      f"ratio {d / max(w, b):.2f}x the faster")
d = statistics.median(float(r[1]) for r in rows if r[0] == "distrain_sp")
w = statistics.median(float(r[1]) for r in rows if r[0] == "sentencepiece_whole")
b = statistics.median(float(r[1]) for r in rows if r[0] == "sentencepiece_lines")
print(f"median MB/s, SentencePiece: distrain {d:.1f}; sentencepiece {w:.1f} (one string), {b:.1f} (its lines); "
      f"ratio {d / max(w, b):.2f}x the faster")
PY
