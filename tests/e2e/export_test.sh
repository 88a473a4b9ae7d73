#!/usr/bin/env bash
# distrain export, read back by the frameworks themselves: export_test.sh DISTRAIN SOURCE_DIR
#   - a CNN (conv2d same and strided, batch_norm, max and average pooling with padding,
#     dropout, flatten, dense with ReLU): onnxruntime runs the .onnx, Keras 3 loads the
#     .keras, and a Sequential model written here in Keras loads the .weights.h5; each
#     one's class probabilities must be distrain predict's within 1e-5;
#   - a residual CNN (add, global_avg_pool2d) the same ways, a Functional model in Keras;
#   - a character GPT (200 steps, "ROMEO:\nThe the ..."): onnxruntime's greedy text, its
#     context growing unpadded (the ONNX input is any length up to the position table),
#     equals `distrain generate --temperature 0`'s, from one file and with --external-data.
# numpy, h5py, onnxruntime, keras and jax (Keras's backend) come from PyPI into a virtual
# environment cached under /tmp (reference only: distrain never needs Python). Without
# PyPI the test prints "[skipped] why" and exits 77 (ctest: skipped).
set -u
distrain=$1
src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_e2e_export.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2 KERAS_BACKEND=jax JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=3
venv=${DISTRAIN_EXPORT_VENV:-/tmp/distrain_export_venv}
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }
skip() {
  echo "[skipped] $1"
  exit 77
}

exec 9>"$venv.lock"
flock 9  # parallel ctest runs share the cached environment
if ! "$venv/bin/python" -c 'import numpy, h5py, onnxruntime, keras, jax' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" >"$work/venv.log" 2>&1 || skip "python3 -m venv failed (apt-get install python3-venv): $(tail -n 1 "$work/venv.log")"
  "$venv/bin/pip" install --disable-pip-version-check --timeout 20 --retries 1 -q numpy h5py onnxruntime keras "jax[cpu]" \
    >"$work/pip.log" 2>&1 || { rm -rf "$venv"; skip "pip could not install onnxruntime, keras and jax: $(grep -m 1 -E 'ERROR|Error' "$work/pip.log")"; }
fi
flock -u 9
python=$venv/bin/python
"$python" -c 'import onnxruntime, keras, jax; print("onnxruntime", onnxruntime.__version__, "keras", keras.__version__, "jax", jax.__version__)'
cd "$work" || exit 1

# expect_export NAME CODE MESSAGE ARGS...: distrain export exits CODE with MESSAGE in its output.
expect_export() {
  local name=$1 code=$2 message=$3
  shift 3
  "$distrain" export "$@" >"$work/out.log" 2>&1
  local rc=$?
  if [ "$rc" -eq "$code" ] && grep -qF -- "$message" "$work/out.log"; then ok "$name"; else bad "$name (exit $rc): $(tail -n 2 "$work/out.log")"; fi
}

cat >cnn.toml <<'TOML'
name = "export_cnn"
seed = 4
[data]
dataset = "synthetic"
train_examples = 512
test_examples = 64
image_shape = [12, 12, 1]
[model]
input_shape = [12, 12, 1]
layers = [
  { type = "rescaling", scale = 0.00392156862745098, offset = -0.5 },
  { type = "conv2d", filters = 8, kernel_size = 3, padding = "same", activation = "relu" },
  { type = "batch_norm" },
  { type = "max_pool2d", pool_size = 3, strides = 2, padding = "same" },
  { type = "conv2d", filters = 6, kernel_size = [2, 3], strides = [2, 1], use_bias = false },
  { type = "avg_pool2d", pool_size = 2, strides = 1, padding = "same" },
  { type = "relu" },
  { type = "flatten" },
  { type = "dropout", rate = 0.25 },
  { type = "dense", units = 16, activation = "relu" },
  { type = "dense", units = 10 },
]
[strategy]
per_replica_batch = 32
[train]
epochs = 2
TOML
cat >residual.toml <<'TOML'
name = "export_residual"
seed = 5
[data]
dataset = "synthetic"
train_examples = 256
test_examples = 64
image_shape = [8, 8, 3]
[model]
input_shape = [8, 8, 3]
layers = [
  { type = "conv2d", name = "stem", filters = 4, kernel_size = 3, padding = "same", activation = "relu" },
  { type = "conv2d", name = "branch", filters = 4, kernel_size = 3, padding = "same" },
  { type = "add", name = "skip", inputs = ["stem", "branch"] },
  { type = "global_avg_pool2d" },
  { type = "dense", units = 10 },
]
[strategy]
per_replica_batch = 32
[train]
epochs = 1
TOML
"$distrain" train cnn.toml --run-dir cnn --progress none >train.log 2>&1 || { cat train.log; exit 1; }
"$distrain" train residual.toml --run-dir residual --progress none >>train.log 2>&1 || { cat train.log; exit 1; }
"$python" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(0)
with h5py.File("cnn_x.h5", "w") as f: f["x_test"] = rng.integers(0, 256, (100, 12, 12, 1)).astype("float32")
with h5py.File("residual_x.h5", "w") as f: f["x_test"] = rng.standard_normal((50, 8, 8, 3)).astype("float32")
PY
for m in cnn residual; do
  "$distrain" predict --ckpt $m --data ${m}_x.h5 --probabilities --out ${m}_p.npy >>train.log 2>&1 || { cat train.log; exit 1; }
  expect_export "$m exports to ONNX" 0 "wrote $m.onnx (onnx" --ckpt $m --out $m.onnx
done
expect_export "cnn exports to .keras" 0 'keras.models.load_model("cnn.keras")' --ckpt cnn --out cnn.keras
expect_export "cnn exports to .weights.h5" 0 "model.load_weights" --ckpt cnn --out cnn.weights.h5 --format keras
expect_export "residual exports to .keras (a Functional model)" 0 'keras.models.load_model("residual.keras")' \
  --ckpt residual --out residual.keras
expect_export "residual exports to .weights.h5" 0 "model.load_weights" --ckpt residual --out residual.weights.h5
expect_export "an unknown file kind is refused" 2 "name it FILE.keras, FILE.weights.h5 or FILE.onnx" --ckpt cnn --out cnn.txt
expect_export "onnx needs .onnx" 2 "an ONNX export is FILE.onnx" --ckpt cnn --out cnn.bin --format onnx
expect_export "a missing checkpoint is named" 2 "nothing" --ckpt nothing --out x.onnx
[ ! -e cnn.txt ] && [ ! -e cnn.bin ] && [ ! -e x.onnx ] && ls | grep -qv '\.tmp$' && ok "a refused export leaves no file" ||
  bad "a refused export left a file: $(ls)"

"$python" - >check.log 2>&1 <<'PY'
import numpy as np, h5py, onnxruntime as ort, keras
def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True)); return e / e.sum(axis=1, keepdims=True)
def close(name, logits, want):
    got = softmax(np.asarray(logits, dtype=np.float64))
    err = float(np.abs(got - want).max())
    print(f"{name}: max |p - distrain's p| = {err:.2e}, classes equal: {bool((got.argmax(1) == want.argmax(1)).all())}")
    assert err < 1e-5 and (got.argmax(1) == want.argmax(1)).all(), name
for m in ("cnn", "residual"):
    x = h5py.File(f"{m}_x.h5")["x_test"][...]
    want = np.load(f"{m}_p.npy").astype(np.float64)
    s = ort.InferenceSession(f"{m}.onnx", providers=["CPUExecutionProvider"])
    close(f"{m}.onnx in onnxruntime", s.run(["logits"], {"input": x})[0], want)
x = h5py.File("cnn_x.h5")["x_test"][...]
want = np.load("cnn_p.npy").astype(np.float64)
keras_logits = keras.models.load_model("cnn.keras").predict(x, verbose=0)
close("cnn.keras in keras.models.load_model", keras_logits, want)
onnx_logits = ort.InferenceSession("cnn.onnx", providers=["CPUExecutionProvider"]).run(["logits"], {"input": x})[0]
gap = float(np.abs(onnx_logits - keras_logits).max() / np.abs(keras_logits).max())
print(f"cnn logits, onnxruntime against Keras: max difference {gap:.2e} of the largest")  # predict gives probabilities
assert gap < 1e-5
L = keras.layers  # the same model written by hand, as a Keras user would
hand = keras.Sequential([keras.Input((12, 12, 1)), L.Rescaling(1 / 255, offset=-0.5), L.Conv2D(8, 3, padding="same", activation="relu"),
    L.BatchNormalization(), L.MaxPooling2D(3, 2, padding="same"), L.Conv2D(6, (2, 3), strides=(2, 1), use_bias=False),
    L.AveragePooling2D(2, 1, padding="same"), L.ReLU(), L.Flatten(), L.Dropout(0.25), L.Dense(16, activation="relu"), L.Dense(10)])
hand.load_weights("cnn.weights.h5")
close("cnn.weights.h5 in a hand-built Keras model", hand.predict(x, verbose=0), want)
x = h5py.File("residual_x.h5")["x_test"][...]
want = np.load("residual_p.npy").astype(np.float64)
close("residual.keras in keras.models.load_model", keras.models.load_model("residual.keras").predict(x, verbose=0), want)
inp = keras.Input((8, 8, 3))
stem = L.Conv2D(4, 3, padding="same", activation="relu")(inp)
skip = L.Add()([stem, L.Conv2D(4, 3, padding="same")(stem)])
hand = keras.Model(inp, L.Dense(10)(L.GlobalAveragePooling2D()(skip)))
hand.load_weights("residual.weights.h5")
close("residual.weights.h5 in a hand-built Functional model", hand.predict(x, verbose=0), want)
PY
if [ $? -eq 0 ]; then ok "onnxruntime and Keras give distrain's probabilities"; else bad "frameworks disagree with distrain"; fi
cat check.log

# A character GPT: greedy text through onnxruntime equals distrain's.
sed -e "s|data/tiny_shakespeare.txt|$src/data/tiny_shakespeare.txt|" \
  "$src/recipes/shakespeare_char_gpt.toml" >gpt.toml
"$distrain" train gpt.toml --run-dir gpt --progress none --set train.steps=200 --set model.layers.2.count=2 \
  --set strategy.per_replica_batch=8 >>train.log 2>&1 || { tail -n 5 train.log; exit 1; }
expect_export "the GPT exports to ONNX" 0 "wrote gpt.onnx (onnx" --ckpt gpt --out gpt.onnx
expect_export "the GPT is refused for Keras, naming a layer it has no counterpart for" 2 "has no Keras layer of the same function" \
  --ckpt gpt --out gpt.keras
expect_export "the GPT exports to ONNX with its weights beside the graph" 0 "weights in gpt_ext.onnx.data beside it" \
  --ckpt gpt --out gpt_ext.onnx --external-data
[ -s gpt_ext.onnx.data ] && [ "$(stat -c %s gpt_ext.onnx)" -lt 100000 ] && ok "gpt_ext.onnx holds the graph, its .data the weights" ||
  bad "external data: $(ls -la gpt_ext.onnx*)"
expect_export "--external-data is ONNX's" 2 "only an ONNX export keeps its weights beside it" --ckpt cnn --out x.keras --external-data
"$distrain" generate --ckpt gpt --prompt "ROMEO:" --tokens 40 --temperature 0 >distrain_text.txt 2>>train.log
greedy() {
"$python" - gpt/$(ls gpt | grep '^ckpt-' | tail -n 1) "$1" 2>>check.log <<'PY'
import sys, h5py, numpy as np, onnxruntime as ort
vocab = h5py.File(sys.argv[1]).attrs["vocabulary"]
vocab = (vocab.decode() if isinstance(vocab, bytes) else vocab).split(":", 1)[1]
s = ort.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"])
assert s.get_inputs()[0].shape == ["batch", "sequence"], s.get_inputs()[0].shape
context = [vocab.index(c) for c in "ROMEO:"]
for _ in range(40):  # the context as it grows, unpadded: 6 to 45 tokens of the model's 64
    ids = np.array([context], dtype=np.int32)
    context.append(int(s.run(["logits"], {"input": ids})[0][0, -1].argmax()))
sys.stdout.write("".join(vocab[i] for i in context))
PY
}
for m in gpt gpt_ext; do
  greedy $m.onnx >onnx_text.txt
  if [ -s onnx_text.txt ] && [ "$(cat onnx_text.txt)" = "$(cat distrain_text.txt)" ]; then
    ok "onnxruntime's greedy text from $m.onnx equals distrain generate's: $(head -c 60 onnx_text.txt | tr '\n' ' ')"
  else
    bad "GPT text of $m.onnx differs: onnxruntime [$(cat onnx_text.txt)] distrain [$(cat distrain_text.txt)]"; tail -n 5 check.log
  fi
done

echo "export: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
