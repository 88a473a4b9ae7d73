#!/usr/bin/env bash
# distrain bench next to the PyTorch reference (same model, batch, optimizer, threads),
# interleaved, several rounds; prints each figure and the ratio of the medians.
#   bench/compare_pytorch.sh [BUILD_DIR] [THREADS] [ROUNDS]
# Needs python3-torch (apt-get install python3-torch); for figures, not for distrain.
set -euo pipefail
build=${1:-build}
threads=${2:-2}
rounds=${3:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
export OMP_NUM_THREADS=$threads
python=/usr/bin/python3
for model in cnn convnet; do
  recipe=$here/recipes/fashion_mnist_${model}.toml
  [ "$model" = cnn ] || recipe=$here/recipes/fashion_mnist_convnet.toml
  d=() ; t=()
  for _ in $(seq "$rounds"); do
    d+=("$("$here/$build/distrain" bench "$recipe" --steps 100 --warmup 10 --json |
      "$python" -c 'import json, sys; print(json.load(sys.stdin)["images_per_sec"])')")
    t+=("$("$python" "$here/bench/pytorch_reference.py" --model "$model" --threads "$threads" --steps 100 --warmup 10 | grep -oE '"images_per_sec": [0-9.]+' | grep -oE '[0-9.]+$')")
  done
  "$python" - "$model" "${d[*]}" "${t[*]}" <<'PY'
import statistics, sys
model, d, t = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
md, mt = statistics.median(d), statistics.median(t)
print(f"{model}: distrain {md:.0f} img/s (runs {', '.join(f'{x:.0f}' for x in d)}), "
      f"pytorch {mt:.0f} img/s (runs {', '.join(f'{x:.0f}' for x in t)}), ratio {md / mt:.2f}x")
PY
done
