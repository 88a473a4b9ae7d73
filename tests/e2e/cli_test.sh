#!/usr/bin/env bash
# End-to-end tests of the real executable: cli_test.sh DISTRAIN SOURCE_DIR GROUP
# GROUP: errors | train_eval | kill_resume | sigterm | run_lock | recipes. Prints "N passed, N failed".
set -u
distrain=$1
src=$2
group=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_e2e_${group}.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
# plan's report lines wrap at 80 columns, continued 12 spaces in: one line each again.
unwrap_report() {
  awk 'NR > 1 && /^            [^ ]/ { sub(/^ +/, " "); printf "%s", $0; next } NR > 1 { print "" } { printf "%s", $0 } END { print "" }' "$1" >"$1.flat" &&
    mv "$1.flat" "$1"
}
# seconds_since START: seconds from START (date +%s.%N) to now, with awk (a bare Debian has no bc).
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }

# expect_error NAME SUBSTRING CMD...: exit code 2, exactly one line on stderr containing SUBSTRING.
expect_error() {
  local name=$1 want=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" "$work/err"; then
    ok "$name"
  else
    bad "$name (exit $rc, $lines stderr lines, wanted '$want'): $(head -c 400 "$work/err")"
  fi
}

# json_true EXPR FILE...: true when the Python expression EXPR holds, J[i] being FILE i
# parsed as JSON (for a .jsonl file, the list of its lines' objects). Not valid JSON: false.
json_true() {
  python3 - "$@" <<'PY'
import json, math, os, sys
def load(path):
    text = open(path, encoding="utf-8").read()
    return [json.loads(line) for line in text.splitlines()] if path.endswith(".jsonl") else json.loads(text)
try:
    J = [load(p) for p in sys.argv[2:]]
    sys.exit(0 if eval("(" + sys.argv[1] + ")") else 1)  # parenthesised: EXPR may span lines
except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
    print(f"json_true: {e!r}", file=sys.stderr)
    sys.exit(1)
PY
}

# A small, fast recipe on synthetic data, written next to the other test files.
tiny="$work/tiny.toml"
cat >"$tiny" <<'TOML'
name = "tiny"
seed = 3
[data]
dataset = "synthetic"
train_examples = 256
test_examples = 128
image_shape = [12, 12, 1]
[model]
input_shape = [12, 12, 1]
[[model.layers]]
type = "rescaling"
scale = 0.00392156862745098
[[model.layers]]
type = "conv2d"
filters = 4
kernel_size = 3
activation = "relu"
[[model.layers]]
type = "max_pool2d"
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dense"
units = 10
[strategy]
per_replica_batch = 32
[train]
epochs = 3
[checkpoint]
dir = "runs/tiny"
TOML

case "$group" in
errors)
  expect_error "missing recipe" "nope.toml: recipe not found" "$distrain" train "$work/nope.toml"
  printf 'name = "x"\n[model\ninput_shape = [1]\n' >"$work/malformed.toml"
  expect_error "malformed TOML names the line" "malformed.toml:2: malformed TOML" "$distrain" check "$work/malformed.toml"
  sed 's/^seed = 3/seed = 3\nsead = 4/' "$tiny" >"$work/unknown.toml"
  expect_error "unknown key names file and line" "unknown.toml:3: sead: unknown key" "$distrain" check "$work/unknown.toml"
  expect_error "unknown key from --set" "strategy.per_replica_bach: unknown key" "$distrain" check "$tiny" --set strategy.per_replica_bach=3
  expect_error "wrong type" "train.epochs: expected an integer" "$distrain" check "$tiny" --set 'train.epochs="three"'
  expect_error "zero batch" "strategy.per_replica_batch: must be positive, got 0" "$distrain" check "$tiny" --set strategy.per_replica_batch=0
  expect_error "negative epochs" "train.epochs: must be positive, got -2" "$distrain" train "$tiny" --set train.epochs=-2
  sed 's/type = "max_pool2d"/type = "maxpool"/' "$tiny" >"$work/layer.toml"
  expect_error "unknown layer type lists the known ones" "unknown layer type 'maxpool' (known: add, attention, avg_pool2d, batch_norm, conv2d" "$distrain" check "$work/layer.toml"
  sed 's/type = "flatten"/type = "relu"/' "$tiny" >"$work/shape.toml"
  expect_error "shape mismatch names the layer" "layer 'dense_1': expects (features,) or (sequence, features)" "$distrain" check "$work/shape.toml"
  expect_error "model/data mismatch" "model.input_shape (12, 12, 1) does not match the data's examples (10, 10, 1)" "$distrain" train "$tiny" --set 'data.image_shape=[10,10,1]' --run-dir "$work/r0"
  # The same job on IDX files: synthetic-only keys removed (they are errors elsewhere).
  grep -v -E '^(train_examples|test_examples|image_shape) =' "$tiny" | sed 's/dataset = "synthetic"/dataset = "fashion_mnist"/' >"$work/idx.toml"
  expect_error "synthetic keys are rejected for IDX data" "data.image_shape: unknown key" "$distrain" check "$tiny" --set data.dataset=mnist
  expect_error "dataset folder missing" "apt-get install dataset-fashion-mnist or set data.path" "$distrain" train "$work/idx.toml" --set data.path=/nonexistent/fmnist --run-dir "$work/r1"
  mkdir -p "$work/idx"
  printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02\x01\x02' >"$work/idx/train-images-idx3-ubyte"
  printf '\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02' >"$work/idx/train-labels-idx1-ubyte"
  expect_error "truncated IDX" "train-images-idx3-ubyte: 18 bytes, expected 24 for 2 images of 2x2 (truncated)" "$distrain" check "$work/idx.toml" --set data.path="$work/idx"
  printf '\x00\x00\x08\x04\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02' >"$work/idx/train-images-idx3-ubyte"
  expect_error "wrong IDX magic" "not an IDX image file (magic 0x00000804" "$distrain" check "$work/idx.toml" --set data.path="$work/idx"
  expect_error "hdf5 needs a path" 'data.path: required with dataset = "hdf5"' "$distrain" check "$work/idx.toml" --set data.dataset=hdf5
  expect_error "hdf5 file not HDF5" "idx/train-images-idx3-ubyte: not an HDF5 file (data.path)" "$distrain" check "$work/idx.toml" --set data.dataset=hdf5 --set data.path="$work/idx/train-images-idx3-ubyte"
  expect_error "an infinite float key is named" "optimizer.learning_rate: expected a finite number, not inf" "$distrain" check "$tiny" --set optimizer.learning_rate=inf
  expect_error "a NaN layer key is named" "model.layers[0].scale: expected a finite number, not nan" "$distrain" check "$tiny" --set model.layers.0.scale=nan
  expect_error "bad tensorboard_every_steps" "train.tensorboard_every_steps: must be >= 0" "$distrain" check "$tiny" --set train.tensorboard_every_steps=-1
  expect_error "checkpoint missing" "nope.h5: checkpoint not found" "$distrain" eval --ckpt "$work/nope.h5"
  echo "plain text" >"$work/text.h5"
  expect_error "checkpoint not HDF5" "text.h5: not an HDF5 file" "$distrain" eval --ckpt "$work/text.h5"
  (cd "$work" && "$distrain" train "$tiny" --set train.epochs=1 >/dev/null 2>&1)
  ckpt=$(ls "$work"/runs/tiny/ckpt-*.h5 | tail -n 1)
  head -c 3000 "$ckpt" >"$work/truncated.h5"
  expect_error "checkpoint truncated" "truncated.h5:" "$distrain" eval --ckpt "$work/truncated.h5"
  # eval as sturdy as train: a run folder, a missing file beside others, a shape mismatch, one process.
  expect_error "eval: a missing checkpoint lists those present" "ckpt-000005.h5: checkpoint not found; the folder has ckpt-" \
    "$distrain" eval --ckpt "$work/runs/tiny/ckpt-000005.h5"
  expect_error "eval: a folder without checkpoints" "a folder without checkpoints" "$distrain" eval --ckpt "$work/idx"
  expect_error "eval: data of another image size, one line" "model.input_shape (12, 12, 1) does not match the data's examples (10, 10, 1)" \
    "$distrain" eval --ckpt "$work/runs/tiny" --set 'data.image_shape=[10,10,1]'
  grep -q '^error: ' "$work/err" && ok "one process: errors without a [rank N] prefix" || bad "prefix: $(cat "$work/err")"
  "$distrain" eval --ckpt "$work/runs/tiny" --set train.eval_batch=7 --json >"$work/dir_eval.json" 2>&1 &&
    json_true 'J[0]["examples"] == 128' "$work/dir_eval.json" && ok "eval --ckpt RUN_DIR takes the newest, --set applies" ||
    bad "eval --ckpt RUN_DIR: $(cat "$work/dir_eval.json")"
  sed 's/filters = 4/filters = 5/' "$tiny" >"$work/other.toml"
  expect_error "checkpoint of another model" "/model/conv2d_1/kernel has shape (3, 3, 1, 4), the model expects (3, 3, 1, 5)" \
    "$distrain" train "$work/other.toml" --set checkpoint.init_from="\"$ckpt\"" --run-dir "$work/r2"
  expect_error "bad flag" "--nope" "$distrain" train "$tiny" --nope
  expect_error "torchrun's variables without MPI" "launch them with mpirun -np N" env WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 \
    "$distrain" train "$tiny" --run-dir "$work/r_torchrun"
  expect_error "srun without PMI: N singletons" "use srun --mpi=pmix" env SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=0 \
    "$distrain" train "$tiny" --run-dir "$work/r_srun"
  env WORLD_SIZE=2 RANK=0 "$distrain" info >"$work/info.log" 2>&1 && ok "info runs under torchrun's variables" ||
    bad "info with WORLD_SIZE=2: $(tail -n 1 "$work/info.log")"
  expect_error "a recipe key as a flag gets its --set" "use --set train.epochs=1" "$distrain" train "$tiny" --epochs 1
  expect_error "a Keras name gets the recipe's" "optimizer.lr: unknown key; did you mean optimizer.learning_rate?" \
    "$distrain" check "$tiny" --set optimizer.lr=0.1
  expect_error "an error about a --set names the --set" "--set train.epochs=-2: train.epochs: must be positive" \
    "$distrain" check "$tiny" --set train.epochs=-2
  expect_error "a typo gets the near key" "train.epoch: unknown key; did you mean train.epochs?" "$distrain" check "$tiny" --set train.epoch=3
  # The names nanoGPT, PyTorch and Keras users type, in whatever table, get distrain's key.
  expect_error "nanoGPT's max_iters" "train.max_iters: unknown key; did you mean train.steps?" "$distrain" check "$tiny" --set train.max_iters=5
  expect_error "a top-level batch_size" "batch_size: unknown key; did you mean strategy.per_replica_batch?" "$distrain" check "$tiny" --set batch_size=5
  expect_error "nanoGPT's block_size" "data.block_size: unknown key; did you mean data.seq_len?" "$distrain" check "$tiny" --set data.block_size=5
  expect_error "mixed_precision" "train.mixed_precision: unknown key; did you mean train.precision" "$distrain" check "$tiny" --set train.mixed_precision=true
  expect_error "eval_interval says when validation runs" "train.eval_interval: unknown key; validation runs at the end of every epoch" \
    "$distrain" check "$tiny" --set train.eval_interval=100
  # A key of another strategy (a recipe written for mirrored, run as zero) is dropped with one note.
  if "$distrain" check "$tiny" --set strategy.name=zero --set strategy.cross_device_ops=auto >"$work/out" 2>&1 &&
    grep -qF 'strategy "zero" does not read strategy.cross_device_ops (mirrored only): ignored' "$work/out"; then
    ok "a key of another strategy is dropped with a note"
  else
    bad "a key of another strategy: $(head -c 400 "$work/out")"
  fi
  # A schedule the run cannot finish is named by check.
  "$distrain" check "$tiny" --set optimizer.schedule.warmup_steps=100000 >"$work/out" 2>&1
  grep -q "^warning     the warm-up of 100000 steps is longer than the run's" "$work/out" &&
    ok "check names a warm-up longer than the run" || bad "a warm-up longer than the run: $(grep -i warm "$work/out")"
  expect_error "a misspelt command" "'trian' is not a command: did you mean train?" "$distrain" trian "$tiny"
  expect_error "--steps gets its --set" "use --set train.steps=2" "$distrain" train "$tiny" --steps 2
  expect_error "a checkpoint without --ckpt" "give the checkpoint (or run folder) after --ckpt: distrain eval --ckpt runs/x" "$distrain" eval runs/x
  expect_error "unknown --progress style" "--progress: fancy not in {auto,bar,line,none}" "$distrain" train "$tiny" --progress fancy
  sed 's/train_examples = 256/train_examples = 257/; s/type = "max_pool2d"/type = "batch_norm"\n[[model.layers]]\ntype = "max_pool2d"/' "$tiny" >"$work/bn.toml"
  expect_error "sync_batch_norm with a replica left without examples" "set data.drop_remainder = true" \
    "$distrain" train "$work/bn.toml" --set strategy.name=mirrored --set 'strategy.devices=["cpu:0","cpu:1"]' --set strategy.sync_batch_norm=true --run-dir "$work/r3"
  ;;
train_eval)
  cd "$work" || exit 1
  if "$distrain" train "$tiny" >"$work/train.log" 2>&1; then ok "train exits 0"; else bad "train: $(tail -n 3 "$work/train.log")"; fi
  json_true 'len(J[0]) == 3 and all(set(o) == {"epoch", "step", "loss", "accuracy", "val_loss", "val_accuracy", "learning_rate",
    "images_per_sec", "seconds", "grad_norm", "complete"} for o in J[0]) and J[0][2]["step"] == 24 and
    J[0][0]["grad_norm"] is None' runs/tiny/metrics.jsonl &&
    ok "metrics.jsonl: one JSON object per epoch with every key" || bad "metrics.jsonl: $(cat runs/tiny/metrics.jsonl)"
  json_true 'J[0]["name"] == "tiny" and J[0]["steps"] == 24 and J[0]["val_loss"] == J[1][-1]["val_loss"]' runs/tiny/summary.json runs/tiny/metrics.jsonl &&
    ok "summary.json written" || bad "summary.json: $(cat runs/tiny/summary.json)"
  grep -q "^epoch 3/3 step 24 " "$work/train.log" && ok "one plain line per epoch when not a terminal" || bad "train log: $(cat "$work/train.log")"
  ckpt=runs/tiny/ckpt-000024.h5
  [ -f "$ckpt" ] && ok "final checkpoint" || bad "no $ckpt: $(ls runs/tiny)"
  "$distrain" eval --ckpt "$ckpt" --json >"$work/eval.json" 2>"$work/eval.err"
  if [ "$(wc -l <"$work/eval.json")" -eq 1 ] && json_true 'list(J[0]) == ["loss", "accuracy", "examples"] and J[0]["examples"] == 128' "$work/eval.json"; then
    ok "eval --json prints exactly one JSON object"
  else
    bad "eval --json: $(cat "$work/eval.json" "$work/eval.err")"
  fi
  json_true 'J[0]["accuracy"] == J[1][-1]["val_accuracy"] and J[0]["loss"] == J[1][-1]["val_loss"]' "$work/eval.json" runs/tiny/metrics.jsonl &&
    ok "eval agrees with the last validation" || bad "eval $(cat "$work/eval.json") vs $(tail -n 1 runs/tiny/metrics.jsonl)"
  # predict on Fashion-MNIST's test images (an MLP, 30 steps): its classes give eval's accuracy
  # against the test labels, in every output format, and its probabilities sum to 1.
  fm=/usr/share/datasets/fashion-mnist
  cat >"$work/fm.toml" <<'TOML'
name = "fm"
[model]
input_shape = [28, 28, 1]
layers = [{ type = "rescaling", scale = 0.00392156862745098 }, { type = "flatten" }, { type = "dense", units = 10 }]
[strategy]
per_replica_batch = 64
TOML
  python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack(">IIII", 0x803, 2, 12, 12) + bytes(288))' "$work/tiny12.idx"
  "$distrain" train "$work/fm.toml" --set train.steps=30 --run-dir fm_run >"$work/fm.log" 2>&1
  "$distrain" eval --ckpt fm_run --json >"$work/fm_eval.json" 2>&1
  for out in csv npy h5; do
    "$distrain" predict --ckpt fm_run --data "$fm/t10k-images-idx3-ubyte.gz" --out "$work/pred.$out" --probabilities 2>"$work/pred.err" ||
      bad "predict --out .$out: $(tail -n 2 "$work/pred.err")"
  done
  python3 - "$work" "$fm/t10k-labels-idx1-ubyte.gz" <<'PY' && ok "predict: csv and npy classes give eval's accuracy, probabilities sum to 1" || bad "predict: $(cat "$work/fm_eval.json" "$work/fm.log" | tail -n 3)"
import ast, csv, gzip, json, struct, sys
work, labels_file = sys.argv[1], sys.argv[2]
labels = gzip.open(labels_file).read()[8:]
rows = list(csv.reader(open(f"{work}/pred.csv")))
assert rows[0][:2] == ["index", "class"] and len(rows) == 1 + len(labels)
classes = [int(r[1]) for r in rows[1:]]
assert all(abs(sum(float(x) for x in r[2:]) - 1) < 1e-4 for r in rows[1:])
raw = open(f"{work}/pred.npy", "rb").read()
assert raw[:8] == b"\x93NUMPY\x01\x00"
n = struct.unpack("<H", raw[8:10])[0]
header = ast.literal_eval(raw[10:10 + n].decode())
assert header["descr"] == "<f4" and header["shape"] == (len(labels), 10) and (10 + n) % 64 == 0
probs = struct.unpack(f"<{len(labels) * 10}f", raw[10 + n:])
npy_classes = [max(range(10), key=lambda c: probs[i * 10 + c]) for i in range(len(labels))]
assert npy_classes == classes
accuracy = sum(c == l for c, l in zip(classes, labels)) / len(labels)
want = json.load(open(f"{work}/fm_eval.json"))["accuracy"]
assert abs(accuracy - want) < 1e-9, (accuracy, want)
PY
  expect_error "predict: images of another shape" "examples of (12, 12, 1), the model" "$distrain" predict --ckpt fm_run \
    --data "$work/tiny12.idx"
  # The same images as PNG files in class folders (300 of each split): trained on, then
  # predicted from a folder, one file and an NPY array, with the class names.
  python3 "$src/scripts/idx-to-image-folder.py" "$fm" "$work/fimg" --limit 300 --npy 5 \
    --names tshirt,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,boot >/dev/null
  "$distrain" check "$work/fm.toml" --set data.dataset=image_folder --set data.path="$work/fimg/train" \
    --set data.test_path="$work/fimg/test" >"$work/img_check.log" 2>&1
  grep -q "image_folder: 300 train / 300 test examples of (28, 28, 1), 10 classes (bag, boot, coat, dress, pullover, sandal, shirt, sneaker, trouser, tshirt)" \
    "$work/img_check.log" && ok "check: an image folder's examples and class names" || bad "image folder check: $(cat "$work/img_check.log")"
  "$distrain" train "$work/fm.toml" --set train.steps=20 --set data.dataset=image_folder --set data.path="$work/fimg/train" \
    --set data.validation_split=0.2 --run-dir img_run >"$work/img.log" 2>&1 || bad "image folder train: $(tail -n 2 "$work/img.log")"
  "$distrain" predict --ckpt img_run --data "$work/fimg/test" >"$work/img_pred.csv" 2>"$work/img_pred.err"
  one=$(find "$work/fimg/test/bag" -name '*.png' | sort | head -n 1)
  "$distrain" predict --ckpt img_run --data "$one" >"$work/one_pred.csv" 2>/dev/null
  "$distrain" predict --ckpt img_run --data "$work/fimg/test.npy" >"$work/npy_pred.csv" 2>/dev/null
  python3 - "$work" "$one" <<'PY' && ok "predict: a folder of PNGs, one PNG and an NPY array, with class names and files" || bad "image predict: $(head -c 300 "$work/img_pred.csv" "$work/img_pred.err" "$work/one_pred.csv" "$work/npy_pred.csv")"
import csv, sys
work, one_file = sys.argv[1], sys.argv[2]
names = ["bag", "boot", "coat", "dress", "pullover", "sandal", "shirt", "sneaker", "trouser", "tshirt"]
rows = list(csv.reader(open(f"{work}/img_pred.csv")))
assert rows[0] == ["index", "class", "class_name", "file"] and len(rows) == 301, rows[:2]
assert all(r[2] == names[int(r[1])] and r[3].startswith(f"{work}/fimg/test/") for r in rows[1:])
one = list(csv.reader(open(f"{work}/one_pred.csv")))
assert len(one) == 2 and one[1][3] == one_file and one[1][1:3] == [r for r in rows if r[3] == one[1][3]][0][1:3]
npy = list(csv.reader(open(f"{work}/npy_pred.csv")))
assert npy[0] == ["index", "class", "class_name"] and len(npy) == 6
PY
  # A name and a run folder with quotes, a backslash and non-ASCII letters come back intact.
  odd='odd "dé\jà" run'
  sed 's/^name = "tiny"/name = "dé\\"j\\\\à vu"/' "$tiny" >"$work/odd.toml"
  "$distrain" train "$work/odd.toml" --set train.epochs=2 --run-dir "$odd" >"$work/odd.log" 2>&1
  "$distrain" eval --ckpt "$odd/ckpt-000016.h5" --json >"$work/odd_eval.json" 2>&1
  ODD="$odd" json_true 'J[0]["name"] == "d\u00e9\"j\\\u00e0 vu" and J[0]["last_checkpoint"] == os.environ["ODD"] + "/ckpt-000016.h5" and
    J[0]["val_accuracy"] == J[1][-1]["val_accuracy"] == J[2]["accuracy"] and len(J[1]) == 2' \
    "$odd/summary.json" "$odd/metrics.jsonl" "$work/odd_eval.json" &&
    ok "a name and run folder with quotes, a backslash and non-ASCII round-trip through the JSON files" ||
    bad "odd name: $(cat "$odd/summary.json" "$work/odd_eval.json" "$work/odd.log")"
  # --progress: plain lines for logs, nothing, or the bar when asked even on a pipe.
  "$distrain" train "$tiny" --fresh --run-dir p --progress line >"$work/line.log" 2>&1
  if grep -q $'\r' "$work/line.log" || grep -q $'\033' "$work/line.log"; then
    bad "--progress line writes carriage returns or escapes: $(cat -A "$work/line.log" | head -n 3)"
  elif [ "$(grep -c '^epoch [123]/3 step [0-9]* - loss: ' "$work/line.log")" -eq 3 ] && grep -q '^epoch 2/3 batch 4/8 - loss: ' "$work/line.log"; then
    ok "--progress line: plain lines within epochs and one per epoch"
  else
    bad "--progress line: $(cat "$work/line.log")"
  fi
  "$distrain" train "$tiny" --fresh --run-dir p --progress line --progress-every 4 >"$work/every.log" 2>&1
  [ "$(grep -c '^epoch 1/3 batch ' "$work/every.log")" -eq 1 ] && ok "--progress-every 4: one line within each 8-batch epoch" ||
    bad "--progress-every: $(cat "$work/every.log")"
  "$distrain" train "$tiny" --fresh --run-dir p --progress none >"$work/none.log" 2>&1
  ! grep -qi "epoch" "$work/none.log" && grep -q "^done: 24 steps" "$work/none.log" && ok "--progress none: no progress, the summary still" ||
    bad "--progress none: $(cat "$work/none.log")"
  COLUMNS=200 "$distrain" train "$tiny" --fresh --run-dir p --progress bar >"$work/bar.log" 2>&1
  grep -qF $'\r\033[KEpoch 3/3  8/8 [==============================] ' "$work/bar.log" && ok "--progress bar is drawn when asked" ||
    bad "--progress bar: $(cat -A "$work/bar.log" | head -n 3)"
  "$distrain" train "$tiny" >"$work/again.log" 2>&1
  grep -q "run already complete at step 24" "$work/again.log" && ok "rerun of a finished run trains nothing" || bad "rerun: $(cat "$work/again.log")"
  "$distrain" train "$tiny" --fresh --set train.epochs=1 --set checkpoint.keep=1 >/dev/null 2>&1
  [ "$(ls runs/tiny/ckpt-*.h5 | wc -l)" -eq 1 ] && [ -f runs/tiny/ckpt-000008.h5 ] && ok "--fresh starts over; keep = 1" || bad "after --fresh: $(ls runs/tiny)"
  # A divergent learning rate (1e6 only makes this model's loss huge) stops at the first
  # non-finite loss: exit 2, one line naming the step and the last finite checkpoint,
  # which stays and evaluates; no NaN is written.
  "$distrain" train "$tiny" --run-dir div --set train.epochs=1 >/dev/null 2>&1
  expect_error "a non-finite loss stops training" "the loss is not finite (" \
    "$distrain" train "$tiny" --run-dir div --set optimizer.learning_rate=1e20
  grep -qE '^error: step (9|1[0-9]|2[0-4]): the loss is not finite \((nan|inf)\); lower optimizer.learning_rate .*; the last finite checkpoint is div/ckpt-000008.h5$' "$work/err" &&
    ok "the error names the step and the last finite checkpoint" || bad "divergence message: $(cat "$work/err")"
  [ "$(ls div | grep -c '\.h5')" -eq 1 ] && "$distrain" eval --ckpt div/ckpt-000008.h5 --json >"$work/div_eval.json" &&
    json_true 'math.isfinite(J[0]["loss"])' "$work/div_eval.json" &&
    ok "the checkpoint before the divergence is kept, alone, and evaluates" || bad "after divergence: $(ls div) $(cat "$work/div_eval.json")"
  json_true 'len(J[0]) == 1 and J[1]["steps"] == 8' div/metrics.jsonl div/summary.json && ! grep -qiwE 'nan|inf|infinity' div/metrics.jsonl div/summary.json &&
    ok "metrics.jsonl and summary.json hold no NaN" || bad "divergence JSON: $(cat div/metrics.jsonl div/summary.json)"
  "$distrain" info --json >"$work/info.json"
  json_true 'J[0]["version"] and J[0]["mpi"] and J[0]["devices"][0].startswith("cpu:0 ") and J[0]["sentencepiece"].startswith("plugin ")' "$work/info.json" && ok "info --json names versions and the SentencePiece plugin" ||
    bad "info --json: $(cat "$work/info.json")"
  "$distrain" bench "$tiny" --steps 5 --warmup 1 --json >"$work/bench.json"
  json_true 'J[0]["images_per_sec"] > 0 and J[0]["step_ms"]["min"] <= J[0]["step_ms"]["median"] and J[0]["global_batch"] == 32' "$work/bench.json" &&
    ok "bench --json" || bad "bench --json: $(cat "$work/bench.json")"
  "$distrain" bench "$tiny" --steps 8 --warmup 1 --read-every 4 >"$work/bench_windows.log" 2>&1 &&
    grep -q "8 timed steps after 1 warm-up, figures read every 4 steps" "$work/bench_windows.log" &&
    ok "bench --read-every reads the figures in windows" || bad "bench --read-every: $(cat "$work/bench_windows.log")"
  "$distrain" bench "$tiny" --read-every 0 >"$work/out" 2>"$work/err"
  [ $? -ne 0 ] && grep -q "read-every" "$work/err" && ok "bench --read-every 0 is refused" || bad "bench --read-every 0: $(cat "$work/err")"
  "$distrain" check "$tiny" | grep -q "global batch 32" && ok "check prints the plan" || bad "check"
  # check --without-data: the plan from the recipe alone, as plan makes it; without the
  # flag, the missing data's error says it exists.
  "$distrain" check "$src/recipes/fashion_mnist_cnn.toml" --set data.path=/nonexistent/data --without-data --set train.steps=40 >"$work/nodata.log" 2>&1 &&
    grep -q "^data        .*not read (--without-data)" "$work/nodata.log" && grep -q "^steps       40 (train.steps)" "$work/nodata.log" &&
    grep -q "^memory      per replica" "$work/nodata.log" && ok "check --without-data plans without reading the data" ||
    bad "check --without-data: $(head -n 5 "$work/nodata.log")"
  "$distrain" check "$src/recipes/fashion_mnist_cnn.toml" --set data.path=/nonexistent/data >"$work/nodata.log" 2>&1
  [ $? -eq 2 ] && grep -q "(check --without-data plans the run without it)" "$work/nodata.log" &&
    ok "check without the data names --without-data" || bad "check, missing data: $(cat "$work/nodata.log")"
  "$distrain" check "$tiny" --set strategy.name=mirrored --set 'strategy.devices=["cpu:0","cpu:1"]' >"$work/check2.log"
  grep -q "2 replica(s) x 32 per replica = global batch 64" "$work/check2.log" && grep -q "0.002 = 0.001 x linear rule for global batch 64 / base batch 32" "$work/check2.log" &&
    ok "check shows replicas, global batch and the scaled learning rate" || bad "check mirrored: $(cat "$work/check2.log")"
  "$distrain" check "$tiny" --json --set strategy.name=mirrored --set 'strategy.devices=["cpu:0","cpu:1"]' --set strategy.cross_device_ops=auto \
    --set strategy.stage=2 >"$work/check.json" 2>"$work/check.err"
  python3 - "$work/check.json" <<'PY' &&
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
j = json.loads(lines[0])
assert j["strategy"]["replicas"] == 2 and j["strategy"]["global_batch"] == 64, j["strategy"]
assert j["memory_per_replica"]["device_total"] > 0 and j["model"]["trainable_parameters"] > 0
assert j["steps"]["per_epoch"] > 0 and any("strategy.stage" in n for n in j["notes"]), j
PY
    ok "check --json: one object with the run, memory and notes" || bad "check --json: $(cat "$work/check.json" "$work/check.err")"
  "$distrain" bench "$tiny" --strategy mirrored --replicas 1,2 --steps 3 --warmup 1 --json --csv "$work/s.csv" --svg "$work/s.svg" >"$work/s.json"
  json_true '[(p["strategy"], p["mode"], p["replicas"], p["global_batch"]) for p in J[0]] == [("mirrored", "weak", 1, 32), ("mirrored", "weak", 2, 64)]
    and all(p["images_per_sec"] > 0 and p["speedup"] > 0 and p["efficiency"] > 0 for p in J[0])' "$work/s.json" &&
    ok "bench --replicas --json lists the points" || bad "bench scaling json: $(cat "$work/s.json")"
  [ "$(wc -l <"$work/s.csv")" -eq 3 ] && grep -q "<polyline" "$work/s.svg" && grep -q ">efficiency<" "$work/s.svg" &&
    ok "bench writes CSV and SVG" || bad "bench csv/svg"
  "$distrain" bench "$tiny" --strategy mirrored --replicas 1,2 --mode strong --steps 3 --warmup 1 | grep -qE "^ +2 +32 " &&
    ok "bench --mode strong keeps the global batch" || bad "bench strong"
  json_true 'all(p["rounds"] == 3 and p["min_images_per_sec"] <= p["images_per_sec"] <= p["max_images_per_sec"] for p in J[0])' \
    "$work/s.json" && ok "bench scaling points: the median of 3 rounds, with their range" || bad "bench rounds: $(cat "$work/s.json")"
  "$distrain" bench "$tiny" --steps 3 --warmup 1 --busy 1 --rounds 2 --json >"$work/busy.json" 2>"$work/busy.err"
  json_true 'J[0]["busy_processes"] == 1 and len(J[0]["quiet_rounds"]) == 2 and len(J[0]["busy_rounds"]) == 2
    and J[0]["quiet"] > 0 and J[0]["busy"] > 0 and "GOMP_SPINCOUNT=" in J[0]["openmp_wait"]' "$work/busy.json" &&
    ok "bench --busy 1: quiet and busy rounds in turns" || bad "bench --busy: $(cat "$work/busy.json" "$work/busy.err")"
  pgrep -f "bench $tiny --steps 1000000" >/dev/null && bad "bench --busy left a load process running" ||
    ok "bench --busy stops its load processes"
  "$distrain" info | grep -q "OpenMP   idle threads wait: GOMP_SPINCOUNT=3000 (distrain's default)" &&
    OMP_WAIT_POLICY=passive "$distrain" info | grep -q "OMP_WAIT_POLICY=passive (set by the user)" &&
    ok "OpenMP's wait: distrain's default, the user's when set" || bad "info's OpenMP line: $("$distrain" info | grep OpenMP)"
  # multi_worker_mirrored points come from `mpirun ... bench --json`, here a stand-in: lines
  # around the result that are not JSON are skipped, and no result is one clear error.
  mkdir -p fake
  cat >fake/mpirun <<'SH'
#!/bin/sh
echo "a launcher notice"
echo '{"recipe":"tiny","strategy":"multi_worker_mirrored","replicas":2,"global_batch":64,"threads":1,"images_per_sec":1234.5,"step_ms":{"min":1,"median":2,"max":3},"comm_share":0.25,"steps":3,"read_every":1,"sent_per_step":{"data_bytes":10,"data_collectives":1,"tensor_bytes":0,"theory":"all_reduce: 2(N-1)/N x G","theory_bytes":10},"memory_per_replica":{"parameters":1,"gradients":1,"optimizer":1,"activations":1},"device_memory_peak":{"device":"cpu:0","bytes":5}}'
echo "[rank 1] a last word"
SH
  chmod +x fake/mpirun
  PATH="$work/fake:$PATH" "$distrain" bench "$tiny" --strategy multi_worker_mirrored --replicas 2 --steps 3 --json >"$work/mw.json" 2>&1
  json_true 'J[0][0]["images_per_sec"] == 1234.5 and J[0][0]["step_ms"] == 2 and J[0][0]["global_batch"] == 64' "$work/mw.json" &&
    ok "bench reads its mpirun child's JSON among other lines" || bad "bench child json: $(cat "$work/mw.json")"
  printf '#!/bin/sh\necho "no result here"\n' >fake/mpirun
  expect_error "bench: a child without a JSON result" "bench: \`mpirun -np 2\` printed no JSON result: no result here" \
    env PATH="$work/fake:$PATH" "$distrain" bench "$tiny" --strategy multi_worker_mirrored --replicas 2 --steps 3
  # --profile: a row per layer of the model, then the update, the reduction and the rest of
  # the step; figures >= 0, time in the layers that compute, shares adding up to 100%.
  profiled_rows='["rescaling_1", "conv2d_1", "max_pool2d_1", "flatten_1", "dense_1", "(update)", "(reduction)", "(other)"]'
  profile_holds="[r['name'] for r in P] == $profiled_rows
    and all(r['forward_ms'] >= 0 and r['backward_ms'] >= 0 and r['share'] >= 0 for r in P)
    and P[1]['forward_ms'] > 0 and P[1]['backward_ms'] > 0 and P[4]['backward_ms'] > 0 and P[5]['backward_ms'] > 0
    and abs(sum(r['share'] for r in P) - 1) < 0.005"
  "$distrain" bench "$tiny" --profile --steps 3 --warmup 1 --json >"$work/prof.json"
  json_true "(lambda P: $profile_holds)(J[0]['profile'])" "$work/prof.json" &&
    ok "bench --profile --json: every layer, the update, the reduction and (other), shares summing to 100%" ||
    bad "bench --profile --json: $(cat "$work/prof.json")"
  "$distrain" bench "$tiny" --profile --steps 3 --warmup 1 --set strategy.name=mirrored \
    --set 'strategy.devices=["cpu:0","cpu:1"]' --json >"$work/prof2.json"
  json_true "(lambda P: $profile_holds)(J[0]['profile']) and J[0]['profile'][6]['backward_ms'] > 0" "$work/prof2.json" &&
    ok "bench --profile on mirrored: replica 0's layers and a reduction" || bad "bench --profile mirrored: $(cat "$work/prof2.json")"
  "$distrain" bench "$tiny" --profile --steps 3 --warmup 1 >"$work/prof.txt"
  grep -qE '^ +conv2d_1 +conv2d +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]%$' "$work/prof.txt" &&
    grep -qE '^ +\(other\) +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]%$' "$work/prof.txt" &&
    ok "bench --profile prints the table" || bad "bench --profile table: $(cat "$work/prof.txt")"
  "$distrain" bench "$tiny" --profile --steps 3 --warmup 1 --set strategy.name=zero --set 'strategy.devices=["cpu:0","cpu:1"]' |
    grep -q "profile: strategy zero is not profiled" && ok "bench --profile says when a strategy is not profiled" ||
    bad "bench --profile zero"
  expect_error "bench --profile times one point" "bench --profile times one point" \
    "$distrain" bench "$tiny" --profile --replicas 1,2
  ;;
kill_resume)
  # --resume-from: a chosen checkpoint, into another run folder, ends bitwise where the
  # uninterrupted run ends; later checkpoints in the folder, or --fresh deleting it, are refused.
  "$distrain" train "$tiny" --set checkpoint.keep=10 --run-dir "$work/rf" >/dev/null 2>&1
  "$distrain" train "$tiny" --resume-from "$work/rf/ckpt-000008.h5" --run-dir "$work/rf2" >"$work/rf2.log" 2>&1 &&
    grep -q "resuming from $work/rf/ckpt-000008.h5" "$work/rf2.log" &&
    "$distrain" compare "$work/rf/ckpt-000024.h5" "$work/rf2/ckpt-000024.h5" --rtol 0 >/dev/null &&
    ok "--resume-from into another folder ends bitwise as the uninterrupted run" || bad "--resume-from: $(tail -n 3 "$work/rf2.log")"
  expect_error "--resume-from with later checkpoints in the folder" "holds ckpt-000016.h5 from after step 8" \
    "$distrain" train "$tiny" --run-dir "$work/rf" --resume-from ckpt-000008.h5
  expect_error "--resume-from a checkpoint --fresh would delete" "--fresh would delete" \
    "$distrain" train "$tiny" --run-dir "$work/rf" --fresh --resume-from ckpt-000008.h5
  # A resume whose recipe stretches the schedule (more epochs under a cosine decay) says so.
  "$distrain" train "$tiny" --set optimizer.schedule.decay=cosine --run-dir "$work/rs" >/dev/null 2>&1
  "$distrain" train "$tiny" --set optimizer.schedule.decay=cosine --set train.epochs=4 --run-dir "$work/rs" >"$work/rs.log" 2>&1 &&
    grep -q "note: the learning-rate schedule is not the one .*ckpt-000024.h5 was trained under: now .*cosine decay over 32 steps; was .*cosine decay over 24 steps" "$work/rs.log" &&
    ok "a resume that changes the schedule says what changed" || bad "schedule change on resume: $(tail -n 3 "$work/rs.log")"
  # SIGKILL mid-run, rerun the same command: it resumes from the newest checkpoint and
  # ends with the same weights (compared through eval) as an uninterrupted run.
  cd "$work" || exit 1
  "$distrain" train "$tiny" --set train.epochs=400 --set checkpoint.every_steps=100 --set checkpoint.every_epochs=0 --set checkpoint.keep=50 --run-dir full >/dev/null 2>&1
  "$distrain" train "$tiny" --set train.epochs=400 --set checkpoint.every_steps=100 --set checkpoint.every_epochs=0 --set checkpoint.keep=50 --run-dir killed >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [ -f killed/ckpt-000200.h5 ] && break
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if [ -f killed/summary.json ]; then
    bad "the run finished before it could be killed; nothing tested"
  else
    ok "killed mid-run with SIGKILL"
    "$distrain" train "$tiny" --set train.epochs=400 --set checkpoint.every_steps=100 --set checkpoint.every_epochs=0 --set checkpoint.keep=50 --run-dir killed >"$work/resume.log" 2>&1
    grep -q "resuming from killed/ckpt-" "$work/resume.log" && ok "rerun resumes from the newest checkpoint" || bad "resume log: $(cat "$work/resume.log")"
    a=$("$distrain" eval --ckpt full/ckpt-003200.h5 --json)
    b=$("$distrain" eval --ckpt killed/ckpt-003200.h5 --json)
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "resumed run ends where the uninterrupted one does ($a)" || bad "eval differs: $a vs $b"
    json_true '[[o[k] for k in o if k not in ("images_per_sec", "seconds")] for o in J[0]] ==
      [[o[k] for k in o if k not in ("images_per_sec", "seconds")] for o in J[1]] and len(J[0]) == 400' full/metrics.jsonl killed/metrics.jsonl &&
      ok "metrics.jsonl of the resumed run matches" || bad "metrics differ"
  fi
  ;;
sigterm)
  # SIGTERM mid-epoch (1000 steps an epoch): the step ends, its checkpoint is saved, the run
  # exits 3 with one line; the rerun resumes there and ends bitwise where an uninterrupted
  # run does. A second SIGTERM ends a run at once, as the signal's default action.
  cd "$work" || exit 1
  base=(--set data.train_examples=32000 --set train.epochs=2 --set train.validate=false --set checkpoint.every_epochs=0 --progress line)
  long=("${base[@]}" --progress-every 10)
  start=$(date +%s.%N)
  "$distrain" train "$tiny" "${long[@]}" --run-dir full >/dev/null 2>&1
  echo "uninterrupted run: $(seconds_since "$start") s"
  "$distrain" train "$tiny" "${long[@]}" --run-dir stopped >"$work/stop.out" 2>"$work/stop.err" &
  pid=$!
  for _ in $(seq 1 600); do
    grep -qs '^epoch 1/2 batch 300/1000' "$work/stop.out" && break
    sleep 0.05
  done
  start=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  echo "SIGTERM to exit: $(seconds_since "$start") s"
  line=$(grep -c '' "$work/stop.err")
  msg=$(grep '^stopped by' "$work/stop.out")
  step=$(echo "$msg" | sed -n 's/^stopped by SIGTERM at step \([0-9]*\); rerun to resume$/\1/p')
  if [ "$rc" -eq 3 ] && [ "$line" -eq 0 ] && [ -n "$step" ] && [ "$(echo "$msg" | wc -l)" -eq 1 ]; then
    ok "SIGTERM: exit 3, '$msg'"
  else
    bad "SIGTERM: exit $rc, '$msg', stderr: $(head -c 400 "$work/stop.err")"
  fi
  ckpt=stopped/$(printf 'ckpt-%06d.h5' "${step:-0}")
  if [ -f "$ckpt" ] && [ $((step % 1000)) -ne 0 ] && [ ! -f stopped/summary.json ] && ! ls stopped | grep -q tmp; then
    ok "stopped mid-epoch with $ckpt saved, no summary.json, no partial file"
  else
    bad "after SIGTERM: step '$step', files: $(ls stopped | tr '\n' ' ')"
  fi
  start=$(date +%s.%N)
  "$distrain" train "$tiny" "${long[@]}" --run-dir stopped >"$work/resume.log" 2>&1
  rc=$?
  echo "resumed run: $(seconds_since "$start") s"
  [ "$rc" -eq 0 ] && grep -q "resuming from $ckpt" "$work/resume.log" && ok "rerun resumes from $ckpt" || bad "resume (exit $rc): $(tail -n 3 "$work/resume.log")"
  "$distrain" compare full/ckpt-002000.h5 stopped/ckpt-002000.h5 --rtol 0 >"$work/cmp.log" 2>&1 &&
    ok "resumed run ends bitwise where the uninterrupted one does" || bad "compare: $(tail -n 3 "$work/cmp.log")"
  json_true '[[o[k] for k in o if k not in ("images_per_sec", "seconds")] for o in J[0]] ==
    [[o[k] for k in o if k not in ("images_per_sec", "seconds")] for o in J[1]] and len(J[0]) == 2' full/metrics.jsonl stopped/metrics.jsonl &&
    ok "metrics.jsonl of the resumed run matches" || bad "metrics differ"
  # Long steps (4 micro-batches of 4096, 0.3 s here), the first signal early in the second,
  # the second signal as soon as the watcher has taken the first off the process's pending
  # set (two pending at once would merge into one): it comes while the first is being acted
  # on. Exit 143 says the second one ended the process by its default action, however far
  # the first had got. (A fixed 50 ms between the two lost the race to a fast step.)
  "$distrain" train "$tiny" "${base[@]}" --set strategy.per_replica_batch=4096 --set train.accumulate_steps=4 \
    --set model.layers.1.filters=64 --progress-every 1 --run-dir twice >"$work/twice.out" 2>&1 &
  pid=$!
  for _ in $(seq 1 3000); do
    grep -qs '^epoch 1/2 batch 1/2' "$work/twice.out" && break
    sleep 0.01
  done
  kill -TERM "$pid"
  for _ in $(seq 1 5000); do  # SIGTERM (15) is bit 14 of ShdPnd
    pending=$(awk '/^ShdPnd:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
    [ -n "$pending" ] && (((16#$pending & 0x4000) != 0)) || break
    sleep 0.001
  done
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 143 ] && ok "a second SIGTERM ends the run at once (exit 143)" ||
    bad "two SIGTERMs: exit $rc: $(tail -n 2 "$work/twice.out")"
  ;;
run_lock)
  # One trainer per run folder: a second train (even with --fresh) exits 2 naming the
  # first's PID and deletes nothing; once the first has ended the folder is free. The first
  # is long (stopped with SIGTERM at the end) and paused while the others try, so that it
  # cannot finish first however fast or loaded the machine; keep = 1000 keeps ckpt-100.
  cd "$work" || exit 1
  "$distrain" train "$tiny" --set train.epochs=100000 --set checkpoint.every_steps=100 --set checkpoint.keep=1000 \
    --run-dir locked >"$work/first.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [ -f locked/ckpt-000100.h5 ] && [ "$(cat locked/.lock 2>/dev/null)" = "$pid" ] && break
    sleep 0.05
  done
  kill -STOP "$pid"
  expect_error "a second train on the folder is refused" "locked: another distrain train (PID $pid) is using this run folder" \
    "$distrain" train "$tiny" --run-dir locked
  expect_error "a second train --fresh is refused" "locked: another distrain train (PID $pid)" "$distrain" train "$tiny" --run-dir locked --fresh
  [ -f locked/ckpt-000100.h5 ] && ok "the refused --fresh deleted nothing" || bad "locked/ckpt-000100.h5 is gone"
  kill -CONT "$pid"
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 3 ] && ok "the first run ends (SIGTERM, exit 3)" || bad "first run: exit $rc: $(tail -n 3 "$work/first.log")"
  "$distrain" train "$tiny" --set train.epochs=1 --run-dir locked --fresh >"$work/after.log" 2>&1 &&
    [ -f locked/summary.json ] && ok "the folder is free once the first ends" || bad "after: $(tail -n 3 "$work/after.log")"
  ;;
recipes)
  # Every shipped recipe is checked and trains a few steps on the real data; a GPU recipe
  # on cpu:0 where there is no GPU. From the repository root, as the README runs them
  # (the GPT recipe's data.path is relative).
  cd "$src" || exit 1
  "$distrain" info | grep -q " cuda:0 " && gpu=yes || gpu=no
  for r in "$src"/recipes/*.toml; do
    n=$(basename "$r")
    on=()
    grep -q '^devices = \["cuda' "$r" && [ $gpu = no ] && on=(--set 'strategy.devices=["cpu:0"]')
    if grep -qE '^name = "(parameter_server|mesh)"' "$r"; then
      "$distrain" check "$r" "${on[@]}" >"$work/check.log" 2>&1 && ok "check $n" || bad "check $n: $(tail -n 2 "$work/check.log")"
      if grep -q '^name = "parameter_server"' "$r"; then  # its servers' ranges, each from where the last ends
        awk '/^server / { gsub(/[\[\),]/, " "); if ($6 != end + 0) bad = 1; end = $7; n++ }
             END { exit !(n >= 1 && !bad) }' "$work/check.log" && grep -q '^launch      mpirun -np N .* with N > num_ps' "$work/check.log" &&
          ok "check $n prints the launch line and each server's range" || bad "check $n: $(grep -E '^(launch|server)' "$work/check.log")"
      fi
      echo "($n trains under mpirun: tests/dist/dist_test.sh parameter_server, mesh)"
      continue
    fi
    if [ "$n" = llama3_8b.toml ]; then  # a GPU cluster's model: its memory per GPU predicted, never trained here
      "$distrain" check "$r" --set 'strategy.devices=["cpu:0","cpu:1","cpu:2","cpu:3","cpu:4","cpu:5","cpu:6","cpu:7"]' \
        >"$work/check.log" 2>&1 && grep -q '^memory .*device total' "$work/check.log" &&
        grep -q '^trainable parameters: 8030261248$' "$work/check.log" &&
        ok "check $n: 8,030,261,248 parameters, memory per GPU predicted" || bad "check $n: $(tail -n 2 "$work/check.log")"
      # plan: this machine cannot hold a profile of its blocks (66 GiB at a micro-batch of
      # 2); a GPU's rates price them.
      if [ "$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)" -ge 60 ]; then
        echo "(plan $n's refusal to profile not tested: this machine could hold the profile)"
      else
        "$distrain" plan "$r" --ranks 8 >"$work/plan8b.log" 2>&1
        rc=$?
        [ "$rc" -eq 2 ] && grep -q "^error: plan .*needs .* but this machine has .* available; .*--device-tflops and --device-bandwidth" \
          "$work/plan8b.log" && ok "plan $n: a profile this machine cannot hold is refused, naming --device-tflops" ||
          bad "plan $n without rates: exit $rc: $(tail -n 2 "$work/plan8b.log")"
      fi
      "$distrain" plan "$r" --ranks 8 --device-tflops 989 --device-bandwidth 2.4TB/s --links intra=450GB/s \
        --set 'strategy.devices=["cuda:0"]' --set strategy.per_replica_batch=2 >"$work/plan8b.log" 2>&1
      unwrap_report "$work/plan8b.log"
      grep -q "^compute     priced from each layer's work on a device of 989 TFLOP/s, 2400 GB/s" "$work/plan8b.log" &&
        grep -q "^plan        llama3_8b on 8 rank(s), 1 host(s) of 8; global batch 16;" "$work/plan8b.log" &&
        grep -q "^choice      data" "$work/plan8b.log" && ok "plan $n on 8 GPUs priced from their rates" ||
        bad "plan $n with rates: $(tail -n 3 "$work/plan8b.log")"
      continue
    fi
    if grep -q '^device_memory = "2GiB"' "$r"; then  # too big for one device by design: refused, then trained on four
      "$distrain" check "$r" >"$work/check.log" 2>&1
      rc=$?
      [ "$rc" -eq 2 ] && grep -q '^memory .*device total' "$work/check.log" &&
        grep -q '^error: .*a device would need .* over strategy.device_memory = 2.00 GiB' "$work/check.log" &&
        ok "check $n: predicts one_device past its device memory, then refuses" || bad "check $n: exit $rc: $(tail -n 2 "$work/check.log")"
      "$distrain" train "$r" --run-dir "$work/$n" >"$work/train.log" 2>&1
      rc=$?
      [ "$rc" -ne 0 ] && grep -q "device cpu:0: out of memory (strategy.device_memory = 2.00 GiB)" "$work/train.log" &&
        ok "$n: one_device is refused within its device memory" || bad "$n on one_device: exit $rc: $(tail -n 2 "$work/train.log")"
      "$distrain" train "$r" --set strategy.name=zero --set strategy.stage=3 --set 'strategy.devices=["cpu:0","cpu:1","cpu:2","cpu:3"]' \
        --set strategy.per_replica_batch=1 --set train.steps=2 --run-dir "$work/$n" >"$work/train.log" 2>&1 &&
        [ -f "$work/$n/ckpt-000002.h5" ] && ok "$n: zero stage 3 on four devices trains 2 steps" || bad "$n zero 3: $(tail -n 2 "$work/train.log")"
      rm -rf "${work:?}/$n"
      continue
    fi
    steps=30
    if grep -q '^tokenizer = "data/shakespeare_bpe2k.model"' "$r"; then  # the README's first command makes it
      "$distrain" tokenizer train data/tiny_shakespeare.txt --vocab 2000 --out data/shakespeare_bpe2k.model >"$work/tok.log" 2>&1 ||
        bad "tokenizer train for $n: $(cat "$work/tok.log")"
    fi
    if grep -q '^dataset = "tokens"' "$r"; then  # GPT-2 BPE files a user brings: random tokens in llm.c's format
      steps=3
      python3 - "$work/tokens.bin" <<'PY'
import array, random, sys
random.seed(1)
header = array.array("i", [20240520, 1, 20000] + [0] * 253)
tokens = array.array("H", (random.randrange(50257) for _ in range(20000)))
with open(sys.argv[1], "wb") as f:
    header.tofile(f)
    tokens.tofile(f)
PY
      on+=(--set "data.train_file=\"$work/tokens.bin\"" --set "data.val_file=\"$work/tokens.bin\"")
    fi
    if "$distrain" check "$r" "${on[@]}" >"$work/check.log" 2>&1; then ok "check $n"; else bad "check $n: $(tail -n 2 "$work/check.log")"; fi
    if grep -q '^name = "multi_worker_mirrored"' "$r"; then
      grep -q "^launch      mpirun -np N distrain train $r (one worker per process" "$work/check.log" &&
        ok "check $n prints how to launch it" || bad "check $n: no launch line: $(head -n 2 "$work/check.log")"
    fi
    if grep -q '^stage = 1' "$r"; then
      grep -q '^note        zero stage 1 shards only the optimizer state' "$work/check.log" &&
        ok "check $n explains stage 1's whole gradients" || bad "check $n: no stage 1 note"
    fi
    if "$distrain" train "$r" "${on[@]}" --set train.steps=$steps --set train.validate=false --run-dir "$work/$n" >"$work/train.log" 2>&1 &&
      [ -f "$work/$n/ckpt-0000$(printf %02d $steps).h5" ]; then
      ok "train $n for $steps steps"
    else
      bad "train $n: $(tail -n 2 "$work/train.log")"
    fi
  done
  ;;
gpt)
  # A 2-block GPT on Tiny Shakespeare: trains, evaluates as it validated, generates the same
  # text from the same seed, refuses what it cannot do by name, and plans a mesh.
  cd "$work" || exit 1
  sed -e 's/^count = 4/count = 2/' -e 's/^output_dim = 128/output_dim = 32/' -e 's/^  units = 512/  units = 64/' \
    -e 's/^  units = 128/  units = 32/' -e 's/^seq_len = 64/seq_len = 32/' -e 's/^input_shape = \[64\]/input_shape = [32]/' \
    -e "s|^path = .*|path = \"$src/data/tiny_shakespeare.txt\"|" "$src/recipes/shakespeare_char_gpt.toml" >"$work/gpt.toml"
  if "$distrain" train "$work/gpt.toml" --set train.steps=200 --set train.eval_batch=256 --run-dir g >"$work/g.log" 2>&1; then
    ok "a small GPT trains 200 steps"
  else
    bad "gpt train: $(tail -n 3 "$work/g.log")"
  fi
  json_true 'J[0]["val_loss"] < 3.15 and J[0]["steps"] == 200' g/summary.json && ok "its validation loss falls below 3.15 (ln 65 = 4.17 at the start)" ||
    bad "gpt summary: $(cat g/summary.json)"
  "$distrain" eval --ckpt g --json >"$work/geval.json" 2>"$work/geval.err"
  json_true 'abs(J[0]["loss"] - J[1]["val_loss"]) < 1e-6' "$work/geval.json" g/summary.json && ok "eval gives the validation loss" ||
    bad "gpt eval: $(cat "$work/geval.json" "$work/geval.err")"
  "$distrain" generate --ckpt g --prompt "ROMEO:" --tokens 80 --seed 7 >"$work/gen1.txt" 2>"$work/gen.err"
  "$distrain" generate --ckpt g --prompt "ROMEO:" --tokens 80 --seed 7 >"$work/gen2.txt" 2>>"$work/gen.err"
  "$distrain" generate --ckpt g --prompt "ROMEO:" --tokens 80 --seed 8 >"$work/gen3.txt" 2>>"$work/gen.err"
  if [ "$(head -c 6 "$work/gen1.txt")" = "ROMEO:" ] && [ "$(wc -c <"$work/gen1.txt")" -ge 87 ] && cmp -s "$work/gen1.txt" "$work/gen2.txt" &&
    ! cmp -s "$work/gen1.txt" "$work/gen3.txt"; then
    ok "generate: the prompt then 80 characters, the same for a seed, others for another"
  else
    bad "generate: $(cat "$work/gen1.txt" "$work/gen3.txt" "$work/gen.err")"
  fi
  "$distrain" bench "$work/gpt.toml" --steps 3 --warmup 1 --json >"$work/gbench.json" 2>"$work/gbench.err"
  json_true 'J[0]["tokens_per_example"] == 32 and J[0]["images_per_sec"] > 0' "$work/gbench.json" &&
    ok "bench times a GPT's steps on random tokens" || bad "gpt bench: $(cat "$work/gbench.json" "$work/gbench.err")"
  expect_error "generate: a prompt character outside the vocabulary" "character '€' (U+20AC) is not in the vocabulary of 65" \
    "$distrain" generate --ckpt g --prompt "a€"
  expect_error "generate: a negative temperature" "--temperature -1: must be a finite number >= 0" \
    "$distrain" generate --ckpt g --temperature -1
  # bf16 where the CPU has no bf16 kernels (oneDNN told to use no more than AVX2) is
  # emulated, and said so: the same losses as the bf16 kernels give, to float32 rounding.
  b16=("$work/gpt.toml" --set train.precision=bf16 --set train.steps=3 --set train.validate=false --progress none)
  "$distrain" train "${b16[@]}" --run-dir b16 >"$work/b16.log" 2>&1
  env ONEDNN_MAX_CPU_ISA=AVX2 "$distrain" train "${b16[@]}" --run-dir b16e >"$work/b16e.log" 2>&1
  grep -q '^train.precision = "bf16" on cpu:0: this CPU has neither AVX512_BF16 nor AMX: bf16 products are emulated' "$work/b16e.log" &&
    json_true 'abs(J[0][-1]["loss"] - J[1][-1]["loss"]) <= 1e-4 * J[1][-1]["loss"]' b16e/metrics.jsonl b16/metrics.jsonl &&
    ok "bf16 without bf16 kernels: emulated, said so, the same loss" || bad "bf16 emulated: $(tail -n 3 "$work/b16e.log" "$work/b16.log")"
  # On the mesh: check shows attention split by heads, the embedding and head by
  # vocabulary (65 tokens: 32 and 33), the layer norms and the position embedding on
  # sequence shards; with the vocabulary whole, a scatter after the token embedding.
  # Sequence parallelism without a tensor axis is refused by name, and so is a vocabulary
  # split asked for where the loss cannot combine slices.
  "$distrain" check "$work/gpt.toml" --set strategy.name=mesh --set strategy.tensor=2 --set strategy.sequence_parallel=true \
    >"$work/mesh.log" 2>&1 && grep -q "h.0.attn (by heads)" "$work/mesh.log" && grep -q "h.0.ln_1 (on a sequence shard)" "$work/mesh.log" &&
    grep -q "wte (by vocabulary), wpe (on a sequence shard)" "$work/mesh.log" && grep -q "head (by vocabulary)$" "$work/mesh.log" &&
    grep -q "^vocabulary  split over the tensor axis" "$work/mesh.log" && grep -q "wte/embeddings \[32:65, :\] of (65, 32)" "$work/mesh.log" &&
    ok "check: the GPT on a tensor 2 mesh with sequence and vocabulary parallelism" ||
    bad "gpt mesh check: $(head -n 3 "$work/mesh.log")"
  "$distrain" check "$work/gpt.toml" --set strategy.name=mesh --set strategy.tensor=2 --set strategy.sequence_parallel=true \
    --set strategy.vocab_parallel=false >"$work/mesh.log" 2>&1 && grep -q "wte_sequence_scatter (cuts the sequence)" "$work/mesh.log" &&
    grep -q "^vocabulary  whole on every rank: strategy.vocab_parallel = false" "$work/mesh.log" &&
    ok "check: vocab_parallel = false keeps the vocabulary whole" || bad "gpt mesh check, vocabulary whole: $(head -n 3 "$work/mesh.log")"
  expect_error "sequence_parallel without a tensor axis" "strategy.sequence_parallel: shards sequences over the tensor axis" \
    "$distrain" check "$work/gpt.toml" --set strategy.name=mesh --set strategy.sequence_parallel=true
  expect_error "vocab_parallel = true with a loss on probabilities" \
    "strategy.vocab_parallel = true needs loss sparse_categorical_crossentropy from logits" \
    "$distrain" check "$work/gpt.toml" --set strategy.name=mesh --set strategy.tensor=2 --set strategy.vocab_parallel=true --set loss.from_logits=false
  # plan: the Shakespeare GPT (3.2 MB of gradients, 0.4 MB of activations a step) on 2
  # hosts of 1 rank over a 1 Mbit/s link chooses the pipeline (activations cross the link,
  # not the gradients); the written recipe is that mesh and check takes it. (The small GPT
  # above has fewer weights than activations: data parallelism is right for it on any link.)
  # So slow a link that the choice holds on any machine: at 100 Mbit/s the all-reduce is
  # 0.26 s, which a build under ASan (the pipeline's bubble 27x the release's) outweighed.
  "$distrain" plan "$src/recipes/shakespeare_char_gpt.toml" --set "data.path=\"$src/data/tiny_shakespeare.txt\"" --ranks 2 \
    --hosts 2 --links inter=1Mbit/s --profile-steps 2 --write "$work/planned.toml" >"$work/plan.log" 2>&1
  unwrap_report "$work/plan.log"
  grep -q "^choice      data 1 x pipeline 2 " "$work/plan.log" && grep -q "^  1  data 1 x pipeline 2 " "$work/plan.log" &&
    "$distrain" check "$work/planned.toml" >"$work/planned.log" 2>&1 && grep -q "^mesh        data 1 x tensor 1 x pipeline 2" "$work/planned.log" &&
    ok "plan: a slow link between 2 hosts chooses pipeline 2, and --write's recipe checks" ||
    bad "plan slow link: $(grep -E '^(choice|  1 )' "$work/plan.log") $(tail -n 2 "$work/plan.log" "$work/planned.log")"
  grep -qF "$(sed -n 2p "$src/recipes/shakespeare_char_gpt.toml")" "$work/planned.toml" &&
    grep -qxF "$(grep -m1 '^learning_rate' "$src/recipes/shakespeare_char_gpt.toml")" "$work/planned.toml" &&
    ok "plan --write keeps the recipe's comments and numbers as written" || bad "plan --write: $(head -n 5 "$work/planned.toml")"
  "$distrain" check "$work/planned.toml" --json >"$work/planned.json" 2>/dev/null &&
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert len(j["memory_per_rank"]) == 2, j' "$work/planned.json" &&
    ok "check --json of a mesh: each rank's memory" || bad "check --json mesh: $(cat "$work/planned.json")"
  python3 - "$work/plan.log" <<'PY' && ok "plan: the table within 80 columns, its figures under their headings" || bad "plan table: $(sed -n 4,8p "$work/plan.log")"
import sys
lines = open(sys.argv[1]).read().splitlines()
at = next(i for i, l in enumerate(lines) if l.lstrip().startswith("#") and "peak/rank" in l)
header = lines[at]
end = header.index("peak/rank") + len("peak/rank")
names = [i for i in range(at + 1, len(lines)) if lines[i][:3].strip().isdigit()]
figures = [lines[i + 1] for i in names]
assert names and all(f[:end].endswith("B") and f[end] == " " and f.rstrip()[-1].isdigit() for f in figures), figures
assert all(len(l) <= 80 for l in [header] + figures + [lines[i] for i in names]), header
PY
  "$distrain" plan "$work/gpt.toml" --ranks 4 --hosts 2 --profile-steps 2 --json >"$work/plan.json" 2>"$work/plan.err"
  json_true '[c for c in J[0] if c["fits"]][0]["step_ms"]["total"] > 0 and all(c["data"] * c["tensor"] * c["pipeline"] == 4 and c["tensor"] <= 2 for c in J[0])' \
    "$work/plan.json" && ok "plan --json: every layout of 4 ranks on 2 hosts, tensor inside a host" ||
    bad "plan json: $(head -c 300 "$work/plan.json") $(cat "$work/plan.err")"
  json_true 'sorted({c["zero_stage"] for c in J[0]}) == [0, 2, 3] and all(("strategy.name=\"zero\"" in c["set"]) == (c["zero_stage"] > 0) and (c["zero_stage"] == 0 or c["data"] == 4) for c in J[0])' \
    "$work/plan.json" && ok "plan --json: ZeRO-2 and -3 weighed on the data axis alone, as zero recipes" ||
    bad "plan json, zero: $(head -c 300 "$work/plan.json")"
  # Gradient accumulation trades time for activation memory: on 2 ranks of 30 MiB (data 2
  # needs 33 MiB, accumulating 2 micro-batches 23 MiB) plan offers it, and only where the
  # same layout with fewer micro-batches does not fit.
  "$distrain" plan "$src/recipes/shakespeare_char_gpt.toml" --set "data.path=\"$src/data/tiny_shakespeare.txt\"" --ranks 2 \
    --device-memory 30MiB --profile-steps 1 --profile-rounds 1 --json >"$work/plan_acc.json" 2>"$work/plan_acc.err"
  json_true 'any(c["layout"] == "data 2, accumulate 2" and c["fits"] and "strategy.micro_batches=2" in c["set"] for c in J[0]) and any(c["layout"] == "data 2" and not c["fits"] for c in J[0]) and all(not any(o["fits"] and o["micro_batches"] < c["micro_batches"] and all(o.get(k) == c[k] for k in c if k not in ("layout", "micro_batches", "peak_bytes", "fits", "set", "step_ms", "tokens_per_sec", "sent_per_step")) for o in J[0]) for c in J[0] if c["pipeline"] == 1 and c["micro_batches"] > 1)' \
    "$work/plan_acc.json" && ok "plan: accumulation where the layout does not fit without it (data 2, accumulate 2 in 30 MiB)" ||
    bad "plan accumulation: $(head -c 300 "$work/plan_acc.json") $(cat "$work/plan_acc.err")"
  # A model bigger than a device (201.7M parameters, 2 GiB devices): its profile runs on its
  # first blocks and every layout is weighed without storage.
  if "$distrain" plan "$src/recipes/gpt_bigger_than_a_device.toml" --set "data.path=\"$src/data/tiny_shakespeare.txt\"" \
    --ranks 4 --profile-steps 1 --profile-rounds 1 --top 3 >"$work/plan_big.log" 2>&1 && unwrap_report "$work/plan_big.log" &&
    grep -q "^choice .*the model does not fit one device" "$work/plan_big.log"; then
    ok "plan: a model bigger than a device is planned ($(grep '^choice' "$work/plan_big.log" | cut -c 13-60)...)"
  else
    bad "plan, model bigger than a device: $(tail -n 3 "$work/plan_big.log")"
  fi
  expect_error "plan: ranks not a multiple of hosts" "--ranks 3 must be a multiple of --hosts 2" \
    "$distrain" plan "$work/gpt.toml" --ranks 3 --hosts 2
  expect_error "plan: a count below 1, in plain words" "--profile-rounds: must be a whole number of at least 1, got '0'" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --profile-rounds 0
  expect_error "bench: a negative warm-up, in plain words" "--warmup: must be a whole number of at least 0, got '-1'" \
    "$distrain" bench "$work/gpt.toml" --warmup -1
  expect_error "plan: a link it cannot read" "--links inter=fast: expected intra=RATE/s,inter=RATE/s" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --links inter=fast
  expect_error "plan --write with nothing that fits" "no layout fits; raise --device-memory or add ranks" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --device-memory 1KiB --write "$work/never.toml"
  expect_error "plan --measure outside the cluster" "plan --measure runs on the cluster it plans: launch it with mpirun -np 2" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --measure
  expect_error "plan: a device's bandwidth without its rate" "--device-bandwidth needs --device-tflops too" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --device-bandwidth 2TB/s
  expect_error "plan: a device's rate without its bandwidth" "--device-tflops needs --device-bandwidth too" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --device-tflops 400
  expect_error "plan: a bandwidth it cannot read" "--device-bandwidth 2TB: expected a rate in GB/s, TB/s" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --device-tflops 400 --device-bandwidth 2TB
  expect_error "plan: other devices' rates and --measure" "--device-tflops prices other devices: give one or the other" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --device-tflops 400 --device-bandwidth 2TB/s --measure
  expect_error "plan: one device rate for two precisions" "--device-tflops is one precision's rate of products" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --device-tflops 400 --device-bandwidth 2TB/s --precision both
  expect_error "plan: a device rate of 0" "--device-tflops 0: a device's rate must be above 0" \
    "$distrain" plan "$work/gpt.toml" --ranks 2 --device-tflops 0 --device-bandwidth 2TB/s
  ;;
*)
  echo "unknown group $group"
  exit 2
  ;;
esac

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
