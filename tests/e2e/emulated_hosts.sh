#!/usr/bin/env bash
# The Shakespeare GPT on 2 emulated hosts x 2 ranks (scripts/emulate-hosts.sh: network
# namespaces, veth, a bridge, htb-limited links; Open MPI over TCP between them):
#   emulated_hosts.sh DISTRAIN SOURCE_DIR
# 1. data 2 x tensor 2 across the hosts (tensor inside a host) gives the weights of the
#    same layout on one host, within 1e-5 of the largest weight, and so does a 10 Mbit/s link.
#    plan --measure runs on them and reports the links it measured, and on devices too
#    small for the whole model's calibration steps calibrates on its first blocks.
# 2. A host's link cut mid-run ends every rank within strategy.timeout_seconds (+ the 3 s
#    roll call + slack), and the surviving ranks name the lost ones.
# 3. The run resumes from its last checkpoint on the host left, with the layout `plan`
#    chooses for it (the same global batch), and ends at the uninterrupted run's weights
#    (1e-5 of the largest weight).
# Needs root and network namespaces: otherwise "[skipped] why", exit 77 (ctest: skipped).
set -u
distrain=$1
src=$2
hosts=$src/scripts/emulate-hosts.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_e2e_hosts.XXXXXX")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }
# plan's report lines wrap at 80 columns, continued 12 spaces in: one line each again.
unwrap_report() {
  awk 'NR > 1 && /^            [^ ]/ { sub(/^ +/, " "); printf "%s", $0; next } NR > 1 { print "" } { printf "%s", $0 } END { print "" }' "$1" >"$1.flat" &&
    mv "$1.flat" "$1"
}
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
ranks_alive() { pgrep -f "^$distrain train" | while read -r p; do ip netns identify "$p"; done | grep -c dt-host; }
cleanup() {
  pkill -9 -f "^$distrain train" 2>/dev/null
  "$hosts" down >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

for tool in ip tc pgrep mpirun; do
  command -v "$tool" >/dev/null || { echo "[skipped] no $tool (iproute2, procps, openmpi-bin)"; exit 77; }
done
"$hosts" up 2 >"$work/up.log" 2>&1
case $? in
  0) ;;
  77) echo "[skipped] $(cat "$work/up.log")"; exit 77 ;;
  *) echo "FAIL: emulate-hosts.sh up 2: $(cat "$work/up.log")"; exit 1 ;;
esac

cd "$src" || exit 1
keys=(--set train.validate=false --set strategy.name=mesh --set strategy.data=2 --set strategy.tensor=2
  --set strategy.timeout_seconds=10)
gpt=(recipes/shakespeare_char_gpt.toml --progress none "${keys[@]}")
across() { timeout -k 5 "$1" "$hosts" mpirun -np 4 "$distrain" train "${@:2}" </dev/null; }
on_one_host() { timeout -k 5 120 mpirun --oversubscribe --bind-to none -np 4 "$distrain" train "$@"; }

# 1. Across the hosts = on one host.
on_one_host "${gpt[@]}" --set train.steps=5 --run-dir "$work/local" >"$work/local.log" 2>&1
across 120 "${gpt[@]}" --set train.steps=5 --run-dir "$work/fast" >"$work/fast.log" 2>&1
"$distrain" compare "$work/local/ckpt-000005.h5" "$work/fast/ckpt-000005.h5" --rtol 1e-5 --scale model >"$work/cmp.log" 2>&1 &&
  ok "data 2 x tensor 2 across 2 hosts gives the one-host weights after 5 steps" ||
  bad "across hosts: $(tail -n 2 "$work/fast.log" "$work/cmp.log")"
"$hosts" rate 10mbit >/dev/null
across 300 "${gpt[@]}" --set train.steps=5 --run-dir "$work/slow" >"$work/slow.log" 2>&1
"$distrain" compare "$work/local/ckpt-000005.h5" "$work/slow/ckpt-000005.h5" --rtol 1e-5 --scale model >"$work/cmp.log" 2>&1 &&
  ok "and over 10 Mbit/s links" || bad "10 Mbit/s: $(tail -n 2 "$work/slow.log" "$work/cmp.log")"
"$hosts" rate unlimited >/dev/null

# plan --measure on the hosts themselves: the links it measured, and a layout.
timeout -k 5 300 "$hosts" mpirun -np 4 "$distrain" plan recipes/shakespeare_char_gpt.toml --ranks 4 --hosts 2 --cores 1 \
  --profile-steps 2 --profile-rounds 2 --measure </dev/null >"$work/plan.log" 2>&1
unwrap_report "$work/plan.log"
grep -q "^links .*(measured by --measure)" "$work/plan.log" && grep -q "^choice      data" "$work/plan.log" &&
  grep -qE "^compute .*; [0-9.]+x slower in a step of every rank \([0-9.]+x with a tensor axis\), and a data axis across hosts waits [0-9.]+% of the step.s compute \(measured: " "$work/plan.log" &&
  ok "plan --measure across the hosts: $(grep '^links' "$work/plan.log" | cut -c13-); $(grep -oE '[0-9.]+x slower in a step of every rank \([0-9.]+x with a tensor axis\), and a data axis across hosts waits [0-9.]+%' "$work/plan.log")" ||
  bad "plan --measure: $(tail -n 3 "$work/plan.log")"
# Where the whole model's data 4 (21.5 MiB a rank) exceeds the device, the calibration
# runs the first blocks instead, and says so.
timeout -k 5 300 "$hosts" mpirun -np 4 "$distrain" plan recipes/shakespeare_char_gpt.toml --ranks 4 --hosts 2 --cores 1 \
  --profile-steps 2 --profile-rounds 1 --device-memory 20MiB --measure </dev/null >"$work/plan_small.log" 2>&1
unwrap_report "$work/plan_small.log"
grep -q "calibrating on steps of its first 2 blocks (the whole model's calibration steps do not fit a rank)" \
  "$work/plan_small.log" && grep -q "^choice      data" "$work/plan_small.log" &&
  ok "plan --measure on devices of 20 MiB calibrates on the first blocks: $(grep -oE '[0-9.]+x slower in a step of every rank' "$work/plan_small.log")" ||
  bad "plan --measure on small devices: $(tail -n 3 "$work/plan_small.log")"

# 2. Cut host 1's link once step 20's checkpoint is written.
every=(--set checkpoint.every_steps=20 --set checkpoint.keep=30)
across 300 "${gpt[@]}" "${every[@]}" --set train.steps=60 --run-dir "$work/cut" >"$work/cut.log" 2>&1 &
for _ in $(seq 1 600); do [ -f "$work/cut/ckpt-000020.h5" ] && break; sleep 0.1; done
"$hosts" cut 1 >/dev/null
cut_at=$(date +%s.%N)
for _ in $(seq 1 600); do [ "$(ranks_alive)" = 0 ] && break; sleep 0.1; done
ended=$(seconds_since "$cut_at")
awk -v t="$ended" 'BEGIN { exit !(t <= 10 + 3 + 10) }' && ok "cut link: every rank ended ${ended} s after the cut (timeout 10 s)" ||
  bad "cut link: ranks still alive ${ended} s after the cut"
sleep 1
grep -qE "rank [01]: .* did not complete within 10 s: .*rank [23] \(no answer within 3 s" "$work/cut.log" &&
  ok "the ranks left name the lost ones: $(grep -m 1 -oE 'rank [01]: [a-z_]+ #[0-9]+.*' "$work/cut.log" | cut -c1-200)" ||
  bad "no message naming the lost ranks: $(grep -m 3 'rank' "$work/cut.log")"
pkill -9 -f "^mpirun --hostfile /run/distrain-emulated-hosts" 2>/dev/null  # mpirun waits on the lost host's daemon
wait

# 3. Resume on host 0 alone with the layout plan gives for 1 host of 2 ranks (the same
#    global batch of 24: plan keeps the recipe's).
"$hosts" up 2 >/dev/null
saved=$(ls "$work/cut" | grep -c '^ckpt-')
"$distrain" plan recipes/shakespeare_char_gpt.toml "${keys[@]}" "${every[@]}" --set train.steps=60 --ranks 2 --hosts 1 --profile-steps 2 --write "$work/left.toml" \
  >"$work/left.log" 2>&1
unwrap_report "$work/left.log"
layout=$(sed -n 's/^choice      \([^:]*\):.*/\1/p' "$work/left.log")
timeout -k 5 300 "$hosts" mpirun -np 2 --host 10.77.0.1:2 "$distrain" train "$work/left.toml" --progress none --run-dir "$work/cut" \
  </dev/null >"$work/resume.log" 2>&1
on_one_host "${gpt[@]}" "${every[@]}" --set train.steps=60 --run-dir "$work/whole" </dev/null >"$work/whole.log" 2>&1
grep -q "resuming from .*ckpt-0000[2-9]0" "$work/resume.log" &&
  "$distrain" compare "$work/whole/ckpt-000060.h5" "$work/cut/ckpt-000060.h5" --rtol 1e-5 --scale model >"$work/cmp.log" 2>&1 &&
  ok "resumed on the host left as plan chose ($layout; $saved checkpoint(s) kept): step 60 equals the uninterrupted run's" ||
  bad "resume ($layout): $(grep -m 1 resuming "$work/resume.log") $(tail -n 2 "$work/left.log" "$work/resume.log" "$work/cmp.log")"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
