#!/usr/bin/env bash
# SIGTERM at every moment of a training run: signal_storm.sh DISTRAIN SOURCE_DIR [RUNS]
# 1. No thread that computes may take a stop signal: every thread but the watcher
#    ("dt-signals") blocks SIGTERM. (A handler run on an OpenMP thread inside oneDNN's sgemm
#    once corrupted the heap: exit 134, "free(): invalid pointer", no checkpoint.)
# 2. RUNS runs (default 50), each sent SIGTERM at its own moment, spread evenly over an
#    uninterrupted run's duration: start-up, the first step, mid-epoch steps, checkpoint
#    writes (every 4 steps, 5 MB each), validation at each epoch's end, the summary; every
#    fifth run gets a second SIGTERM 20 ms later. Each must end as documented: exit 3 with
#    its checkpoint saved and readable, 143 (the default action) before training started or
#    on the second signal (a save it cut short is a partial file the rerun removes), or 0
#    once the run had finished. Every tenth stopped run is resumed
#    and must end bitwise where the uninterrupted run does.
# Prints the count of each outcome and "N passed, N failed".
set -u
distrain=$1
runs=${3:-50}
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_signal_storm.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2  # the failure needed a second OpenMP thread
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
cd "$work" || exit 1

cat >storm.toml <<'TOML'
name = "storm"
seed = 5
[data]
dataset = "synthetic"
train_examples = 1024
test_examples = 2048
image_shape = [16, 16, 1]
[model]
input_shape = [16, 16, 1]
[[model.layers]]
type = "conv2d"
filters = 32
kernel_size = 3
activation = "relu"
[[model.layers]]
type = "max_pool2d"
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dense"
units = 256
activation = "relu"
[[model.layers]]
type = "dense"
units = 10
[strategy]
per_replica_batch = 64
[train]
epochs = 2
[checkpoint]
every_steps = 4
keep = 2
TOML
run=(train storm.toml --progress line --progress-every 1)

# 1. The threads' signal masks, read while the run trains.
"$distrain" "${run[@]}" --set train.epochs=50 --run-dir masks >masks.out 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -qs '^epoch 1/50 batch 2/' masks.out && break; sleep 0.02; done
watchers=0
unguarded=""
for task in /proc/"$pid"/task/*; do
  name=$(cat "$task/comm" 2>/dev/null) || continue
  blocked=$(sed -n 's/^SigBlk:\t//p' "$task/status" 2>/dev/null)
  if [ "$name" = dt-signals ]; then
    watchers=$((watchers + 1))
  elif [ -n "$blocked" ] && [ $((0x$blocked & 0x4000)) -eq 0 ]; then
    unguarded+="$name(${task##*/}) "
  fi
done
threads=$(ls /proc/"$pid"/task | wc -l)
kill -TERM "$pid"
wait "$pid"
rc=$?
if [ "$watchers" -eq 1 ] && [ -z "$unguarded" ] && [ "$threads" -ge 3 ]; then
  ok "$threads threads: SIGTERM blocked in all but the one watcher"
else
  bad "$threads threads, $watchers watcher(s); SIGTERM not blocked in: ${unguarded:-none}"
fi
[ "$rc" -eq 3 ] && ok "the watched run stopped with exit 3" || bad "the watched run: exit $rc: $(tail -n 2 masks.out)"

# 2. The reference: an uninterrupted run, and the shortest of three runs' durations (one
#    slowed by a busy machine must not stretch the moments past most runs' end).
took=()
for k in 1 2 3; do
  rm -rf full
  start=$(date +%s%N)
  "$distrain" "${run[@]}" --run-dir full >full.out 2>&1 || bad "uninterrupted run: $(tail -n 2 full.out)"
  took+=($((($(date +%s%N) - start) / 1000000)))
done
span_ms=$(printf '%s\n' "${took[@]}" | sort -n | head -n 1)
final=$(ls full | grep -E '^ckpt-[0-9]+\.h5$' | tail -n 1)
echo "uninterrupted run: ${span_ms} ms, ends with $final"

declare -A outcomes
for i in $(seq 0 $((runs - 1))); do
  dir=r$i
  delay_ms=$((span_ms * 9 * (2 * i + 1) / (20 * runs)))  # over 90% of the run: its last moments often finish first
  "$distrain" "${run[@]}" --run-dir "$dir" >"$dir.out" 2>"$dir.err" &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  kill -TERM "$pid" 2>/dev/null
  if [ $((i % 5)) -eq 4 ]; then sleep 0.02; kill -TERM "$pid" 2>/dev/null; fi
  wait "$pid"
  rc=$?
  trained=$(grep -c '^epoch ' "$dir.out")
  # Files only: TensorBoard's events are in train/ and validation/.
  leftovers=$(find "$dir" -type f -printf '%P\n' 2>/dev/null |
    grep -v -E '^(ckpt-[0-9]+\.h5|metrics\.jsonl|summary\.json|(train|validation)/events\.out\.tfevents\..*|\.lock)$')
  step=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\); rerun to resume$/\1/p' "$dir.out")
  case $rc in
  3)
    ckpt=$dir/$(printf 'ckpt-%06d.h5' "${step:-0}")
    if [ -n "$step" ] && [ -f "$ckpt" ] && [ ! -s "$dir.err" ] && [ -z "$leftovers" ] &&
      "$distrain" compare "$ckpt" "$ckpt" --rtol 0 >/dev/null 2>&1; then
      outcomes[stopped]=$((${outcomes[stopped]:-0} + 1))
    else
      bad "run $i (${delay_ms} ms): exit 3 but step '$step', files: $(ls "$dir" | tr '\n' ' '), stderr: $(head -c 300 "$dir.err")"
    fi
    if [ -n "$step" ] && [ $((i % 10)) -eq 0 ]; then
      "$distrain" "${run[@]}" --run-dir "$dir" >"$dir.resume" 2>&1 &&
        "$distrain" compare "full/$final" "$dir/$final" --rtol 0 >/dev/null 2>&1 &&
        outcomes[resumed bitwise]=$((${outcomes[resumed bitwise]:-0} + 1)) ||
        bad "run $i: resumed from step $step, not bitwise: $(tail -n 2 "$dir.resume")"
    fi
    ;;
  143)
    # The default action: before training enabled the graceful stop, or the second signal.
    if [ "$trained" -eq 0 ] || [ $((i % 5)) -eq 4 ]; then
      outcomes[terminated]=$((${outcomes[terminated]:-0} + 1))
    else
      bad "run $i (${delay_ms} ms): exit 143 after $trained progress lines from one SIGTERM"
    fi
    # Killed by the signal mid-save (a checkpoint, the summary, trimmed events), like kill -9: the rerun
    # removes the partial file.
    if [ -n "$leftovers" ]; then
      if echo "$leftovers" | grep -qv -E '^(ckpt-[0-9]+\.h5|summary\.json|(train|validation)/events\.out\.tfevents\..*)\.tmp(\.[0-9]+)?$'; then
        bad "run $i: unexpected files left: $leftovers"
      elif "$distrain" "${run[@]}" --run-dir "$dir" >"$dir.resume" 2>&1 && [ -z "$(find "$dir" -name '*.tmp*')" ] &&
        "$distrain" compare "full/$final" "$dir/$final" --rtol 0 >/dev/null 2>&1; then
        outcomes[partial save removed by the rerun]=$((${outcomes[partial save removed by the rerun]:-0} + 1))
      else
        bad "run $i: the rerun after $leftovers: $(tail -n 2 "$dir.resume"; ls "$dir" | tr '\n' ' ')"
      fi
    fi
    ;;
  0)
    grep -q '^done: ' "$dir.out" && outcomes[finished first]=$((${outcomes[finished first]:-0} + 1)) ||
      bad "run $i: exit 0 without 'done:'"
    ;;
  *)
    bad "run $i (${delay_ms} ms, $trained progress lines): exit $rc: $(head -c 400 "$dir.err")"
    ;;
  esac
  rm -rf "$dir"
done
for k in "${!outcomes[@]}"; do echo "outcome '$k': ${outcomes[$k]}"; done
# Start-up (before training) and the end take a share of the moments; a third must hit training.
[ "${outcomes[stopped]:-0}" -ge $((runs / 3)) ] && ok "${outcomes[stopped]:-0} of $runs runs stopped with a checkpoint" ||
  bad "only ${outcomes[stopped]:-0} of $runs runs stopped gracefully"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
