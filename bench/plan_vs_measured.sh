#!/usr/bin/env bash
# `distrain plan`'s predicted step time against the measured one, layout by layout, on
# emulated hosts (scripts/emulate-hosts.sh, root):
#   bench/plan_vs_measured.sh RECIPE HOSTS RANKS_PER_HOST RATE [PLAN_FLAGS...]
#   e.g. MEASURE=1 bench/plan_vs_measured.sh recipes/shakespeare_char_gpt.toml 2 1 1gbit --cores 1
# RATE: each host's link (tc units: 10gbit, 100mbit). Every layout that fits, without
# offload (the CPU devices' update is in host memory either way), is benchmarked with
# `distrain bench` (STEPS timed steps after WARMUP, medians); prints one row per layout,
# the median |error| and whether the predicted fastest is the measured fastest.
set -euo pipefail
recipe=$1 hosts=$2 per_host=$3 rate=$4
shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
distrain=${DISTRAIN:-$here/build/distrain}
steps=${STEPS:-20} warmup=${WARMUP:-3}
ranks=$((hosts * per_host))
work=$(mktemp -d "${TMPDIR:-/tmp}/plan_vs_measured.XXXXXX")
trap '"$here/scripts/emulate-hosts.sh" down >/dev/null 2>&1; rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

SLOTS=$per_host "$here/scripts/emulate-hosts.sh" up "$hosts" "$rate" >/dev/null
# MEASURE=1: the plan's links measured on the emulated hosts (plan --measure under mpirun)
if [ -n "${MEASURE:-}" ]; then
  "$here/scripts/emulate-hosts.sh" mpirun -np "$ranks" -x OMP_NUM_THREADS "$distrain" plan "$recipe" --ranks "$ranks" \
    --hosts "$hosts" --measure --json "$@" </dev/null >"$work/plan.json"
else
  "$distrain" plan "$recipe" --ranks "$ranks" --hosts "$hosts" --json "$@" >"$work/plan.json"
fi
python3 - "$work/plan.json" >"$work/layouts.txt" <<'EOF'
import json, shlex, sys
for i, c in enumerate(json.load(open(sys.argv[1]))):
    if c["fits"] and not c["offload_optimizer"]:
        sets = " ".join("--set " + shlex.quote(s) for s in c["set"])
        print(f'{c["step_ms"]["total"]:.3f}\t{c["layout"]}\t{sets}')
EOF
printf '%-48s %10s %10s %8s\n' layout predicted measured error
while IFS=$'\t' read -r predicted layout sets; do
  eval "args=($sets)"
  "$here/scripts/emulate-hosts.sh" mpirun -np "$ranks" -x OMP_NUM_THREADS "$distrain" bench "$recipe" "${args[@]}" \
    --steps "$steps" --warmup "$warmup" --json </dev/null >"$work/bench.json" 2>"$work/bench.err" ||
    { echo "$layout: bench failed: $(tail -n 2 "$work/bench.err")"; continue; }
  measured=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; print(d["step_ms"]["median"])' "$work/bench.json")
  printf '%-48s %10.1f %10.1f %+7.0f%%\n' "$layout" "$predicted" "$measured" \
    "$(awk -v p="$predicted" -v m="$measured" 'BEGIN { print 100 * (p - m) / m }')"
  printf '%s\t%s\t%s\n' "$layout" "$predicted" "$measured" >>"$work/rows.tsv"
done <"$work/layouts.txt"
python3 - "$work/rows.tsv" <<'EOF'
import statistics, sys
rows = [(l, float(p), float(m)) for l, p, m in (line.rstrip("\n").split("\t") for line in open(sys.argv[1]))]
errors = [abs(p - m) / m for _, p, m in rows]
best_p = min(rows, key=lambda r: r[1]); best_m = min(rows, key=lambda r: r[2])
print(f"{len(rows)} layouts: median |error| {100 * statistics.median(errors):.0f}%, largest {100 * max(errors):.0f}%, "
      f"within 25%: {sum(e <= 0.25 for e in errors)}/{len(rows)}")
print(f"predicted fastest: {best_p[0]} ({best_p[2]:.1f} ms measured); measured fastest: {best_m[0]} ({best_m[2]:.1f} ms)")
EOF
