#!/usr/bin/env bash
# Two builds of distrain, one layout, on emulated hosts (scripts/emulate-hosts.sh, root):
# `distrain bench` of each in turn, PAIRS times, the order swapped every other pair so that
# neither always runs first on a machine whose speed drifts:
#   bench/ab_hosts.sh BASE_DISTRAIN HOSTS RANKS_PER_HOST RATE PAIRS RECIPE [BENCH_FLAGS...]
#   e.g. bench/ab_hosts.sh /tmp/base/build/distrain 2 2 10gbit 8 bench/plan_gpt_wide.toml \
#          --set strategy.name='"mesh"' --set strategy.pipeline=4 --set strategy.micro_batches=4
# DISTRAIN (default build/distrain) is the new build; STEPS (8) timed steps after WARMUP
# (1) per run. Prints each run's median step ms, the medians of both, their ratio new/base
# and in how many pairs the new build was the faster.
set -euo pipefail
base=$1 hosts=$2 per_host=$3 rate=$4 pairs=$5 recipe=$6
shift 6
here=$(cd "$(dirname "$0")/.." && pwd)
new=${DISTRAIN:-$here/build/distrain}
steps=${STEPS:-8} warmup=${WARMUP:-1}
for b in "$base" "$new"; do [ -x "$b" ] || { echo "ab_hosts: $b is not an executable" >&2; exit 2; }; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
trap '"$here/scripts/emulate-hosts.sh" down >/dev/null 2>&1' EXIT
SLOTS=$per_host "$here/scripts/emulate-hosts.sh" up "$hosts" "$rate" >/dev/null

# One run's median step ms.
median_ms() {
  local bin=$1
  shift
  "$here/scripts/emulate-hosts.sh" mpirun -np $((hosts * per_host)) -x OMP_NUM_THREADS \
    "$bin" bench "$recipe" "$@" --steps "$steps" --warmup "$warmup" --json </dev/null 2>/dev/null |
    python3 -c 'import json, sys; d = json.load(sys.stdin); d = d[0] if isinstance(d, list) else d; print(d["step_ms"]["median"])'
}

rows=""
for ((i = 0; i < pairs; i++)); do
  if ((i % 2)); then n=$(median_ms "$new" "$@"); b=$(median_ms "$base" "$@")
  else b=$(median_ms "$base" "$@"); n=$(median_ms "$new" "$@"); fi
  printf 'pair %d: base %.1f new %.1f\n' $((i + 1)) "$b" "$n"
  rows+="$b $n"$'\n'
done
python3 - "$rows" <<'EOF'
import statistics, sys
pairs = [tuple(map(float, line.split())) for line in sys.argv[1].splitlines() if line.strip()]
base, new = [b for b, _ in pairs], [n for _, n in pairs]
mb, mn = statistics.median(base), statistics.median(new)
print(f"base median {mb:.1f} ms, new median {mn:.1f} ms, new/base {mn / mb:.3f}; "
      f"new faster in {sum(n < b for b, n in pairs)} of {len(pairs)} pairs")
EOF
