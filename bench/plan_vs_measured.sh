#!/usr/bin/env bash
# `distrain plan`'s predicted step time against the measured one, layout by layout, on
# emulated hosts (scripts/emulate-hosts.sh, root):
#   bench/plan_vs_measured.sh RECIPE HOSTS RANKS_PER_HOST RATE [PLAN_FLAGS...]
#   e.g. MEASURE=1 ROUNDS=3 bench/plan_vs_measured.sh recipes/shakespeare_char_gpt.toml 2 1 1gbit --cores 1
# RATE: each host's link (tc units: 10gbit, 100mbit). Every layout that fits, without
# offload (the CPU devices' update is in host memory either way), is benchmarked with
# `distrain bench` (STEPS timed steps after WARMUP, medians).
# ROUNDS (default 1): the plan and every layout's bench run that many times, each round
# after a new plan and in a rotated order, so that a slow minute of a shared machine
# falls on different layouts; each layout's prediction and measurement are the medians
# of its rounds, its spread the measurements' (largest - smallest) / median.
# TOP=K: only the K layouts the first round's plan predicts fastest (whether its pick is
# the fastest, with rounds to spare). ONLY=REGEX: only the layouts whose names match
# (grep -E; e.g. ONLY='ZeRO' for the data axis's collectives), before TOP.
# REFERENCE=1: before each layout's bench, a fixed reference (the recipe on one_device at
# batch 3, one thread, in two processes at once, one per core: the mean of their median
# steps) says how fast the machine is that minute; so do two around each round's plan
# (their mean: the speed its profiles saw). Each measurement and each prediction is also
# given at the sweep's mean reference speed (measured x mean reference / its reference,
# predicted x mean reference / its plan's), so that the model's error is told apart from a
# shared machine's fast and slow spells.
# Prints one row per layout per round as it goes, then the table of medians, the median
# |error|, the layouts within 25%, and whether the predicted fastest is the measured
# fastest (and the measured fastest's spread, to say whether the two are told apart); with
# REFERENCE=1 the same with the measurements and the predictions at the mean reference speed.
# A layout whose bench failed in a round is missing from that round only.
set -euo pipefail
recipe=$1 hosts=$2 per_host=$3 rate=$4
shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
distrain=${DISTRAIN:-$here/build/distrain}
steps=${STEPS:-20} warmup=${WARMUP:-3} rounds=${ROUNDS:-1} top=${TOP:-0}
ranks=$((hosts * per_host))
work=$(mktemp -d "${TMPDIR:-/tmp}/plan_vs_measured.XXXXXX")
trap '"$here/scripts/emulate-hosts.sh" down >/dev/null 2>&1; rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
hosts_run() { "$here/scripts/emulate-hosts.sh" mpirun -np "$ranks" -x OMP_NUM_THREADS "$@" </dev/null; }

# One round's predictions, "predicted<TAB>layout<TAB>--set ..." per layout that fits.
# MEASURE=1: the plan's links measured on the emulated hosts (plan --measure under mpirun).
predict() {
  if [ -n "${MEASURE:-}" ]; then
    hosts_run "$distrain" plan "$recipe" --ranks "$ranks" --hosts "$hosts" --measure --json "$@" >"$work/plan.json"
  else
    "$distrain" plan "$recipe" --ranks "$ranks" --hosts "$hosts" --json "$@" >"$work/plan.json"
  fi
  python3 - "$work/plan.json" <<'PY'
import json, shlex, sys
for c in json.load(open(sys.argv[1])):
    if c["fits"] and not c["offload_optimizer"]:
        sets = " ".join("--set " + shlex.quote(s) for s in c["set"])
        print(f'{c["step_ms"]["total"]:.3f}\t{c["layout"]}\t{sets}')
PY
}

# The mean over bench --json FILEs of their median step (a list's first point), in ms.
median_ms() {
  python3 -c 'import json, sys
points = [json.load(open(f)) for f in sys.argv[1:]]
print(sum((p[0] if isinstance(p, list) else p)["step_ms"]["median"] for p in points) / len(points))' "$@"
}

# The mean of two numbers, or nothing where either is missing (a reference not taken or failed).
mean_of() {
  [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { print (a + b) / 2 }' || true
}

# The reference's milliseconds a step now (REFERENCE=1), else nothing.
reference() {
  [ -n "${REFERENCE:-}" ] || return 0
  local i pids=()
  for i in 1 2; do
    "$distrain" bench "$recipe" --set 'strategy.name="one_device"' --set strategy.per_replica_batch=3 \
      --set strategy.threads=1 --steps 4 --warmup 1 --json >"$work/ref$i.json" 2>"$work/ref$i.err" </dev/null &
    pids+=($!)
  done
  # A failed reference leaves that layout, or that round's plan, without one (and that row
  # out of the second report).
  local pid failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [ "$failed" = 1 ]; then
    echo "reference run failed: $(tail -q -n 1 "$work/ref1.err" "$work/ref2.err" | tr '\n' ' ')" >&2
    return 0
  fi
  median_ms "$work/ref1.json" "$work/ref2.json"
}

SLOTS=$per_host "$here/scripts/emulate-hosts.sh" up "$hosts" "$rate" >/dev/null
printf '%-6s %-56s %10s %10s %8s\n' round layout predicted measured error
for ((round = 1; round <= rounds; round++)); do
  before=$(reference)
  predict "$@" >"$work/predicted.txt"
  plan_ref=$(mean_of "$before" "$(reference)")
  if [ "$round" = 1 ]; then
    sort -g "$work/predicted.txt" | cut -f2 | { grep -E -- "${ONLY:-.}" || true; } |
      { [ "$top" -gt 0 ] && head -n "$top" || cat; } >"$work/chosen.txt"
    [ -s "$work/chosen.txt" ] || { echo "no layout that fits${ONLY:+ matches ONLY='$ONLY'}" >&2; exit 1; }
  fi
  awk -F'\t' 'NR == FNR { chosen[$0] = 1; next } chosen[$2]' "$work/chosen.txt" "$work/predicted.txt" >"$work/layouts.txt"
  count=$(wc -l <"$work/layouts.txt")
  shift_by=$(( (round - 1) * count / rounds ))
  { tail -n +$((shift_by + 1)) "$work/layouts.txt"; head -n "$shift_by" "$work/layouts.txt"; } >"$work/order.txt"
  while IFS=$'\t' read -r predicted layout sets; do
    eval "args=($sets)"
    ref=$(reference)
    if ! hosts_run "$distrain" bench "$recipe" "${args[@]}" --steps "$steps" --warmup "$warmup" --json \
        >"$work/bench.json" 2>"$work/bench.err"; then
      echo "$round      $layout: bench failed: $(tail -n 2 "$work/bench.err")"
      continue
    fi
    measured=$(median_ms "$work/bench.json")
    printf '%-6s %-56s %10.1f %10.1f %+7.0f%%\n' "$round" "$layout" "$predicted" "$measured" \
      "$(awk -v p="$predicted" -v m="$measured" 'BEGIN { print 100 * (p - m) / m }')"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$layout" "$predicted" "$measured" "$ref" "$plan_ref" >>"$work/rows.tsv"
  done <"$work/order.txt"
done
python3 - "$work/rows.tsv" "$rounds" <<'EOF'
import collections, statistics, sys
rounds = int(sys.argv[2])
lines = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
# At the mean reference speed: the rows whose layout and plan both had a reference taken.
referenced = [l for l in lines if l[4] and l[5]]
mean_ref = statistics.mean(float(l[4]) for l in referenced) if referenced else 0

# Whether the predicted fastest and the measured fastest are told apart by the rounds:
# where the pick measured faster than the other in some round, or their medians are closer
# than the larger spread, the two are a tie on this machine.
def told_apart(pick, fastest, rounds_of):
    if pick[0] == fastest[0] or pick[3] is None:
        return ""
    both = rounds_of[pick[0]].keys() & rounds_of[fastest[0]].keys()
    faster = sum(rounds_of[pick[0]][r] < rounds_of[fastest[0]][r] for r in both)
    gap = (pick[2] - fastest[2]) / fastest[2]
    tie = faster > 0 or gap < max(pick[3], fastest[3] or 0)
    return (f"; the pick {100 * gap:.1f}% behind, faster than it in {faster} of {len(both)} rounds: "
            + ("a tie" if tie else "told apart"))

# rows: (layout, predicted, measured, spread: None for one round).
def summary(rows, label, rounds_of=None):
    errors = [abs(p - m) / m for _, p, m, _ in rows]
    best_p = min(rows, key=lambda r: r[1]); best_m = min(rows, key=lambda r: r[2])
    spread = lambda r: f", spread {100 * r[3]:.0f}%" if r[3] is not None else ""
    print(f"{label}{len(rows)} layouts: median |error| {100 * statistics.median(errors):.0f}%, "
          f"largest {100 * max(errors):.0f}%, within 25%: {sum(e <= 0.25 for e in errors)}/{len(rows)}; "
          f"predicted fastest: {best_p[0]} ({best_p[2]:.1f} ms measured{spread(best_p)}); "
          f"measured fastest: {best_m[0]} ({best_m[2]:.1f} ms{spread(best_m)})"
          + (told_apart(best_p, best_m, rounds_of) if rounds_of else ""))

def report(rows_in, at_mean_speed):
    seen = collections.defaultdict(dict)  # layout: {round: (predicted, measured)}; a failed bench's round is missing
    for r, layout, p, m, ref, plan_ref in rows_in:
        seen[layout][int(r)] = (float(p) * (mean_ref / float(plan_ref) if at_mean_speed else 1),
                                float(m) * (mean_ref / float(ref) if at_mean_speed else 1))
    what = "at the mean reference speed" if at_mean_speed else "as measured"
    if rounds > 1:  # each round alone, as a single run would have reported it
        for r in range(1, rounds + 1):
            rows = [(l, *by_round[r], None) for l, by_round in seen.items() if r in by_round]
            if rows: summary(rows, f"round {r}, {what}: ")
    rows = []
    print(f"\n{'layout':<56} {'predicted':>10} {'measured':>10} {'error':>8} {'spread':>7}   ({what})")
    for layout, by_round in sorted(seen.items(), key=lambda kv: statistics.median(p for p, _ in kv[1].values())):
        p = statistics.median(p for p, _ in by_round.values())
        ms = [m for _, m in by_round.values()]
        m = statistics.median(ms)
        spread = (max(ms) - min(ms)) / m
        rows.append((layout, p, m, spread if len(ms) > 1 else None))
        print(f"{layout:<56} {p:>10.1f} {m:>10.1f} {100 * (p - m) / m:>+7.0f}% {100 * spread:>6.0f}%")
    rounds_of = {l: {r: m for r, (_, m) in by_round.items()} for l, by_round in seen.items()}
    summary(rows, f"medians of {rounds} round(s), {what}: " if rounds > 1 else f"{what}: ", rounds_of)

report(lines, False)
if mean_ref:
    refs = [float(l[4]) for l in referenced]
    plan_refs = sorted({(int(l[0]), float(l[5])) for l in referenced})
    left_out = f"; {len(lines) - len(referenced)} row(s) without a reference left out" if len(referenced) < len(lines) else ""
    print(f"\nreference: {len(refs)} runs beside the layouts, mean {mean_ref:.1f} ms, from {min(refs):.1f} to "
          f"{max(refs):.1f} ms; around the plans: " + ", ".join(f"{ref:.1f}" for _, ref in plan_refs) + f" ms{left_out}")
    report(referenced, True)
EOF
