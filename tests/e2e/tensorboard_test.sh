#!/usr/bin/env bash
# TensorBoard's own reader on distrain's event files: tensorboard_test.sh DISTRAIN SOURCE_DIR
# A run stopped by train.steps inside an epoch, resumed, killed with SIGKILL, and resumed
# again must read back, through tensorboard's EventAccumulator, in Keras's layout (train/
# and validation/ runs holding a Keras run's tags), with every tag's steps strictly
# increasing and every epoch value equal to metrics.jsonl's (float32 rounding).
# TensorBoard comes from PyPI into a virtual environment cached under /tmp (reference
# only: distrain never needs Python). Without PyPI the test prints "[skipped] why" and
# exits 77, which ctest reports as skipped.
set -u
distrain=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_e2e_tensorboard.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2
venv=${DISTRAIN_TENSORBOARD_VENV:-/tmp/distrain_tensorboard_venv}

skip() {
  echo "[skipped] $1"
  exit 77
}

# One installer at a time: parallel ctest runs share the cached environment.
exec 9>"$venv.lock"
flock 9
if ! "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" >"$work/venv.log" 2>&1 || skip "python3 -m venv failed (apt-get install python3-venv): $(tail -n 1 "$work/venv.log")"
  if ! "$venv/bin/pip" install --disable-pip-version-check --timeout 20 --retries 1 -q tensorboard >"$work/pip.log" 2>&1; then
    rm -rf "$venv"
    skip "pip could not install tensorboard from PyPI: $(grep -m 1 -E 'ERROR|Error' "$work/pip.log")"
  fi
fi
flock -u 9
"$venv/bin/python" -c 'import tensorboard; print("tensorboard", tensorboard.__version__)'

cat >"$work/tb.toml" <<'TOML'
name = "tb"
seed = 3
[data]
dataset = "synthetic"
train_examples = 4096
test_examples = 256
image_shape = [28, 28, 1]
[model]
input_shape = [28, 28, 1]
[[model.layers]]
type = "rescaling"
scale = 0.00392156862745098
[[model.layers]]
type = "conv2d"
filters = 16
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
epochs = 4
tensorboard_every_steps = 10
[checkpoint]
every_epochs = 0
every_steps = 96
keep = 20
TOML
# 128 steps per epoch; checkpoints at steps 96, 192, ...
cd "$work" || exit 1
run() { "$distrain" train tb.toml --run-dir run "$@" >>"$work/train.log" 2>&1; }

# 1. A step cap inside epoch 1: its partial epoch is reported at step 40, then redone.
run --set train.steps=40 || { cat "$work/train.log"; exit 1; }
# 2. Resumed at step 40, killed after epoch 1 was written (events flushed), before the end.
"$distrain" train tb.toml --run-dir run >>"$work/train.log" 2>&1 &
pid=$!
for _ in $(seq 1 2000); do
  grep -q -E '"complete": ?true' run/metrics.jsonl 2>/dev/null && break
  sleep 0.005
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ $? -eq 137 ] || { echo "FAIL: the run finished before it could be killed; nothing tested"; exit 1; }
echo "killed after: $(tail -n 1 run/metrics.jsonl | cut -c 1-60); checkpoints: $(ls run | grep -c ckpt)"
# 3. Resumed again from the newest checkpoint, to the end.
run || { cat "$work/train.log"; exit 1; }
grep "resuming from" "$work/train.log"
ls run

"$venv/bin/python" - run <<'PY'
import json, math, sys
from tensorboard.backend.event_processing import event_accumulator

root = sys.argv[1]
# The scalar tags of a Keras 3.15.1 model.fit with TensorBoard(update_freq=N) and
# validation_data, per run: distrain writes these and a few of its own.
keras = {"train": {"batch_loss", "batch_accuracy", "epoch_loss", "epoch_accuracy", "epoch_learning_rate"},
         "validation": {"epoch_loss", "epoch_accuracy", "evaluation_loss_vs_iterations", "evaluation_accuracy_vs_iterations"}}
extra = {"train": {"batch_learning_rate", "epoch_images_per_sec"}, "validation": set()}
metrics = [json.loads(line) for line in open(f"{root}/metrics.jsonl")]
# TensorBoard value <- metrics.jsonl key, at the epoch's index (0 first) or its last step.
by_epoch = {"train": {"epoch_loss": "loss", "epoch_accuracy": "accuracy", "epoch_learning_rate": "learning_rate",
                      "epoch_images_per_sec": "images_per_sec"},
            "validation": {"epoch_loss": "val_loss", "epoch_accuracy": "val_accuracy"}}
by_step = {"evaluation_loss_vs_iterations": "val_loss", "evaluation_accuracy_vs_iterations": "val_accuracy"}
failures = []
def same(a, b):  # TensorBoard's scalars are float32, metrics.jsonl's float64
    return math.isclose(a, b, rel_tol=6e-8, abs_tol=1e-7)
for run in ("train", "validation"):
    acc = event_accumulator.EventAccumulator(f"{root}/{run}", size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    print(run, "tags:", sorted(tags))
    if not keras[run] <= tags:
        failures.append(f"{run}: Keras's tags {sorted(keras[run] - tags)} missing")
    if tags != keras[run] | extra[run]:
        failures.append(f"{run}: tags {sorted(tags)}")
    scalars = {t: acc.Scalars(t) for t in tags}
    for t in sorted(tags):
        steps = [e.step for e in scalars[t]]
        print(f"  {t:34s} steps {steps[:4]}...{steps[-1]} ({len(steps)})")
        if any(b <= a for a, b in zip(steps, steps[1:])):
            failures.append(f"{run}/{t}: steps not strictly increasing: {steps}")
    for t, key in by_epoch[run].items():
        tb = {e.step: e.value for e in scalars.get(t, [])}
        js = {i: m[key] for i, m in enumerate(metrics)}
        if sorted(tb) != sorted(js) or any(not same(tb[i], v) for i, v in js.items()):
            failures.append(f"{run}/{t}: {tb} in TensorBoard, {js} in metrics.jsonl")
    for t, key in (by_step.items() if run == "validation" else []):
        tb = {e.step: e.value for e in scalars.get(t, [])}
        js = {m["step"]: m[key] for m in metrics}
        if sorted(tb) != sorted(js) or any(not same(tb[s], v) for s, v in js.items()):
            failures.append(f"{run}/{t}: {tb} in TensorBoard, {js} in metrics.jsonl")
    for t in (("batch_loss", "batch_accuracy", "batch_learning_rate") if run == "train" else ()):
        if [e.step for e in scalars.get(t, [])] != list(range(10, 513, 10)):
            failures.append(f"train/{t} steps are not 10, 20, ..., 510")
if len(metrics) != 4:
    failures.append(f"metrics.jsonl has {len(metrics)} lines, expected 4")
for f in failures:
    print("FAIL:", f)
print("ok: TensorBoard reads distrain's events in Keras's layout; steps increase, values match metrics.jsonl" if not failures else "")
sys.exit(1 if failures else 0)
PY
