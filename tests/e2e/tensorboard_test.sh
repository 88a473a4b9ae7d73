#!/usr/bin/env bash
# TensorBoard's own reader on distrain's event files: tensorboard_test.sh DISTRAIN SOURCE_DIR
# A run stopped by train.steps inside an epoch, resumed, killed with SIGKILL, and resumed
# again must read back, through tensorboard's EventAccumulator, with every tag's steps
# strictly increasing and every epoch value equal to metrics.jsonl's (float32 rounding).
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

run = sys.argv[1]
acc = event_accumulator.EventAccumulator(run, size_guidance={event_accumulator.SCALARS: 0})
acc.Reload()
epoch_tags = ["loss", "accuracy", "val_loss", "val_accuracy", "learning_rate", "images_per_sec"]
tags = sorted(acc.Tags()["scalars"])
print("tags:", tags)
failures = []
scalars = {t: acc.Scalars(t) for t in tags}
for t in tags:
    for e in scalars[t]:
        print(f"{t:15s} step {e.step:4d} value {e.value:.7g}")
if sorted(epoch_tags + ["batch_loss"]) != tags:
    failures.append(f"tags {tags}")
for t in tags:
    steps = [e.step for e in scalars[t]]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        failures.append(f"{t}: steps not strictly increasing: {steps}")
metrics = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
for t in epoch_tags:
    tb = {e.step: e.value for e in scalars.get(t, [])}
    js = {m["step"]: m[t] for m in metrics}
    if sorted(tb) != sorted(js):
        failures.append(f"{t}: steps {sorted(tb)} in TensorBoard, {sorted(js)} in metrics.jsonl")
    for step, v in js.items():  # TensorBoard's scalars are float32, metrics.jsonl's float64
        if step in tb and not math.isclose(tb[step], v, rel_tol=6e-8, abs_tol=1e-7):
            failures.append(f"{t} at step {step}: {tb[step]} in TensorBoard, {v} in metrics.jsonl")
if [e.step for e in scalars.get("batch_loss", [])] != list(range(10, 513, 10)):
    failures.append("batch_loss steps are not 10, 20, ..., 510")
if len(metrics) != 4:
    failures.append(f"metrics.jsonl has {len(metrics)} lines, expected 4")
for f in failures:
    print("FAIL:", f)
print("ok: TensorBoard reads distrain's events; steps increase, values match metrics.jsonl" if not failures else "")
sys.exit(1 if failures else 0)
PY
