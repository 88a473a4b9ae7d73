#!/usr/bin/env bash
# distrain's tokenizers against the libraries that wrote their files: tokenizer_test.sh DISTRAIN SOURCE_DIR
#   - a GPT-2-style byte-level BPE tokenizer.json trained by the tokenizers library on Tiny
#     Shakespeare (2,000 tokens, <|endoftext|>), and the same split as Llama 3's (a Split
#     pre-tokenizer with its pattern, ignore_merges): `distrain tokenize` gives the library's
#     ids on a varied corpus (English, code, numbers, runs of spaces and newlines, emoji, CJK,
#     special tokens inside text), and decodes them back to the bytes;
#   - SentencePiece: `distrain tokenizer train` (BPE and unigram) on Tiny Shakespeare, and a
#     model trained by the sentencepiece Python package with its defaults (NFKC, a dummy
#     prefix, as Llama 2's): `distrain tokenize` gives the package's ids on the same corpus,
#     distrain's own models decode it back byte for byte; a recipe trains on the .model's
#     ids and generate prints its words;
#   - bad tokenizer files and training inputs: one line naming the file, exit 2.
# tokenizers and sentencepiece come from PyPI into a virtual environment cached under /tmp (reference only);
# without PyPI that part prints why and is skipped.
set -u
distrain=$1
src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_e2e_tokenizer.XXXXXX")
trap 'rm -rf "$work"' EXIT
venv=${DISTRAIN_TOKENIZER_VENV:-/tmp/distrain_tokenizer_venv}
passed=0 failed=0 skipped=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }
cd "$work" || exit 1

# The corpus: every kind of text the issue names, and the shipped text's first 20 KB.
python3 - <<'PY'
parts = [
    "Hello, world! It's a test: we'll see what they've done, isn't it?\n",
    "def f(x):\n    return x ** 2  # squared\n\n\n\tif x>=10: print(f'{x:08.3f}')\n",
    "Numbers: 3.14159, 1,234,567 and 2026-12-07; 0x1F600; 12345678901234567890\n",
    "Runs of spaces:     and\n\n\n\nnewlines   \n  \r\n trailing   ",
    "Emoji \U0001F600\U0001F44D\U0001F3FD and \u2764\ufe0f; CJK: \u4e16\u754c\u4f60\u597d\uff0c\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\n",
    "Accents: na\u00efve caf\u00e9 \u00c5ngstr\u00f6m \u0152uvre; Greek \u03b1\u03b2\u03b3; Cyrillic \u043f\u0440\u0438\u0432\u0435\u0442\n",
    "Zero width\u200bjoiner\u200d, no-break\u00a0space, soft\u00adhyphen, bidi \u202eabc\u202c, \u0000nul\u007fdel\n",
    "special <|endoftext|> inside<|endoftext|>text and <|endoftext|><|endoftext|>\n",
]
open("corpus.txt", "w", encoding="utf-8", newline="").write("".join(parts))
PY
head -c 20000 "$src/data/tiny_shakespeare.txt" >>corpus.txt

run_bpe() {
  exec 9>"$venv.lock"
  flock 9
  if ! "$venv/bin/python" -c 'import tokenizers, sentencepiece' 2>/dev/null; then
    rm -rf "$venv"
    if ! python3 -m venv "$venv" >venv.log 2>&1 ||
      ! "$venv/bin/pip" install --disable-pip-version-check --timeout 20 --retries 1 -q tokenizers sentencepiece >pip.log 2>&1; then
      rm -rf "$venv"
      echo "[skipped] the tokenizers and sentencepiece libraries could not be installed: $(grep -m 1 -E 'ERROR|Error' pip.log venv.log 2>/dev/null)"
      skipped=$((skipped + 1))
      flock -u 9
      return
    fi
  fi
  flock -u 9
  "$venv/bin/python" - "$src/data/tiny_shakespeare.txt" <<'PY' || { bad "tokenizers could not train or encode"; return; }
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, Regex
text = open(sys.argv[1], encoding="utf-8").read()
corpus = open("corpus.txt", encoding="utf-8", newline="").read()

def train(pre, ignore_merges):
    t = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    t.pre_tokenizer = pre
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train_from_iterator([text], trainer)
    return t

gpt2 = train(pre_tokenizers.ByteLevel(add_prefix_space=False), False)
llama3_split = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
llama3 = train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(llama3_split), behavior="isolated"),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), True)
for name, t in (("gpt2", gpt2), ("llama3", llama3)):
    t.save(f"{name}.json")
    ids = t.encode(corpus, add_special_tokens=False).ids
    open(f"{name}.ids", "w").write(" ".join(map(str, ids)) + "\n")
    assert t.decode(ids, skip_special_tokens=False) == corpus, name
PY
  for name in gpt2 llama3; do
    if "$distrain" tokenize --tokenizer "$name.json" corpus.txt >"$name.distrain.ids" 2>"$name.err" && cmp -s "$name.ids" "$name.distrain.ids"; then
      ok "bpe $name: the tokenizers library's $(wc -w <"$name.ids") ids on $(wc -c <corpus.txt) bytes of varied text"
    else
      bad "bpe $name: ids differ from the tokenizers library's: $(cat "$name.err") $(cmp "$name.ids" "$name.distrain.ids" 2>&1 | head -n 1)"
    fi
    "$distrain" tokenize --tokenizer "$name.json" --decode "$name.ids" >"$name.text" &&
      cmp -s corpus.txt "$name.text" && ok "bpe $name: decode(encode(text)) is the text, byte for byte" ||
      bad "bpe $name: the decoded text differs: $(cmp corpus.txt "$name.text" 2>&1 | head -n 1)"
  done
}

# SentencePiece models: distrain's own (BPE and unigram, trained by `distrain tokenizer
# train`) and one the Python package trains with its defaults; ids against the package's.
run_sentencepiece() {
  for type in bpe unigram; do
    "$distrain" tokenizer train "$src/data/tiny_shakespeare.txt" --vocab 2000 --type "$type" --out "sp_$type.model" \
      >"sp_$type.log" 2>&1 && grep -q "sp_$type.model: $type 2000 tokens" "sp_$type.log" &&
      ok "tokenizer train --type $type: $(cut -d';' -f2 "sp_$type.log")" || bad "tokenizer train $type: $(cat "sp_$type.log")"
    "$distrain" tokenize --tokenizer "sp_$type.model" corpus.txt >"sp_$type.ids" 2>"sp_$type.err" &&
      "$distrain" tokenize --tokenizer "sp_$type.model" --decode "sp_$type.ids" >"sp_$type.text" &&
      cmp -s corpus.txt "sp_$type.text" && ok "sentencepiece $type: decode(encode(text)) is the text, byte for byte" ||
      bad "sentencepiece $type round trip: $(cat "sp_$type.err") $(cmp corpus.txt "sp_$type.text" 2>&1 | head -n 1)"
  done
  [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import sentencepiece' 2>/dev/null || return
  "$venv/bin/python" - "$src/data/tiny_shakespeare.txt" <<'PY' || { bad "sentencepiece (Python) could not train or encode"; return; }
import sys
import sentencepiece as spm
corpus = open("corpus.txt", encoding="utf-8", newline="").read()
spm.SentencePieceTrainer.train(input=sys.argv[1], model_prefix="sp_python", vocab_size=1000, minloglevel=2)
for name in ("sp_bpe", "sp_unigram", "sp_python"):
    ids = spm.SentencePieceProcessor(model_file=f"{name}.model").encode(corpus)
    open(f"{name}.python.ids", "w").write(" ".join(map(str, ids)) + "\n")
PY
  "$distrain" tokenize --tokenizer sp_python.model corpus.txt >sp_python.ids 2>sp_python.err
  for name in sp_bpe sp_unigram sp_python; do
    cmp -s "$name.python.ids" "$name.ids" && ok "$name.model: the sentencepiece package's $(wc -w <"$name.ids") ids on $(wc -c <corpus.txt) bytes" ||
      bad "$name.model: ids differ from the sentencepiece package's: $(cat "$name.err" 2>/dev/null) $(cmp "$name.python.ids" "$name.ids" 2>&1 | head -n 1)"
  done
}

# A Llama trained on the ids of distrain's own SentencePiece model: generate prints words.
run_sentencepiece_training() {
  [ -f sp_bpe.model ] || return
  cp "$src/data/tiny_shakespeare.txt" sptext.txt
  sed '/^vocabulary = /d' "$src/recipes/llama_shakespeare.toml" >sp.toml
  "$distrain" train sp.toml --set data.path=sptext.txt --set data.tokenizer=sp_bpe.model --set train.steps=3 \
    --set train.validate=false --progress none --run-dir sprun >sptrain.log 2>&1 &&
    "$distrain" generate --ckpt sprun --prompt "ROMEO:" --tokens 10 --temperature 0 >spgen.txt 2>spgen.err &&
    grep -q "^ROMEO:" spgen.txt && [ "$(wc -c <spgen.txt)" -gt 10 ] && ok "a Llama on sp_bpe.model's ids: generate prints its words" ||
    bad "training on a .model: $(tail -n 3 sptrain.log) $(cat spgen.txt spgen.err 2>/dev/null)"
}

# Bad training input: one line naming it, exit 2.
expect_train_refused() {
  local name=$1 message=$2
  shift 2
  "$distrain" tokenizer train "$@" >out.txt 2>err.txt
  local rc=$?
  [ "$rc" -eq 2 ] && grep -qF -- "$message" err.txt && [ "$(wc -l <err.txt)" -eq 1 ] && ok "tokenizer train refuses $name" ||
    bad "tokenizer train $name: exit $rc: $(cat err.txt)"
}

# A GPT trained on text tokenized by gpt2.json (data.tokenizer): the ids cached beside the
# text and read back by the next run; generate prints text; a changed tokenizer is refused.
run_training() {
  [ -f gpt2.json ] || return
  cp "$src/data/tiny_shakespeare.txt" text.txt
  sed '/^vocabulary = /d' "$src/recipes/shakespeare_char_gpt.toml" >bpe.toml
  local keys=(--set data.path=text.txt --set data.tokenizer=gpt2.json --set model.layers.0.input_dim=2000
    --set model.layers.4.units=2000 --set train.validate=false --set train.tensorboard=false --progress line)
  "$distrain" train bpe.toml "${keys[@]}" --set train.steps=3 --run-dir run >train1.log 2>&1 &&
    grep -q "text.txt: [0-9]* tokens in .*cached in text.txt\.[0-9a-f]*\.tokens" train1.log &&
    "$distrain" train bpe.toml "${keys[@]}" --set train.steps=5 --run-dir run >train2.log 2>&1 &&
    grep -q "tokens read from text.txt\." train2.log && ok "data.tokenizer: tokenized once, cached, read back" ||
    bad "data.tokenizer training: $(tail -n 3 train1.log train2.log)"
  "$distrain" generate --ckpt run --prompt "ROMEO:" --tokens 20 --temperature 0 >gen.txt 2>gen.err &&
    grep -q "^ROMEO:" gen.txt && [ "$(wc -c <gen.txt)" -gt 20 ] && ok "generate prints the tokenizer's words" ||
    bad "generate with a tokenizer: $(cat gen.txt gen.err)"
  sed -i 's/<|endoftext|>/<|endoftext2|>/' gpt2.json
  "$distrain" generate --ckpt run --prompt "ROMEO:" --tokens 2 >/dev/null 2>gen.err
  [ $? -eq 2 ] && grep -q "the tokenizer .*gpt2.json changed since" gen.err && ok "a changed tokenizer file is refused" ||
    bad "changed tokenizer: $(cat gen.err)"
}

# Bad tokenizer files: one line naming the file and what is wrong, exit 2.
expect_refused() {
  local name=$1 message=$2 file=$3
  echo "hello" >in.txt
  "$distrain" tokenize --tokenizer "$file" in.txt >out.txt 2>err.txt
  local rc=$?
  [ "$rc" -eq 2 ] && grep -qF "$message" err.txt && [ "$(wc -l <err.txt)" -eq 1 ] && ok "refused: $name" ||
    bad "refused $name: exit $rc: $(cat err.txt)"
}

run_bpe
run_training
run_sentencepiece
run_sentencepiece_training
printf 'caf\xe9 au lait\n' >latin1.txt
expect_train_refused "text that is not UTF-8" "latin1.txt: invalid UTF-8 at byte offset 3" latin1.txt --vocab 100 --out l.model
printf 'a few words only\n' >small.txt
expect_train_refused "a vocabulary larger than the text gives" "small.txt: SentencePiece's trainer: " small.txt --vocab 5000 --out s.model
expect_train_refused "an output that is not a .model" "--out t.json: tokenizer train writes a SentencePiece .model" small.txt --vocab 100 --out t.json
expect_train_refused "a missing input" "nothing.txt: not found" nothing.txt --vocab 100 --out n.model
printf '{"model": {"type": "WordPiece", "vocab": {}}}' >wordpiece.json
expect_refused "a WordPiece tokenizer.json" 'wordpiece.json: model type "WordPiece" is not supported' wordpiece.json
printf '{"model": {"type": "BPE", "vocab": {"a": 0' >truncated.json
expect_refused "a truncated tokenizer.json" "truncated.json: not a tokenizer.json (JSON error at byte" truncated.json
expect_refused "a missing file" "nope.json: tokenizer not found" nope.json
printf 'a model' >spm.model
expect_refused "a .model that is not one" "spm.model: not a SentencePiece model" spm.model
[ -f sp_bpe.model ] && head -c 5000 sp_bpe.model >cut.model && expect_refused "a truncated .model" "cut.model: not a SentencePiece model" cut.model
echo "passed=$passed failed=$failed skipped=$skipped"
[ "$failed" -eq 0 ]
