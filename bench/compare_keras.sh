#!/usr/bin/env bash
# distrain bench next to TensorFlow/Keras (bench/keras_reference.py) and PyTorch
# (bench/pytorch_reference.py) on recipes/fashion_mnist_cnn.toml and fashion_mnist_convnet.toml:
# the same layers, batch, Adam and threads, synthetic data in memory, float32. Rounds are
# interleaved (distrain, keras, torch, repeat) so that a busy machine slows all three alike;
# prints each framework's median img/s and the ratios distrain/keras and distrain/torch.
#   bench/compare_keras.sh [BUILD_DIR] [THREADS] [ROUNDS] [BATCH]
#   ROUNDS=1 BATCH=256 bench/compare_keras.sh          (environment works too; STEPS, WARMUP)
#   BUSY=1 bench/compare_keras.sh                      (each round also beside BUSY other ML jobs,
#                                                      bench/cpu_load.py: quiet and busy tables and the share
#                                                      of quiet each framework keeps)
# The references run in a virtual environment of their own, made on first use under
# ${XDG_CACHE_HOME:-~/.cache}/distrain-bench-venv with `python3 -m venv` (Debian: apt-get
# install -y python3-venv) and pip: tensorflow-cpu, and torch from the CPU wheel index (else
# PyPI's wheel, which also brings CUDA libraries, several GB). For figures only: distrain
# never depends on Python.
set -euo pipefail
build=${1:-${BUILD_DIR:-build}}
threads=${2:-${THREADS:-2}}
rounds=${3:-${ROUNDS:-3}}
batch=${4:-${BATCH:-64}}
steps=${STEPS:-100}
warmup=${WARMUP:-10}
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${XDG_CACHE_HOME:-$HOME/.cache}/distrain-bench-venv
python=$venv/bin/python
export OMP_NUM_THREADS=$threads

# The references' environment, made and filled once.
if ! [ -x "$python" ] || ! "$python" -c 'import tensorflow, keras, torch' 2>/dev/null; then
  echo "setting up $venv (tensorflow-cpu, torch; once, several minutes)" >&2
  python3 -m venv "$venv" || { echo "error: python3 -m venv failed (apt-get install -y python3-venv)" >&2; exit 1; }
  "$python" -m pip install -q --upgrade pip
  "$python" -m pip install -q tensorflow-cpu
  "$python" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu ||
    "$python" -m pip install -q torch
fi
[ -x "$here/$build/distrain" ] || { echo "error: $here/$build/distrain not found: build it first (BUILD_DIR)" >&2; exit 1; }

# The images_per_sec of a JSON line on stdin.
ips() { "$python" -c 'import json, sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["images_per_sec"])'; }

busy=${BUSY:-0}
loads=quiet
[ "$busy" -gt 0 ] && loads="quiet busy"
load_pids=()
# start_load quiet|busy: with busy, $busy other ML jobs (bench/cpu_load.py, a PyTorch matrix
# product loop on $threads threads) on the same cores, the same for the three frameworks.
start_load() {
  [ "$1" = busy ] || return 0
  for _ in $(seq "$busy"); do "$python" "$here/bench/cpu_load.py" "$threads" & load_pids+=($!); done
  sleep 2
}
stop_load() {
  [ ${#load_pids[@]} -eq 0 ] && return 0
  kill "${load_pids[@]}" 2>/dev/null || true
  wait "${load_pids[@]}" 2>/dev/null || true  # killed: non-zero, expected
  load_pids=()
}
trap stop_load EXIT

for model in cnn convnet; do
  recipe=$here/recipes/fashion_mnist_${model}.toml
  declare -A d=() k=() t=()
  for _ in $(seq "$rounds"); do
    for load in $loads; do
      start_load "$load"
      d[$load]+="$("$here/$build/distrain" bench "$recipe" --set "strategy.per_replica_batch=$batch" --steps "$steps" --warmup "$warmup" --json | ips) "
      k[$load]+="$("$python" "$here/bench/keras_reference.py" --model "$model" --threads "$threads" --batch "$batch" --steps "$steps" --warmup "$warmup" 2>/dev/null | ips) "
      t[$load]+="$("$python" "$here/bench/pytorch_reference.py" --model "$model" --threads "$threads" --batch "$batch" --steps "$steps" --warmup "$warmup" | ips) "
      stop_load
    done
  done
  for load in $loads; do
  "$python" - "$model" "$batch" "$threads" "${d[$load]}" "${k[$load]}" "${t[$load]}" "$load" "$busy" "${d[quiet]}" "${k[quiet]}" "${t[quiet]}" <<'PY'
import statistics, sys
model, batch, threads = sys.argv[1:4]
names = ("distrain", "keras", "torch")
runs = {name: [float(x) for x in arg.split()] for name, arg in zip(names, sys.argv[4:7])}
load, busy = sys.argv[7:9]
quiet = {name: statistics.median(float(x) for x in arg.split()) for name, arg in zip(names, sys.argv[9:12])}
med = {name: statistics.median(r) for name, r in runs.items()}
where = "quiet" if load == "quiet" else f"beside {busy} other job(s) (bench/cpu_load.py, {threads} threads each)"
print(f"{model}, batch {batch}, {threads} threads, {where}, {len(runs['distrain'])} round(s), median img/s:")
for name, r in runs.items():
    kept = f"   {med[name] / quiet[name]:.0%} of quiet" if load == "busy" else ""
    print(f"  {name:<9} {med[name]:8.0f}   (runs {', '.join(f'{x:.0f}' for x in r)}){kept}")
print(f"  distrain/keras {med['distrain'] / med['keras']:.2f}x   distrain/torch {med['distrain'] / med['torch']:.2f}x")
PY
  done
done
