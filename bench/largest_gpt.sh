#!/usr/bin/env bash
# The largest GPT each layout can train within strategy.device_memory (the ZeRO paper's
# table), by `distrain check`'s prediction: recipes/gpt_bigger_than_a_device.toml (4 devices
# of 2 GiB, global batch 4 windows of 64 tokens) with its width and its number of blocks
# changed, the blocks found by bisection for each layout and width. check exits 0 when every
# device fits, 2 naming "a device would need" when one does not (it predicts zero replicas
# the host cannot hold without building them, and a mesh builds only each rank's part);
# anything else ends the search there, marked ">=".
#   bench/largest_gpt.sh [BUILD_DIR] [WIDTHS]       (defaults: build "1024 2048")
#   ONLY="tensor 4" bench/largest_gpt.sh             (the layouts whose names contain it)
# Prints a markdown table: layout, width, largest number of blocks, its parameters and its
# predicted peak per device. Run from anywhere; figures only (distrain needs no script).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/${1:-build}/distrain
widths=${2:-1024 2048}
[ -x "$bin" ] || { echo "error: $bin not found: build distrain first" >&2; exit 1; }
recipe=$here/recipes/gpt_bigger_than_a_device.toml
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
four='strategy.devices=["cpu:0","cpu:1","cpu:2","cpu:3"]'

# name|--set arguments, separated by spaces (values without spaces)
layouts=(
  "one_device|"
  "zero stage 3|strategy.name=zero strategy.stage=3 $four strategy.per_replica_batch=1"
  "zero 3 + offload + recompute|strategy.name=zero strategy.stage=3 $four strategy.per_replica_batch=1 strategy.offload_optimizer=true train.recompute=blocks"
  "mesh tensor 4|strategy.name=mesh strategy.tensor=4"
  "mesh pipeline 4 (1F1B, 4 micro-batches)|strategy.name=mesh strategy.pipeline=4 strategy.micro_batches=4"
  "tensor 4 + sequence parallel + recompute + offload|strategy.name=mesh strategy.tensor=4 strategy.sequence_parallel=true train.recompute=blocks strategy.offload_optimizer=true"
  "one_device, bf16|train.precision=bf16"
  "zero stage 3, bf16|strategy.name=zero strategy.stage=3 $four strategy.per_replica_batch=1 train.precision=bf16"
  "zero 3 + offload + recompute, bf16|strategy.name=zero strategy.stage=3 $four strategy.per_replica_batch=1 strategy.offload_optimizer=true train.recompute=blocks train.precision=bf16"
  "mesh tensor 4, bf16|strategy.name=mesh strategy.tensor=4 train.precision=bf16"
  "mesh pipeline 4 (1F1B, 4 micro-batches), bf16|strategy.name=mesh strategy.pipeline=4 strategy.micro_batches=4 train.precision=bf16"
  "tensor 4 + sequence parallel + recompute + offload, bf16|strategy.name=mesh strategy.tensor=4 strategy.sequence_parallel=true train.recompute=blocks strategy.offload_optimizer=true train.precision=bf16"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# fits WIDTH BLOCKS SETS...: 0 fits, 1 over the budget, 2 check could not tell (host memory).
fits() {
  local width=$1 blocks=$2
  shift 2
  local args=(--set "model.layers.0.output_dim=$width" --set "model.layers.2.count=$blocks"
    --set "model.layers.2.layers.4.units=$((4 * width))" --set "model.layers.2.layers.6.units=$width")
  for s in "$@"; do args+=(--set "$s"); done
  (cd "$here" && "$bin" check "$recipe" "${args[@]}") >"$tmp/check.log" 2>&1
  case $? in
    0) return 0 ;;
    2) grep -q 'a device would need' "$tmp/check.log" && return 1 ;;
  esac
  return 2
}

# What check printed for the last fitting size: the parameters and the largest device total
# (of the mesh's ranks, or of the one replica's memory line).
figures() {
  local params total
  params=$(sed -n 's/^trainable parameters: \([0-9]*\).*/\1/p' "$tmp/check.log" | head -n 1)
  total=$(awk '
    function mib(v, u) { return u == "KiB" ? v / 1024 : u == "GiB" ? v * 1024 : u == "TiB" ? v * 1048576 : v }
    /device total/ {
      match($0, /device total [0-9.]+ [KMGT]iB/); split(substr($0, RSTART, RLENGTH), w, " ")
      v = mib(w[3], w[4])
      if ($1 == "rank") { if (v > ranks) ranks = v; mesh = 1 } else if (!line) line = v
    }
    END { printf "%.1f MiB", mesh ? ranks : line }' "$tmp/check.log")
  printf '%s|%s' "$params" "$total"
}

echo "| layout (4 devices of 2 GiB) | width | largest blocks | parameters | predicted peak per device |"
echo "| --- | ---: | ---: | ---: | ---: |"
for width in $widths; do
  for entry in "${layouts[@]}"; do
    name=${entry%%|*}
    [[ "$name" == *"${ONLY:-}"* ]] || continue
    read -r -a sets <<<"${entry#*|}"
    # Double until a size does not fit (or check cannot tell), then bisect between. The
    # answer is exact when check said of lo + 1 that it does not fit.
    lo=0 hi=1
    while fits "$width" "$hi" "${sets[@]}"; do
      lo=$hi
      cp "$tmp/check.log" "$tmp/best.log"
      hi=$((hi * 2))
    done
    fits "$width" "$hi" "${sets[@]}"
    over_at_hi=$?
    while [ $((hi - lo)) -gt 1 ]; do
      mid=$(((lo + hi) / 2))
      fits "$width" "$mid" "${sets[@]}"
      case $? in
        0) lo=$mid; cp "$tmp/check.log" "$tmp/best.log" ;;
        1) hi=$mid over_at_hi=1 ;;
        *) hi=$mid over_at_hi=2 ;;
      esac
    done
    [ "$over_at_hi" -eq 1 ] && limit="" || limit=">= "
    if [ "$lo" -eq 0 ]; then
      echo "| $name | $width | none fits | | |"
      continue
    fi
    cp "$tmp/best.log" "$tmp/check.log"
    IFS='|' read -r params total <<<"$(figures)"
    echo "| $name | $width | $limit$lo | $params | $total |"
  done
done
