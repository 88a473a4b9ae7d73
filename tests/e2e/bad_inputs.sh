#!/usr/bin/env bash
# A corpus of hostile or unlucky inputs: bad_inputs.sh DISTRAIN SOURCE_DIR
# Each case runs the executable under `timeout` and must end cleanly: exit code 2 (bad
# input or a condition of the machine the user can fix) with at most 3 lines on stderr
# naming the problem, never "internal error", never a signal, never a hang; or, for inputs
# that are legal, exit 0 with the work done. Where a case can lose data, it checks that the
# earlier checkpoints are still there. Cases needing root (tmpfs mounts) are skipped,
# saying why, where mounting fails. Ends with one summary line; exit 1 unless all clean.
set -u
distrain=$1
src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_bad_inputs.XXXXXX")
mounts=()
cleanup() {
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
export OMP_NUM_THREADS=2
cases=0 clean=0 crash=0 hang=0 accepted=0 internal=0 other=0 skipped=0

# run CMD...: runs under a time limit; sets rc and leaves stdout/stderr in $work/out, $work/err.
run() {
  timeout 300 "$@" >"$work/out" 2>"$work/err"
  rc=$?
}

# classify NAME WANT_RC SUBSTRING [EXTRA_CHECK]: files the last run under one outcome.
# WANT_RC 2: an error whose stderr (<= 3 lines) holds SUBSTRING; 0: success. EXTRA_CHECK
# is a shell condition that must also hold (e.g. earlier checkpoints still present).
classify() {
  local name=$1 want=$2 substring=$3 extra=${4:-true}
  local lines
  lines=$(wc -l <"$work/err")
  cases=$((cases + 1))
  if [ "$rc" -eq 124 ]; then
    hang=$((hang + 1)); echo "HANG: $name"
  elif [ "$rc" -ge 128 ]; then
    crash=$((crash + 1)); echo "CRASH: $name (exit $rc): $(head -c 300 "$work/err")"
  elif grep -q "internal error" "$work/err" || [ "$rc" -eq 1 ]; then
    internal=$((internal + 1)); echo "INTERNAL ERROR: $name (exit $rc): $(head -c 400 "$work/err")"
  elif [ "$want" -ne 0 ] && [ "$rc" -eq 0 ]; then
    accepted=$((accepted + 1)); echo "ACCEPTED WRONGLY: $name: $(tail -c 300 "$work/out")"
  elif [ "$rc" -eq "$want" ] && { [ "$want" -eq 0 ] || { [ "$lines" -le 3 ] && grep -qF -- "$substring" "$work/err"; }; } &&
    eval "$extra"; then
    clean=$((clean + 1)); echo "clean: $name (exit $rc)${substring:+: $(head -c 300 "$work/err")}"
  else
    other=$((other + 1))
    echo "WRONG: $name (exit $rc, $lines stderr lines, wanted exit $want with '$substring', check: $extra): $(head -c 400 "$work/err")"
  fi
}

skip() { skipped=$((skipped + 1)); echo "skipped: $1"; }

# mount_tmpfs DIR OPTIONS: a small file system of our own; false where we may not mount.
mount_tmpfs() {
  mkdir -p "$1"
  mount -t tmpfs -o "$2" tmpfs "$1" 2>/dev/null || return 1
  mounts+=("$1")
}

tiny="$work/tiny.toml"
cat >"$tiny" <<'TOML'
name = "tiny"
seed = 3
[data]
dataset = "synthetic"
train_examples = 128
test_examples = 64
image_shape = [12, 12, 1]
[model]
input_shape = [12, 12, 1]
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dense"
units = 10
[strategy]
per_replica_batch = 32
[train]
epochs = 2
[checkpoint]
dir = "runs/tiny"
TOML
ckpts() { find "$1" -maxdepth 1 -name 'ckpt-*.h5' 2>/dev/null | wc -l; }
no_tmp() { [ -z "$(find "$1" -maxdepth 1 -name '*.tmp*' 2>/dev/null)" ]; }  # ckpt-N.h5.tmp.PID

# --- the recipe file itself ---
mkdir -p "$work/folder.toml"
run "$distrain" check "$work/folder.toml"
classify "recipe is a folder" 2 "is a folder"
: >"$work/empty.toml"
run "$distrain" check "$work/empty.toml"
classify "recipe is an empty file" 2 "model"
head -c 4096 /dev/urandom >"$work/garbage.toml"
printf '\x00\xff\xfe[[[\n' >>"$work/garbage.toml"
run "$distrain" check "$work/garbage.toml"
classify "recipe is binary garbage" 2 "garbage.toml"

# --- gradient clipping: a norm it cannot compute is refused by name ---
run "$distrain" check "$tiny" --set optimizer.clip_norm=-1
classify "clip_norm negative" 2 "optimizer.clip_norm: must be >= 0"
run "$distrain" check "$tiny" --set optimizer.clip_norm=1 --set strategy.name=parameter_server --set strategy.staleness=0
classify "clip_norm with a synchronous parameter server" 2 "needs an asynchronous parameter_server"
run "$distrain" check "$tiny" --set strategy.offload_optimizer=true
classify "offload_optimizer on one_device: dropped with a notice" 0 "" \
  'grep -q "strategy \"one_device\" does not read strategy.offload_optimizer (zero, mesh only): ignored" "$work/out"'
run "$distrain" check "$tiny" --set train.recompute=blocks
classify "recompute without a repeat block" 2 "train.recompute = \"blocks\" reruns each repeat block's forward"
# Over the device budget: check prints the prediction, then says it is over (no allocation
# error halfway through building the model).
run "$distrain" check "$tiny" --set strategy.device_memory=16KiB
classify "check over strategy.device_memory" 2 "over strategy.device_memory = 16.00 KiB; shard" \
  'grep -q "^memory .*device total" "$work/out"'
run "$distrain" check "$tiny" --set train.precision=fp16
classify "precision fp16" 2 "train.precision"

# --- sizes: overflow and memory, refused by check and by train before any allocation ---
run "$distrain" check "$tiny" --set strategy.per_replica_batch=9223372036854775807
classify "per_replica_batch = INT64_MAX (check)" 2 "strategy.per_replica_batch"
run "$distrain" train "$tiny" --set strategy.per_replica_batch=9223372036854775807 --run-dir "$work/r_max"
classify "per_replica_batch = INT64_MAX (train)" 2 "strategy.per_replica_batch" '[ "$(ckpts "$work/r_max")" -eq 0 ]'
run "$distrain" check "$tiny" --set strategy.per_replica_batch=1000000000
classify "per_replica_batch = 1e9 exceeds memory (check)" 2 "lower strategy.per_replica_batch"
run "$distrain" train "$tiny" --set strategy.per_replica_batch=1000000000 --run-dir "$work/r_1e9"
classify "per_replica_batch = 1e9 exceeds memory (train)" 2 "lower strategy.per_replica_batch"
run "$distrain" check "$tiny" --set strategy.name=mirrored --set 'strategy.devices=["cpu:0","cpu:1"]' \
  --set strategy.per_replica_batch=4611686018427387904
classify "global batch overflows (2 replicas)" 2 "strategy.per_replica_batch"
run "$distrain" check "$tiny" --set train.eval_batch=1000000000000
classify "eval_batch exceeds memory" 2 "train.eval_batch"
run "$distrain" check "$tiny" --set model.layers.1.units=5000000000
classify "a huge layer exceeds memory" 2 "out of memory"
run "$distrain" check "$tiny" --set 'model.input_shape=[4294967296,4294967296,4]'
classify "input_shape product overflows" 2 "model.input_shape"
run "$distrain" check "$tiny" --set model.layers.1.units=4611686018427387904
classify "a layer's variable size overflows" 2 "model.layers[1]"
run "$distrain" check "$tiny" --set train.epochs=9223372036854775807
classify "train.epochs x batches overflows" 2 "train.epochs"

# --- devices ---
run "$distrain" check "$tiny" --set 'strategy.devices=["cpu:999"]'
classify "cpu:999" 2 "strategy.devices"
run "$distrain" check "$tiny" --set 'strategy.devices=["cuda:99"]'
classify "cuda:99" 2 "cuda:99"

# --- names and sizes that the checkpoint file must hold ---
run "$distrain" check "$tiny" --set 'model.layers.1.name="a/b"'
classify "layer name with '/'" 2 "model.layers[1].name"
run "$distrain" check "$tiny" --set 'model.layers.1.name="."'
classify "layer name '.'" 2 "model.layers[1].name"
run "$distrain" check "$tiny" --set 'model.layers.1.name=""'
classify "empty layer name" 2 "model.layers[1].name"
long_name=$(head -c 70000 /dev/zero | tr '\0' 'x')
run "$distrain" train "$tiny" --set "name=\"$long_name\"" --run-dir "$work/r_long" --progress none
rc_train=$rc
[ "$rc_train" -eq 0 ] && run "$distrain" eval --ckpt "$work/r_long/ckpt-000008.h5"
classify "recipe text over HDF5's 64 KiB attribute limit trains, saves and evaluates" 0 "" \
  '[ "$rc_train" -eq 0 ] && [ "$(ckpts "$work/r_long")" -eq 2 ]'
run "$distrain" eval --ckpt "$work/r_long/ckpt-000008.h5" --device cpu:7
classify "eval --device cpu:7" 2 "--device cpu:7: eval runs on one device"
for rtol in -1 nan; do
  run "$distrain" compare "$work/r_long/ckpt-000008.h5" "$work/r_long/ckpt-000008.h5" --rtol "$rtol"
  classify "compare --rtol $rtol" 2 "--rtol: must be a number >= 0"
done

# --- mesh keys that change nothing, limits that overflow ---
run "$distrain" check "$tiny" --set strategy.name=mesh --set strategy.shard_optimizer=true
classify "shard_optimizer with data = 1" 2 "strategy.shard_optimizer"
run "$distrain" check "$tiny" --set strategy.timeout_seconds=1e10
classify "timeout_seconds = 1e10 overflows a deadline" 2 "strategy.timeout_seconds"

# --- the run folder ---
mkdir -p "$work/r_stray"
: >"$work/r_stray/ckpt-99999999999999999999.h5"
run "$distrain" train "$tiny" --run-dir "$work/r_stray" --progress none
classify "stray ckpt-99999999999999999999.h5 is ignored" 0 "" \
  '[ -f "$work/r_stray/ckpt-000008.h5" ] && [ -f "$work/r_stray/ckpt-99999999999999999999.h5" ]'
: >"$work/a_file"
run "$distrain" train "$tiny" --run-dir "$work/a_file" --progress none
classify "--run-dir is a file" 2 "not a folder"
run "$distrain" train "$tiny" --run-dir "$work/a_file/run" --progress none
classify "--run-dir under a file" 2 "a_file/run"
if mount_tmpfs "$work/ro" size=1m; then
  mkdir -p "$work/ro/run"
  if mount -o remount,ro "$work/ro" 2>/dev/null; then
    run "$distrain" train "$tiny" --run-dir "$work/ro/run" --progress none
    classify "read-only run folder, found before training" 2 "cannot write" '! grep -q "epoch" "$work/out"'
    run "$distrain" train "$tiny" --run-dir "$work/ro/new" --progress none
    classify "run folder on a read-only file system" 2 "Read-only"
  else
    skip "read-only run folder: remount,ro failed"
  fi
else
  skip "read-only run folder: cannot mount a tmpfs here (not root?)"
fi

# Disk full at the second save: 1 MiB holds one checkpoint of this model (about 0.6 MiB:
# weights and two Adam slots), not two. The first must survive, and no .tmp be left.
if mount_tmpfs "$work/full" size=1m; then
  run "$distrain" train "$tiny" --set model.layers.1.units=400 --set train.tensorboard=false --run-dir "$work/full/run" \
    --progress none
  classify "disk full at save" 2 "disk is full" \
    '[ -f "$work/full/run/ckpt-000004.h5" ] && no_tmp "$work/full/run" && "$distrain" eval --ckpt "$work/full/run/ckpt-000004.h5" >/dev/null 2>&1'
else
  skip "disk full: cannot mount a tmpfs here (not root?)"
fi
# Disk full where every variable fits HDF5's 64 KiB sieve buffer (an MLP of 20 units): the
# failed close once left HDF5 a freed file to close at exit (SIGSEGV after the message).
if mount_tmpfs "$work/full_mlp" size=256k; then
  run "$distrain" train "$tiny" --set model.layers.1.units=20 --set train.epochs=200 --set checkpoint.every_steps=1 \
    --set checkpoint.keep=1000 --set train.tensorboard=false --run-dir "$work/full_mlp/run" --progress none
  classify "disk full, small variables" 2 "disk is full" 'no_tmp "$work/full_mlp/run" && [ -f "$work/full_mlp/run/ckpt-000001.h5" ]'
else
  skip "disk full, small variables: cannot mount a tmpfs here (not root?)"
fi
# No file can be created (no inodes left) though bytes are free: named as such, not as an
# unwritable folder.
if mount_tmpfs "$work/no_inodes" size=1m,nr_inodes=3; then
  run "$distrain" train "$tiny" --set checkpoint.every_steps=1 --set train.tensorboard=false --run-dir "$work/no_inodes/run" \
    --progress none
  classify "no inodes left for the checkpoint" 2 "no free inodes" 'no_tmp "$work/no_inodes/run"'
else
  skip "no inodes: cannot mount a tmpfs here (not root?)"
fi
# metrics.jsonl that cannot be written (here a folder of that name): the run stops at the
# first epoch's line, naming the file, rather than going on with epochs missing from it.
mkdir -p "$work/nometrics/metrics.jsonl"
run "$distrain" train "$tiny" --set train.tensorboard=false --run-dir "$work/nometrics" --progress none
classify "metrics.jsonl cannot be written" 2 "metrics.jsonl: cannot write"

# A finished train.steps run rerun: "already complete", its files as they were.
run "$distrain" train "$tiny" --set train.steps=3 --run-dir "$work/r_steps" --progress none
before=$(cat "$work/r_steps/metrics.jsonl" "$work/r_steps/summary.json" | md5sum)
run "$distrain" train "$tiny" --set train.steps=3 --run-dir "$work/r_steps" --progress none
classify "rerun of a finished train.steps run" 0 "" '[ "$(cat "$work/r_steps/metrics.jsonl" "$work/r_steps/summary.json" | md5sum)" = "$before" ]'
# The final checkpoint written, the summary not (a full disk then): the rerun writes it.
mv "$work/r_steps/summary.json" "$work/r_steps/summary.before"
run "$distrain" train "$tiny" --set train.steps=3 --run-dir "$work/r_steps" --progress none
classify "rerun of a finished run whose summary is missing" 0 "" \
  'python3 -c "import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:]); sys.exit(a[\"loss\"] != b[\"loss\"] or a[\"steps\"] != b[\"steps\"])" "$work/r_steps/summary.json" "$work/r_steps/summary.before"'
# An event file whose name's time overflows int64 ("internal error: stoll" once).
mkdir -p "$work/r_events/train"
: >"$work/r_events/train/events.out.tfevents.99999999999999999999.host.1.distrain"
run "$distrain" train "$tiny" --run-dir "$work/r_events" --progress none
classify "event file time beyond int64" 2 "beyond the year 5000"

# --- the data ---
idx_recipe() { sed -e 's/dataset = "synthetic"/dataset = "mnist"/' -e '/train_examples\|test_examples\|image_shape = /d' \
  -e 's/input_shape = \[12, 12, 1\]/input_shape = [28, 28, 1]/' "$tiny"; }
idx_recipe >"$work/idx.toml"
run "$distrain" check "$work/idx.toml" --set "data.path=\"$work/a_file\""
classify "data.path is a file" 2 "not a folder"
# A test split of 20x20 images beside 28x28 training images: named by check and train.
python3 - "$work/idx_sizes" <<'PY'
import os, struct, sys
os.makedirs(sys.argv[1], exist_ok=True)
def write(name, magic, dims, data):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + data)
write("train-images-idx3-ubyte", 0x803, [4, 28, 28], bytes(4 * 28 * 28))
write("train-labels-idx1-ubyte", 0x801, [4], bytes([0, 1, 0, 1]))
write("t10k-images-idx3-ubyte", 0x803, [2, 20, 20], bytes(2 * 20 * 20))
write("t10k-labels-idx1-ubyte", 0x801, [2], bytes([1, 0]))
PY
idx_recipe | sed 's/per_replica_batch = 32/per_replica_batch = 2/' >"$work/idx_sizes.toml"
run "$distrain" check "$work/idx_sizes.toml" --set "data.path=\"$work/idx_sizes\""
classify "test images 20x20, training 28x28 (check)" 2 "t10k-images-idx3-ubyte has images of (20, 20, 1)"
run "$distrain" train "$work/idx_sizes.toml" --set "data.path=\"$work/idx_sizes\"" --run-dir "$work/r_sizes" --progress none
classify "test images 20x20, training 28x28 (train)" 2 "t10k-images-idx3-ubyte has images of (20, 20, 1)"
mkdir -p "$work/idx_dirs/train-images-idx3-ubyte" "$work/idx_dirs/train-labels-idx1-ubyte"
run "$distrain" check "$work/idx.toml" --set "data.path=\"$work/idx_dirs\""
classify "IDX files that are folders" 2 "train-images-idx3-ubyte"
if [ "$(id -u)" -ne 0 ]; then
  mkdir -p "$work/idx_locked" && chmod 000 "$work/idx_locked"
  run "$distrain" check "$work/idx.toml" --set "data.path=\"$work/idx_locked\""
  classify "unreadable data folder" 2 "idx_locked"
  chmod 755 "$work/idx_locked"
else
  skip "unreadable data folder: root reads it whatever its mode (the file and folder cases above stand in)"
fi

# Token data (text, tokens): a bad file is one line naming it, at check time.
# The shipped GPT recipe on a given text file, with windows of 8 characters.
text_recipe() { sed -e "s|^path = .*|path = \"$1\"|" -e 's/^seq_len = 64/seq_len = 8/' -e 's/^input_shape = \[64\]/input_shape = [8]/' \
  "$src/recipes/shakespeare_char_gpt.toml"; }
text_recipe "$src/data/tiny_shakespeare.txt" >"$work/text.toml"
sed -e '/^vocabulary = /d' -e 's/^dataset = "text"/dataset = "tokens"/' "$work/text.toml" >"$work/tokens.toml"  # GPT-2 ids
run "$distrain" check "$work/text.toml"
classify "text data: Tiny Shakespeare" 0 ""
run "$distrain" check "$work/text.toml" --set data.seq_len=200000
classify "text data: a split shorter than seq_len" 2 "too short for seq_len = 200000"
printf 'abc\377def' >"$work/latin1.txt"
run "$distrain" check "$work/text.toml" --set "data.path=\"$work/latin1.txt\""
classify "text data: invalid UTF-8" 2 "invalid UTF-8 at byte offset 3"
run "$distrain" check "$work/text.toml" --set data.placement=device
classify "text data: placement device" 2 "not available for token data"
mkdir -p "$work/tokens"
head -c 2001 /dev/zero >"$work/tokens/train.bin"
head -c 2000 /dev/zero >"$work/tokens/val.bin"
run "$distrain" check "$work/tokens.toml" --set "data.path=\"$work/tokens\""
classify "token file of odd length" 2 "train.bin: 2001 bytes, an odd length"
python3 - "$work/tokens/train.bin" <<'PY'
import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, 10, *([0] * 253)) + bytes(18))
PY
run "$distrain" check "$work/tokens.toml" --set "data.path=\"$work/tokens\""
classify "llm.c token file shorter than its header says" 2 "the header says 10 tokens"

# --- image folders and NPY arrays: each bad file or folder named in one line ---
mkdir -p "$work/img/a" "$work/img/b"
sed '/^train_examples\|^test_examples\|^image_shape/d; s/^dataset = "synthetic"/dataset = "image_folder"/' "$tiny" >"$work/img.toml"
printf 'not a png' >"$work/img/a/x.png"
head -c 300 /dev/urandom >"$work/img/b/y.jpg"
run "$distrain" check "$work/img.toml" --set "data.path=\"$work/img\"" --set data.validation_split=0.5
classify "image folder: a text file named .png" 2 "a/x.png: not a readable PNG image"
rm "$work/img/a/x.png"
run "$distrain" check "$work/img.toml" --set "data.path=\"$work/img\"" --set data.validation_split=0.5
classify "image folder: a class folder without images" 2 "the class folder a holds no PNG or JPEG file"
run "$distrain" check "$work/img.toml" --set "data.path=\"$work/img/b\"" --set data.validation_split=0.5
classify "image folder: no class folders" 2 "0 class folder(s); an image folder holds one folder per class"
run "$distrain" check "$work/img.toml" --set "data.path=\"$work/no_images\"" --set data.validation_split=0.5
classify "image folder: missing" 2 "data.path: folder $work/no_images does not exist"
run "$distrain" check "$work/img.toml" --set "data.path=\"$work/img\""
classify "image folder with nothing to validate on" 2 "an image_folder with nothing to validate on"

# --- outputs that are inputs, writers that name their file, what a resume must refuse ---
run "$distrain" train "$tiny" --set train.steps=2 --set train.tensorboard=false --run-dir "$work/pe" --progress none
ckpt="$work/pe/ckpt-000002.h5"
idx_images="$work/pe/images-idx3-ubyte"  # 4 images of the tiny model's 12 x 12
python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack(">4I", 0x803, 4, 12, 12) + bytes(4 * 144))' "$idx_images"
python3 - "$work/pe" <<'PY'
import struct, sys
def npy(path, descr, shape, data, fortran="False"):
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
npy(f"{sys.argv[1]}/shape.npy", "|u1", "(2, 10, 10)", bytes(200))
npy(f"{sys.argv[1]}/short.npy", "<f4", "(2, 12, 12)", bytes(100))
npy(f"{sys.argv[1]}/type.npy", "<i8", "(2, 12, 12)", bytes(2 * 144 * 8))
npy(f"{sys.argv[1]}/fortran.npy", "|u1", "(2, 12, 12)", bytes(288), "True")
npy(f"{sys.argv[1]}/good.npy", "|u1", "(2, 12, 12)", bytes(288))
PY
run "$distrain" predict --ckpt "$ckpt" --data "$work/pe/shape.npy"
classify "predict: an NPY array of another shape" 2 "an array of shape (2, 10, 10); the model takes (N, 12, 12, 1)"
run "$distrain" predict --ckpt "$ckpt" --data "$work/pe/short.npy"
classify "predict: an NPY array cut short" 2 "100 bytes of data where the shape needs 1152"
run "$distrain" predict --ckpt "$ckpt" --data "$work/pe/type.npy"
classify "predict: an NPY array of int64" 2 "NPY type '<i8'; this reader takes uint8, float32 or float64"
run "$distrain" predict --ckpt "$ckpt" --data "$work/pe/fortran.npy"
classify "predict: a Fortran-order NPY array" 2 "a Fortran-order array"
run "$distrain" predict --ckpt "$ckpt" --data "$work/pe/good.npy"
classify "predict: a (N, H, W) NPY array for (H, W, 1) images" 0 "" 'grep -q "^1,[0-9]$" "$work/out"'
run "$distrain" predict --ckpt "$ckpt" --data "$work/img"
classify "predict: a folder of no readable images" 2 "y.jpg: not a readable JPEG image"
sum_before=$(md5sum <"$ckpt")
run "$distrain" predict --ckpt "$ckpt" --data "$idx_images" --out "$ckpt"
classify "predict --out the checkpoint" 2 "writing it would destroy it" '[ "$(md5sum <"$ckpt")" = "$sum_before" ]'
ln -sf "$ckpt" "$work/pe/link.csv"
run "$distrain" predict --ckpt "$work/pe" --data "$idx_images" --out "$work/pe/link.csv"
classify "predict --out a link to the checkpoint" 2 "writing it would destroy it" '[ "$(md5sum <"$ckpt")" = "$sum_before" ]'
cp "$ckpt" "$work/pe/m.weights.h5"
run "$distrain" export --ckpt "$work/pe/m.weights.h5" --out "$work/pe/m.weights.h5"
classify "export --out the checkpoint" 2 "writing it would destroy it" '[ "$(md5sum <"$work/pe/m.weights.h5")" = "$sum_before" ]'
run "$distrain" predict --ckpt "$ckpt" --data "$idx_images" --out "$work/pe/no_such_folder/p.csv"
classify "predict --out in a missing folder, before predicting" 2 "does not exist" '! grep -q "predicted" "$work/err"'
mkdir -p "$work/pe/adir.onnx"
run "$distrain" export --ckpt "$ckpt" --out "$work/pe/adir.onnx"
classify "export --out a folder" 2 "is a folder" '[ -z "$(find "$work/pe" -name "*.tmp")" ]'
ln -sf /dev/full "$work/pe/full.csv"
run "$distrain" predict --ckpt "$ckpt" --data "$idx_images" --out "$work/pe/full.csv"
classify "predict --out a file on a full disk (/dev/full)" 2 "full.csv: cannot write (No space left on device)"
run "$distrain" predict --ckpt "$ckpt" --data "$idx_images" --out "$work/pe/p.txt"
classify "predict --out of an unknown format, before predicting" 2 "--out takes a .csv" '! grep -q "predicted" "$work/err"'
timeout 300 "$distrain" predict --ckpt "$ckpt" --data "$idx_images" >/dev/full 2>"$work/err"
rc=$?
classify "predict to a full standard output" 2 "standard output: cannot write"
if mount_tmpfs "$work/full_export" size=64k; then
  head -c 60000 /dev/zero >"$work/full_export/fill"  # one 4 KiB page left, less than the weights
  run "$distrain" export --ckpt "$ckpt" --out "$work/full_export/n.weights.h5"
  classify "export to a full disk names the file" 2 "n.weights.h5: cannot write" '[ -z "$(find "$work/full_export" -name "*.tmp")" ]'
else
  skip "export to a full disk: cannot mount a tmpfs here (not root?)"
fi
for rate in 1e999Gbit/s 1e-999Gbit/s 1e-300GB/s; do
  run "$distrain" plan "$tiny" --ranks 2 --links "inter=$rate"
  classify "plan --links inter=$rate" 2 "a link's bandwidth must be between"
done
run "$distrain" plan "$tiny" --ranks 2 --device-memory 1KiB
classify "plan: no layout fits" 2 "no layout fits"
run "$distrain" check "$tiny" --set 'strategy.device_memory="0.4B"'
classify "device_memory 0.4B" 2 "strategy.device_memory"

# A small GPT (windows of 8 characters) and its checkpoint.
run "$distrain" train "$work/text.toml" --set train.steps=2 --set strategy.per_replica_batch=4 --set train.validate=false \
  --set train.tensorboard=false --run-dir "$work/gpt" --progress none
gpt_ckpt="$work/gpt/ckpt-000002.h5"
classify "a small GPT trains 2 steps" 0 "" '[ -f "$gpt_ckpt" ]'
run "$distrain" check "$work/text.toml" --set 'model.layers.3.name="h.0.ln_1"'
classify "two layers with one name after repeat expansion" 2 "layer name 'h.0.ln_1' is also the name of"
run "$distrain" check "$work/text.toml" --set 'model.layers.4.tied_to=""'
classify "tied_to empty" 2 "tied_to: is empty"
run "$distrain" check "$work/text.toml" --set model.layers.1.max_length=0
classify "position_embedding.max_length = 0" 2 "max_length: must be positive"
timeout 300 "$distrain" generate --ckpt "$gpt_ckpt" --tokens 20 >/dev/full 2>"$work/err"
rc=$?
classify "generate to a full standard output" 2 "standard output: cannot write"
for seed in -1 18446744073709551616; do
  run "$distrain" generate --ckpt "$gpt_ckpt" --tokens 5 --seed "$seed"
  classify "generate --seed $seed" 2 "--seed"
done
run "$distrain" eval --ckpt "$gpt_ckpt" --data "$work"
classify "eval of a text model given a folder says what --data takes" 2 "--data takes a UTF-8 text file"
run "$distrain" eval --ckpt "$gpt_ckpt" --data "$src/data/tiny_shakespeare.txt"
classify "eval of a text model on a text file" 0 ""
sed 's/z/é/g' "$src/data/tiny_shakespeare.txt" >"$work/other_vocabulary.txt"  # 'é' for 'z': 65 characters, other ids
cp -r "$work/gpt" "$work/gpt_vocab"
run "$distrain" train "$work/text.toml" --set "data.path=\"$work/other_vocabulary.txt\"" --set train.steps=4 \
  --set strategy.per_replica_batch=4 --set train.validate=false --set train.tensorboard=false --run-dir "$work/gpt_vocab" --progress none
classify "resume on another vocabulary of the same size" 2 "trained on another vocabulary" '[ ! -f "$work/gpt_vocab/ckpt-000004.h5" ]'
cp -r "$work/gpt" "$work/gpt_heads"
run "$distrain" train "$work/text.toml" --set model.layers.2.layers.1.heads=2 --set train.steps=4 --set strategy.per_replica_batch=4 \
  --set train.validate=false --set train.tensorboard=false --run-dir "$work/gpt_heads" --progress none
classify "resume a 4-head checkpoint with heads = 2" 2 "heads: the checkpoint's model has 4"
if "$distrain" info 2>/dev/null | grep -q "^  cuda:0"; then
  skip "check of a mesh on cuda:0: this machine has a GPU"
else
  run "$distrain" check "$work/text.toml" --set strategy.name=mesh --set strategy.tensor=2 --set 'strategy.devices=["cuda:0"]'
  classify "check of a mesh on cuda:0 without a GPU" 2 "cuda:0"
fi
mkfifo "$work/fifo.txt"
run "$distrain" check "$work/text.toml" --set "data.path=\"$work/fifo.txt\""
classify "data.path is a FIFO" 2 "a named pipe (FIFO)"
run "$distrain" check "$work/text.toml" --set 'data.path="/dev/zero"'
classify "data.path is /dev/zero" 2 "a character device"
# A raw token file whose first two ids spell llm.c's magic: the hint, then read as raw.
mkdir -p "$work/raw_magic"
python3 - "$work/raw_magic" <<'PY'
import os, struct, sys
ids = [20240520 & 0xffff, 20240520 >> 16] + [i % 65 for i in range(3000)]
for name in ("train.bin", "val.bin"):
    open(os.path.join(sys.argv[1], name), "wb").write(struct.pack("<%dH" % len(ids), *ids))
PY
run "$distrain" check "$work/tokens.toml" --set "data.path=\"$work/raw_magic\"" --set data.vocab_size=65536
classify "raw token file starting with llm.c's magic" 2 'data.token_format = "raw"'
run "$distrain" check "$work/tokens.toml" --set "data.path=\"$work/raw_magic\"" --set data.vocab_size=65536 --set 'data.token_format="raw"' \
  --set model.layers.0.input_dim=65536 --set model.layers.4.units=65536
classify "the same file with token_format = raw" 0 ""
# Disk full at the first epoch's checkpoint, after its metrics line; rerun with room:
# one line per epoch and a summary.
if mount_tmpfs "$work/full_rerun" size=300k; then
  run "$distrain" train "$tiny" --set model.layers.1.units=400 --set train.tensorboard=false --run-dir "$work/full_rerun/run" --progress none
  rc_full=$rc
  mount -o remount,size=8m "$work/full_rerun"
  run "$distrain" train "$tiny" --set model.layers.1.units=400 --set train.tensorboard=false --run-dir "$work/full_rerun/run" --progress none
  classify "rerun after a disk-full first save: one metrics line per epoch and a summary" 0 "" \
    '[ "$rc_full" -eq 2 ] && [ "$(wc -l <"$work/full_rerun/run/metrics.jsonl")" -eq 2 ] && [ -f "$work/full_rerun/run/summary.json" ]'
else
  skip "disk-full rerun: cannot mount a tmpfs here (not root?)"
fi

summary="$cases cases: $clean clean, $crash crash, $hang hang, $accepted accepted wrongly, $internal internal error"
[ "$other" -gt 0 ] && summary+=", $other wrong outcome"
[ "$skipped" -gt 0 ] && summary+=" ($skipped skipped)"
echo "$summary"
[ "$clean" -eq "$cases" ]
