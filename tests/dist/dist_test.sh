#!/usr/bin/env bash
# Multi-process tests under mpirun (--oversubscribe: 4 ranks may share 2 cores).
#   dist_test.sh DISTRAIN SOURCE_DIR GROUP   GROUP: equivalence | portability | parameter_server | fault | sigterm | hung | mesh | pipeline | gpt_mesh | llama_mesh
# Prints "N passed, N failed".
set -u
distrain=$1
src=$2
group=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_dist_${group}.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpirun=(mpirun --oversubscribe --bind-to none)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
# seconds_since START: seconds from START (date +%s.%N) to now, with awk (a bare Debian has no bc).
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }

# pid_of_rank RANK: the process of `distrain train $recipe` that mpirun started as RANK.
pid_of_rank() {
  pgrep -f "distrain train $recipe" | while read -r p; do
    [ "$(tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -c "^OMPI_COMM_WORLD_RANK=$1\$")" = 1 ] && echo "$p"
  done | head -n 1
}

# kill_rank_and_resume RANK CMD...: runs CMD (an mpirun job writing $work/f) in the
# background, SIGKILLs rank RANK once a checkpoint exists, expects the job to stop within
# 60 s with the launcher naming the rank, then reruns CMD and expects it to resume.
kill_rank_and_resume() {
  local rank=$1
  shift
  local start victim="" job rc elapsed
  start=$(date +%s)
  "$@" >"$work/f.log" 2>&1 &
  job=$!
  for _ in $(seq 1 600); do
    if ls "$work"/f/ckpt-*.h5 >/dev/null 2>&1; then
      victim=$(pid_of_rank "$rank")
      [ -n "$victim" ] && break
    fi
    sleep 0.05
  done
  if [ -z "$victim" ]; then
    bad "could not find rank $rank to kill: $(tail -n 3 "$work/f.log")"
    return
  fi
  kill -9 "$victim"
  timeout 60 tail --pid="$job" -f /dev/null
  wait "$job"
  rc=$?
  elapsed=$(($(date +%s) - start))
  if [ "$rc" -ne 0 ] && [ "$elapsed" -lt 60 ] && grep -qiE "process rank $rank " "$work/f.log"; then
    ok "killed rank $rank: the job stopped in ${elapsed}s (exit $rc), the launcher naming it"
  else
    bad "after killing rank $rank: exit $rc after ${elapsed}s: $(tail -n 5 "$work/f.log")"
  fi
  "$@" --set train.epochs=3 >"$work/f2.log" 2>&1
  grep -q "resuming from" "$work/f2.log" && ok "the rerun resumes from the newest checkpoint" || bad "rerun: $(tail -n 5 "$work/f2.log")"
}

# stop_rank_and_expect RANK REGEX CMD...: runs CMD (an mpirun job writing checkpoints to
# $work/<its --run-dir>, its log to that name .log) in the background, SIGSTOPs rank RANK
# once a checkpoint exists, and expects the job to end non-zero within 30 s with a line
# matching REGEX.
stop_rank_and_expect() {
  local rank=$1 regex=$2
  shift 2
  local dir="${*: -1}" job victim="" start elapsed rc msg
  "$@" >"$dir.log" 2>&1 &
  job=$!
  for _ in $(seq 1 600); do
    if ls "$dir"/ckpt-*.h5 >/dev/null 2>&1; then
      victim=$(pid_of_rank "$rank")
      [ -n "$victim" ] && break
    fi
    sleep 0.05
  done
  start=$(date +%s.%N)
  [ -n "$victim" ] && kill -STOP "$victim"
  timeout 40 tail --pid="$job" -f /dev/null
  elapsed=$(seconds_since "$start")
  [ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
  kill -9 "$job" 2>/dev/null
  wait "$job"
  rc=$?
  [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
  echo "SIGSTOP to rank $rank to job exit: $elapsed s"
  msg=$(grep -m 1 -E "$regex" "$dir.log")
  if [ -n "$victim" ] && [ "$rc" -ne 0 ] && awk -v e="$elapsed" 'BEGIN { exit !(e < 30) }' && [ -n "$msg" ]; then
    ok "SIGSTOP to rank $rank: the job ended in ${elapsed}s (exit $rc): $msg"
  else
    bad "SIGSTOP to rank $rank (pid '$victim'): exit $rc after ${elapsed}s: $(tail -n 5 "$dir.log")"
  fi
}

recipe="$work/job.toml"
cat >"$recipe" <<'TOML'
name = "dist"
seed = 9
[data]
dataset = "synthetic"
train_examples = 640
test_examples = 64
image_shape = [10, 10, 1]
shuffle = false
[model]
input_shape = [10, 10, 1]
layers = [
  { type = "rescaling", scale = 0.00392156862745098 },
  { type = "conv2d", filters = 6, kernel_size = 3, activation = "relu" },
  { type = "max_pool2d" },
  { type = "flatten" },
  { type = "dense", units = 16, activation = "relu" },
  { type = "dense", units = 10 },
]
[optimizer]
type = "sgd"
learning_rate = 0.05
momentum = 0.9
[optimizer.schedule]
base_batch = 16
[strategy]
name = "one_device"
per_replica_batch = 16
check_every = 1
[train]
epochs = 2
[checkpoint]
every_epochs = 1
keep = 10
TOML
mw=(--set strategy.name=multi_worker_mirrored)

case "$group" in
equivalence)
  # K steps of R workers x b examples == one_device with R*b, for R = 2 and 4.
  for n in 2 4; do
    "$distrain" train "$recipe" --set train.steps=8 --set strategy.per_replica_batch=$((16 * n)) --run-dir "$work/one$n" >/dev/null 2>&1
    if "${mpirun[@]}" -np $n "$distrain" train "$recipe" "${mw[@]}" --set train.steps=8 --run-dir "$work/mw$n" >"$work/mw$n.log" 2>&1 &&
      "$distrain" compare "$work/one$n/ckpt-000008.h5" "$work/mw$n/ckpt-000008.h5" --rtol 1e-5 --scale variable >"$work/cmp$n.log"; then
      ok "multi_worker_mirrored x$n matches one_device with batch $((16 * n))"
    else
      bad "x$n: $(tail -n 5 "$work/mw$n.log" "$work/cmp$n.log" 2>/dev/null)"
    fi
  done
  # mpirun gives each rank a pseudo-terminal even when the job's output goes to a file:
  # progress must still come as plain lines there, not a bar redrawn on one endless line.
  if ! grep -q $'\r' "$work/mw2.log" && ! grep -q $'\033' "$work/mw2.log" && grep -q '^epoch 1/1 batch 4/8 - loss: ' "$work/mw2.log" &&
    grep -q '^epoch 1/1 step 8 - loss: ' "$work/mw2.log"; then
    ok "progress under mpirun: plain lines"
  else
    bad "progress under mpirun: $(cat -A "$work/mw2.log" | head -n 3)"
  fi
  # ZeRO stages 1-3 over MPI workers: sharded optimizer state, gradients, parameters; same weights.
  for stage in 1 2 3; do
    for n in 2 4; do
      if "${mpirun[@]}" -np $n "$distrain" train "$recipe" --set strategy.name=zero --set strategy.stage=$stage --set train.steps=8 \
        --run-dir "$work/z$stage$n" >"$work/z$stage$n.log" 2>&1 &&
        "$distrain" compare "$work/one$n/ckpt-000008.h5" "$work/z$stage$n/ckpt-000008.h5" --scale variable >/dev/null; then
        ok "zero stage $stage x$n MPI workers matches one_device with batch $((16 * n))"
      else
        bad "zero stage $stage x$n: $(tail -n 5 "$work/z$stage$n.log")"
      fi
    done
  done
  # Two workers with two local replicas each: hierarchical reduction.
  "$distrain" train "$recipe" --set train.steps=8 --set strategy.per_replica_batch=64 --run-dir "$work/one4b" >/dev/null 2>&1
  if "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${mw[@]}" --set 'strategy.devices=["cpu:0","cpu:1"]' --set train.steps=8 \
    --run-dir "$work/mw2x2" >"$work/mw2x2.log" 2>&1 &&
    "$distrain" compare "$work/one4b/ckpt-000008.h5" "$work/mw2x2/ckpt-000008.h5" --scale variable >/dev/null; then
    ok "2 workers x 2 local replicas match one_device with batch 64"
  else
    bad "2x2: $(tail -n 5 "$work/mw2x2.log")"
  fi
  # Batch norm with cross-replica statistics across workers.
  sed 's/{ type = "max_pool2d" },/{ type = "batch_norm", momentum = 0.5 },\n  { type = "max_pool2d" },/' "$recipe" >"$work/bn.toml"
  "$distrain" train "$work/bn.toml" --set train.steps=8 --set strategy.per_replica_batch=32 --run-dir "$work/bn1" >/dev/null 2>&1
  if "${mpirun[@]}" -np 2 "$distrain" train "$work/bn.toml" "${mw[@]}" --set strategy.sync_batch_norm=true --set train.steps=8 \
    --run-dir "$work/bn2" >"$work/bn2.log" 2>&1 && "$distrain" compare "$work/bn1/ckpt-000008.h5" "$work/bn2/ckpt-000008.h5" --scale variable >/dev/null; then
    ok "sync_batch_norm over 2 workers matches one_device"
  else
    bad "sync_batch_norm x2: $(tail -n 5 "$work/bn2.log")"
  fi
  # The shipped GPT recipe made small (2 blocks, width 32, 4 heads, a head tied to the token
  # embedding) on a slice of Tiny Shakespeare as bytes, AdamW, 5 steps: workers x b windows
  # match one_device with the whole batch, at the scale of the model's largest weight.
  head -c 6000 "$src/data/tiny_shakespeare.txt" >"$work/gpt.txt"
  sed -e 's/^count = 4/count = 2/' -e 's/^output_dim = 128/output_dim = 32/' -e 's/^  units = 512/  units = 64/' \
    -e 's/^  units = 128/  units = 32/' -e 's/^seq_len = 64/seq_len = 16/' -e 's/^input_shape = \[64\]/input_shape = [16]/' \
    -e 's/^vocabulary = .*/vocabulary = "bytes"/' -e 's/^input_dim = 65/input_dim = 256/' -e 's/^units = 65/units = 256/' \
    -e "s|^path = .*|path = \"$work/gpt.txt\"|" "$src/recipes/shakespeare_char_gpt.toml" >"$work/gpt.toml"
  gpt=("$work/gpt.toml" --set optimizer.learning_rate=3e-3 --set optimizer.schedule.warmup_steps=2 --set train.steps=5
    --set train.validate=false --set strategy.check_every=1 --set strategy.per_replica_batch=4)
  for n in 2 4; do
    "$distrain" train --progress none "${gpt[@]}" --set strategy.per_replica_batch=$((4 * n)) --run-dir "$work/gptone$n" >"$work/gptone$n.log" 2>&1
    if "${mpirun[@]}" -np $n "$distrain" train --progress none "${gpt[@]}" "${mw[@]}" --run-dir "$work/gptmw$n" >"$work/gptmw$n.log" 2>&1 &&
      "$distrain" compare "$work/gptone$n/ckpt-000005.h5" "$work/gptmw$n/ckpt-000005.h5" --rtol 1e-5 --scale model >"$work/gptcmp$n.log"; then
      ok "gpt: multi_worker_mirrored x$n matches one_device with batch $((4 * n)) (largest relative $(awk '$4 == "relative" && $5 > m { m = $5 } END { print m }' "$work/gptcmp$n.log"))"
    else
      bad "gpt x$n: $(tail -n 5 "$work/gptone$n.log" "$work/gptmw$n.log" "$work/gptcmp$n.log" 2>/dev/null)"
    fi
  done
  for stage in 1 2 3; do
    if "${mpirun[@]}" -np 2 "$distrain" train --progress none "${gpt[@]}" --set strategy.name=zero --set strategy.stage=$stage \
      --run-dir "$work/gptz$stage" >"$work/gptz$stage.log" 2>&1 &&
      "$distrain" compare "$work/gptone2/ckpt-000005.h5" "$work/gptz$stage/ckpt-000005.h5" --rtol 1e-5 --scale model >"$work/gptzcmp$stage.log"; then
      ok "gpt: zero stage $stage x2 MPI workers matches one_device with batch 8 (largest relative $(awk '$4 == "relative" && $5 > m { m = $5 } END { print m }' "$work/gptzcmp$stage.log"))"
    else
      bad "gpt zero stage $stage x2: $(tail -n 5 "$work/gptz$stage.log" "$work/gptzcmp$stage.log" 2>/dev/null)"
    fi
  done
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" --run-dir "$work/wrong" >"$work/wrong.log" 2>&1
  grep -q "runs in one process but 2 were launched" "$work/wrong.log" && ok "a one-process strategy under mpirun is refused" ||
    bad "one_device under mpirun: $(tail -n 3 "$work/wrong.log")"
  "${mpirun[@]}" -np 2 "$distrain" eval --ckpt "$work/wrong" >"$work/eval2.log" 2>&1
  grep -q "^\[rank 0\] error: eval runs in one process" "$work/eval2.log" && ok "eval under mpirun says it runs in one process" ||
    bad "eval under mpirun: $(head -n 3 "$work/eval2.log")"
  # Without OMP_NUM_THREADS or strategy.threads, 4 ranks on this host split its cores and say so.
  cores=$(env -u OMP_NUM_THREADS nproc)  # nproc itself honours OMP_NUM_THREADS
  env -u OMP_NUM_THREADS "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${mw[@]}" --set train.epochs=1 --run-dir "$work/split" \
    >"$work/split.log" 2>&1
  grep -q "^4 ranks share this host's $cores core(s): $(((cores / 4) > 1 ? cores / 4 : 1)) thread(s) each" "$work/split.log" &&
    ok "4 ranks split the host's $cores cores" || bad "core split: $(head -n 3 "$work/split.log")"
  # mpirun's own binding (each of 2 ranks to one core): the ranks' cores are their own, said as such.
  if [ "$cores" -ge 2 ]; then
    env -u OMP_NUM_THREADS mpirun --bind-to core -np 2 "$distrain" train "$recipe" "${mw[@]}" --set train.steps=2 \
      --run-dir "$work/bound" >"$work/bound.log" 2>&1
    grep -q "^2 ranks on this host, each allowed 1 of its $cores cores (the launcher's binding or a cpuset): 1 thread(s) each" "$work/bound.log" &&
      ok "ranks bound to a core each are told so, not that they share one" || bad "bound ranks: $(head -n 3 "$work/bound.log")"
  fi
  env -u OMP_NUM_THREADS "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${mw[@]}" --set train.epochs=1 --set strategy.threads=1 \
    --run-dir "$work/chosen" >"$work/chosen.log" 2>&1
  ! grep -q "ranks share this host" "$work/chosen.log" && grep -q "^done" "$work/chosen.log" &&
    ok "strategy.threads is taken as given" || bad "threads = 1: $(head -n 3 "$work/chosen.log")"
  # OMP_NUM_THREADS exported for the shell, more threads than the host's cores over 4 ranks:
  # each rank takes its share, saying so with the numbers.
  cores=$(env -u OMP_NUM_THREADS nproc)  # nproc itself says OMP_NUM_THREADS where it is set
  OMP_NUM_THREADS=$cores "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${mw[@]}" --set train.steps=2 \
    --run-dir "$work/over" >"$work/over.log" 2>&1
  grep -q "4 rank(s) of $cores thread(s) on this host's $cores core(s) are $((4 * cores)) threads (OMP_NUM_THREADS = $cores), more than its cores: each rank takes" \
    "$work/over.log" && ok "oversubscribed by OMP_NUM_THREADS: named once, each rank takes its share" ||
    bad "oversubscription note: $(head -n 3 "$work/over.log")"
  ;;
portability)
  # Checkpoints have one layout: a run saved under 2 MPI workers continues under
  # one_device, and one saved under one_device continues under mirrored; both end where
  # one_device alone ends (same global batch 32).
  "$distrain" train "$recipe" --set strategy.per_replica_batch=32 --run-dir "$work/ref" >/dev/null 2>&1
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${mw[@]}" --set train.epochs=1 --run-dir "$work/a" >"$work/a.log" 2>&1
  "$distrain" train "$recipe" --set strategy.per_replica_batch=32 --run-dir "$work/a" >"$work/a2.log" 2>&1
  grep -q "resuming from" "$work/a2.log" && "$distrain" compare "$work/ref/ckpt-000040.h5" "$work/a/ckpt-000040.h5" >/dev/null &&
    ok "2 MPI workers -> one_device" || bad "mpi -> one_device: $(tail -n 3 "$work/a.log" "$work/a2.log")"
  "$distrain" train "$recipe" --set strategy.per_replica_batch=32 --set train.epochs=1 --run-dir "$work/b" >/dev/null 2>&1
  "$distrain" train "$recipe" --set strategy.name=mirrored --set 'strategy.devices=["cpu:0","cpu:1"]' --run-dir "$work/b" >"$work/b2.log" 2>&1
  grep -q "resuming from" "$work/b2.log" && "$distrain" compare "$work/ref/ckpt-000040.h5" "$work/b/ckpt-000040.h5" >/dev/null &&
    ok "one_device -> mirrored x2" || bad "one_device -> mirrored: $(tail -n 3 "$work/b2.log")"
  "$distrain" eval --ckpt "$work/a/ckpt-000020.h5" --json | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["examples"] != 64)' && ok "eval of a checkpoint written by MPI workers" || bad "eval"
  # Saved under ZeRO stage 3 with 4 MPI workers (parameters and optimizer state in 4
  # shards, gathered a variable at a time to save), continued under one_device (Adam, so
  # the slots matter).
  sed 's/type = "sgd"/type = "adam"/; s/learning_rate = 0.05/learning_rate = 0.001/; /momentum = 0.9/d' "$recipe" >"$work/adam.toml"
  "$distrain" train "$work/adam.toml" --set strategy.per_replica_batch=32 --run-dir "$work/zref" >/dev/null 2>&1
  "${mpirun[@]}" -np 4 "$distrain" train "$work/adam.toml" --set strategy.name=zero --set strategy.stage=3 --set strategy.per_replica_batch=8 \
    --set train.epochs=1 --run-dir "$work/z" >"$work/z.log" 2>&1
  "$distrain" train "$work/adam.toml" --set strategy.per_replica_batch=32 --run-dir "$work/z" >"$work/z2.log" 2>&1
  grep -q "resuming from" "$work/z2.log" && "$distrain" compare "$work/zref/ckpt-000040.h5" "$work/z/ckpt-000040.h5" >/dev/null &&
    ok "zero stage 3 x4 MPI workers -> one_device" || bad "zero -> one_device: $(tail -n 3 "$work/z.log" "$work/z2.log")"
  ;;
parameter_server)
  ps=(--set strategy.name=parameter_server)
  # staleness = 0 is synchronous: 1 or 2 servers and 2 workers x 16 match one_device with 32.
  "$distrain" train "$recipe" --set train.steps=8 --set strategy.per_replica_batch=32 --run-dir "$work/one" >/dev/null 2>&1
  for servers in 1 2; do
    if "${mpirun[@]}" -np $((servers + 2)) "$distrain" train "$recipe" "${ps[@]}" --set strategy.num_ps=$servers --set strategy.staleness=0 \
      --set train.steps=8 --run-dir "$work/sync$servers" >"$work/sync$servers.log" 2>&1 &&
      "$distrain" compare "$work/one/ckpt-000008.h5" "$work/sync$servers/ckpt-000008.h5" >/dev/null; then
      ok "staleness 0 with $servers server(s) and 2 workers matches one_device with batch 32"
    else
      bad "sync x$servers: $(tail -n 5 "$work/sync$servers.log")"
    fi
  done
  # Every intermediate checkpoint of a synchronous run holds exactly the step it names, and
  # a resume from it ends where the uninterrupted run ends, in each of 20 runs. (A save once
  # read the servers as soon as worker 0 had pushed, before the other worker's push of that
  # step was applied: 22 of 60 held the step before.) Adam: a wrong iteration count shows.
  sed 's/type = "sgd"/type = "adam"/; s/learning_rate = 0.05/learning_rate = 0.002/; /momentum = 0.9/d' "$recipe" >"$work/ps_adam.toml"
  snap=(--set train.steps=15 --set checkpoint.every_steps=5)
  "$distrain" train "$work/ps_adam.toml" "${snap[@]}" --set strategy.per_replica_batch=32 --run-dir "$work/snap_one" >/dev/null 2>&1
  off=() resumed_off=()
  for r in $(seq 1 20); do
    "${mpirun[@]}" -np 3 "$distrain" train "$work/ps_adam.toml" "${ps[@]}" --set strategy.staleness=0 "${snap[@]}" --run-dir "$work/snap$r" \
      >"$work/snap$r.log" 2>&1 || off+=("run $r failed: $(tail -n 2 "$work/snap$r.log")")
    for step in 5 10 15; do
      name=$(printf 'ckpt-%06d.h5' "$step")
      "$distrain" compare "$work/snap_one/$name" "$work/snap$r/$name" >/dev/null 2>&1 || off+=("run $r step $step")
    done
    from=$((5 * (1 + r % 2)))  # odd runs resume from step 10, even ones from step 5
    mkdir -p "$work/snap${r}r" && cp "$work/snap$r/$(printf 'ckpt-%06d.h5' "$from")" "$work/snap${r}r/"
    "${mpirun[@]}" -np 3 "$distrain" train "$work/ps_adam.toml" "${ps[@]}" --set strategy.staleness=0 "${snap[@]}" --run-dir "$work/snap${r}r" \
      >"$work/snap${r}r.log" 2>&1
    "$distrain" compare "$work/snap$r/ckpt-000015.h5" "$work/snap${r}r/ckpt-000015.h5" >/dev/null 2>&1 || resumed_off+=("run $r from step $from")
  done
  [ ${#off[@]} -eq 0 ] && ok "staleness 0: 20 runs' checkpoints at steps 5, 10 and 15 match one_device's" ||
    bad "staleness 0 checkpoints that differ from one_device's step: ${off[*]}"
  [ ${#resumed_off[@]} -eq 0 ] && ok "staleness 0: 20 resumes from steps 5 or 10 end where the uninterrupted runs end" ||
    bad "resumes that end elsewhere: ${resumed_off[*]}"
  # Asynchronous (no bound) learns the synthetic task (chance is 0.1; timing makes runs differ).
  # Plain SGD: momentum 0.9 on stale gradients diverged once in a loaded CI run (accuracy
  # 0.109); without it 6 of 6 runs beside two busy loops ended at 0.87-0.97. The best epoch counts.
  # Staleness 1 keeps workers within 2 steps.
  "${mpirun[@]}" -np 3 "$distrain" train "$recipe" "${ps[@]}" --set optimizer.momentum=0 --set train.epochs=8 --run-dir "$work/async" >"$work/async.log" 2>&1
  acc=$(python3 -c 'import json, sys; print(max(json.loads(l)["val_accuracy"] for l in open(sys.argv[1])))' "$work/async/metrics.jsonl" 2>/dev/null)
  awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.5) }' && ok "asynchronous training reaches validation accuracy $acc" || bad "async: accuracy ${acc:-none}: $(tail -n 3 "$work/async.log")"
  "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${ps[@]}" --set strategy.staleness=1 --set train.epochs=3 --run-dir "$work/stale" >"$work/stale.log" 2>&1
  lead=$(grep -oE 'at most [0-9]+ step' "$work/stale.log" | grep -oE '[0-9]+' | sort -n | tail -n 1)
  [ -n "$lead" ] && [ "$lead" -le 2 ] && ok "staleness 1: workers were at most $lead steps apart" || bad "staleness 1: lead ${lead:-none}: $(tail -n 3 "$work/stale.log")"
  # Checkpoints move: synchronous PS (slots on the server) -> one_device, one_device -> PS.
  "$distrain" train "$recipe" --set strategy.per_replica_batch=32 --run-dir "$work/ref" >/dev/null 2>&1
  "${mpirun[@]}" -np 3 "$distrain" train "$recipe" "${ps[@]}" --set strategy.staleness=0 --set train.epochs=1 --run-dir "$work/a" >"$work/a.log" 2>&1
  "$distrain" train "$recipe" --set strategy.per_replica_batch=32 --run-dir "$work/a" >"$work/a2.log" 2>&1
  grep -q "resuming from" "$work/a2.log" && "$distrain" compare "$work/ref/ckpt-000040.h5" "$work/a/ckpt-000040.h5" >/dev/null &&
    ok "parameter_server -> one_device" || bad "ps -> one_device: $(tail -n 3 "$work/a.log" "$work/a2.log")"
  "$distrain" train "$recipe" --set strategy.per_replica_batch=32 --set train.epochs=1 --run-dir "$work/b" >/dev/null 2>&1
  "${mpirun[@]}" -np 3 "$distrain" train "$recipe" "${ps[@]}" --set strategy.staleness=0 --run-dir "$work/b" >"$work/b2.log" 2>&1
  grep -q "resuming from" "$work/b2.log" && "$distrain" compare "$work/ref/ckpt-000040.h5" "$work/b/ckpt-000040.h5" >/dev/null &&
    ok "one_device -> parameter_server" || bad "one_device -> ps: $(tail -n 3 "$work/b2.log")"
  # Saved under ZeRO-3 with 4 replicas (parameters and slots sharded), continued under the
  # parameter server (slots now on the server).
  "$distrain" train "$recipe" --set strategy.name=zero --set strategy.stage=3 --set 'strategy.devices=["cpu:0","cpu:1","cpu:2","cpu:3"]' \
    --set strategy.per_replica_batch=8 --set train.epochs=1 --run-dir "$work/c" >"$work/c.log" 2>&1
  "${mpirun[@]}" -np 3 "$distrain" train "$recipe" "${ps[@]}" --set strategy.staleness=0 --run-dir "$work/c" >"$work/c2.log" 2>&1
  grep -q "resuming from" "$work/c2.log" && "$distrain" compare "$work/ref/ckpt-000040.h5" "$work/c/ckpt-000040.h5" >/dev/null &&
    ok "zero stage 3 x4 -> parameter_server" || bad "zero-3 -> ps: $(tail -n 3 "$work/c.log" "$work/c2.log")"
  # The shipped recipe, a few steps.
  "${mpirun[@]}" -np 3 "$distrain" train "$src/recipes/fashion_mnist_parameter_server.toml" --set train.steps=30 --set train.validate=false \
    --run-dir "$work/recipe" >"$work/recipe.log" 2>&1 && [ -f "$work/recipe/ckpt-000030.h5" ] &&
    ok "recipes/fashion_mnist_parameter_server.toml trains under mpirun -np 3" || bad "ps recipe: $(tail -n 3 "$work/recipe.log")"
  # A worker killed: the job stops naming it; the same command resumes.
  kill_rank_and_resume 2 "${mpirun[@]}" -np 3 "$distrain" train "$recipe" "${ps[@]}" --set train.epochs=400 --set checkpoint.keep=3 --run-dir "$work/f"
  ;;
fault)
  # SIGKILL one worker mid-run: the job stops, naming the lost rank, well within 60 s;
  # the same command then resumes from the newest checkpoint.
  kill_rank_and_resume 1 "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${mw[@]}" --set train.epochs=400 --set checkpoint.keep=3 --run-dir "$work/f"
  ;;
sigterm)
  # SIGTERM to rank 1 only, mid-epoch: both ranks stop after the same step (the job exits 3
  # within 60 s, rank 0 names the step, its checkpoint exists); the rerun resumes and ends
  # bitwise where an uninterrupted 2-worker run does.
  # A wide convolution: steps slow enough that the signal lands mid-epoch even though
  # mpirun's output forwarding lags behind the ranks.
  long=("${mw[@]}" --set model.layers.1.filters=64 --set data.train_examples=64000 --set train.epochs=1 --set train.validate=false --progress-every 50)
  start=$(date +%s.%N)
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${long[@]}" --run-dir "$work/full" >"$work/full.log" 2>&1
  echo "uninterrupted 2-rank run: $(seconds_since "$start") s"
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${long[@]}" --run-dir "$work/s" >"$work/s.log" 2>&1 &
  job=$!
  victim=""
  for _ in $(seq 1 1200); do
    [ -z "$victim" ] && victim=$(pid_of_rank 1)
    [ -n "$victim" ] && grep -q '^epoch 1/1 batch 100/2000' "$work/s.log" && break
    sleep 0.05
  done
  start=$(date +%s.%N)
  [ -n "$victim" ] && kill -TERM "$victim"
  timeout 60 tail --pid="$job" -f /dev/null
  wait "$job"
  rc=$?
  echo "SIGTERM to rank 1 to job exit: $(seconds_since "$start") s"
  step=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\); rerun to resume$/\1/p' "$work/s.log")
  ckpt=$work/s/$(printf 'ckpt-%06d.h5' "${step:-0}")
  if [ -n "$victim" ] && [ "$rc" -eq 3 ] && [ -n "$step" ] && [ $((step % 2000)) -ne 0 ] && [ -f "$ckpt" ]; then
    ok "SIGTERM to rank 1: both ranks stopped after step $step (exit 3), checkpoint saved"
  else
    bad "SIGTERM to rank 1 (pid '$victim'): exit $rc, step '$step': $(tail -n 5 "$work/s.log")"
  fi
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${long[@]}" --run-dir "$work/s" >"$work/s2.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] && grep -q "resuming from $ckpt" "$work/s2.log" && ok "the rerun resumes from $(basename "$ckpt")" ||
    bad "rerun: exit $rc: $(tail -n 5 "$work/s2.log")"
  "$distrain" compare "$work/full/ckpt-002000.h5" "$work/s/ckpt-002000.h5" --rtol 0 >"$work/cmp.log" 2>&1 &&
    ok "the resumed job ends bitwise where the uninterrupted one does" || bad "compare: $(tail -n 3 "$work/cmp.log")"
  ;;
mesh)
  msh=(--set strategy.name=mesh)
  # K steps on a data x tensor mesh == one_device with the global batch: tensor 2 and 4
  # (batch 16), data 2 x tensor 2 (batch 32). The conv's 8 filters split over 4 (6 would
  # be refused): conv column, max pool on the slice, gathered before flatten.
  conv8=(--set model.layers.1.filters=8)
  for layout in "1 2" "1 4" "2 2"; do
    set -- $layout
    n=$(($1 * $2))
    "$distrain" train "$recipe" "${conv8[@]}" --set train.steps=8 --set strategy.per_replica_batch=$((16 * $1)) --run-dir "$work/one$1" >/dev/null 2>&1
    if "${mpirun[@]}" -np $n "$distrain" train "$recipe" "${conv8[@]}" "${msh[@]}" --set strategy.data=$1 --set strategy.tensor=$2 \
      --set train.steps=8 --run-dir "$work/m$1x$2" >"$work/m$1x$2.log" 2>&1 &&
      "$distrain" compare "$work/one$1/ckpt-000008.h5" "$work/m$1x$2/ckpt-000008.h5" --rtol 1e-5 >"$work/cmp$1x$2.log"; then
      ok "mesh data $1 x tensor $2 matches one_device with batch $((16 * $1)) ($(grep -oE 'relative [0-9.e+-]+' "$work/cmp$1x$2.log" | sort -k2 -g | tail -n 1))"
    else
      bad "mesh $1 x $2: $(tail -n 5 "$work/m$1x$2.log" "$work/cmp$1x$2.log" 2>/dev/null)"
    fi
  done
  # Evaluation: every rank of a tensor group sees the same test examples, so the mesh's
  # test loss and accuracy are one_device's (each tensor rank once took its own share).
  "$distrain" train "$recipe" "${conv8[@]}" --set train.steps=8 --run-dir "$work/ev1" >"$work/ev1.log" 2>&1
  "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${conv8[@]}" "${msh[@]}" --set strategy.tensor=4 --set train.steps=8 \
    --run-dir "$work/ev4" >"$work/ev4.log" 2>&1
  want=$(grep -oE 'test accuracy [0-9.]+, loss [0-9.]+' "$work/ev1.log" | tail -n 1)
  [ -n "$want" ] && [ "$(grep -oE 'test accuracy [0-9.]+, loss [0-9.]+' "$work/ev4.log" | tail -n 1)" = "$want" ] &&
    ok "evaluation at tensor 4 gives one_device's $want" || bad "evaluation at tensor 4: $(tail -n 1 "$work/ev4.log") vs '$want'"
  # Checkpoints hold whole variables: tensor 2 -> one_device, one_device -> tensor 2, both
  # ending where two epochs of one_device end; and a resumed mesh run is bitwise the same.
  "$distrain" train "$recipe" --run-dir "$work/ref" >/dev/null 2>&1
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${msh[@]}" --set strategy.tensor=2 --set train.epochs=1 --run-dir "$work/a" >"$work/a.log" 2>&1
  "$distrain" train "$recipe" --run-dir "$work/a" >"$work/a2.log" 2>&1
  grep -q "resuming from" "$work/a2.log" && "$distrain" compare "$work/ref/ckpt-000080.h5" "$work/a/ckpt-000080.h5" --rtol 1e-5 >/dev/null &&
    ok "mesh tensor 2 -> one_device" || bad "mesh -> one_device: $(tail -n 3 "$work/a.log" "$work/a2.log")"
  "$distrain" train "$recipe" --set train.epochs=1 --run-dir "$work/b" >/dev/null 2>&1
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${msh[@]}" --set strategy.tensor=2 --run-dir "$work/b" >"$work/b2.log" 2>&1
  grep -q "resuming from" "$work/b2.log" && "$distrain" compare "$work/ref/ckpt-000080.h5" "$work/b/ckpt-000080.h5" --rtol 1e-5 >/dev/null &&
    ok "one_device -> mesh tensor 2" || bad "one_device -> mesh: $(tail -n 3 "$work/b2.log")"
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${msh[@]}" --set strategy.tensor=2 --run-dir "$work/c" >/dev/null 2>&1
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${msh[@]}" --set strategy.tensor=2 --set train.epochs=1 --run-dir "$work/d" >/dev/null 2>&1
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${msh[@]}" --set strategy.tensor=2 --run-dir "$work/d" >"$work/d2.log" 2>&1
  grep -q "resuming from" "$work/d2.log" && "$distrain" compare "$work/c/ckpt-000080.h5" "$work/d/ckpt-000080.h5" --rtol 0 >/dev/null &&
    ok "a resumed mesh run ends bitwise where an uninterrupted one does" || bad "mesh resume: $(tail -n 3 "$work/d2.log")"
  # The shipped recipe: each rank holds half of the split kernels plus the whole logits layer,
  # in bytes (784x512 + 512 + 512x1024 + 1024 + 1024x10 + 16) x 4; and it trains a few steps.
  "$distrain" check "$src/recipes/fashion_mnist_mlp_tensor_parallel.toml" >"$work/check.log" 2>&1
  [ "$(grep -c 'parameters 3.58 MiB,' "$work/check.log")" = 2 ] && ok "mlp recipe: 3749952 bytes (3.58 MiB) of parameters per rank (one_device: 7.11 MiB)" ||
    bad "mlp check: $(head -n 4 "$work/check.log")"
  "${mpirun[@]}" -np 2 "$distrain" train "$src/recipes/fashion_mnist_mlp_tensor_parallel.toml" --set train.steps=30 --set train.validate=false \
    --run-dir "$work/mlp" >"$work/mlp.log" 2>&1 && [ -f "$work/mlp/ckpt-000030.h5" ] &&
    ok "recipes/fashion_mnist_mlp_tensor_parallel.toml trains under mpirun -np 2" || bad "mlp recipe: $(tail -n 3 "$work/mlp.log")"
  # shard_optimizer (ZeRO-1 over the data axis): data 2 x tensor 2 matches one_device with
  # batch 32; its checkpoint (the momentum slots gathered from their shards) continues under
  # zero stage 3 and the other way round, both ending where two epochs of one_device end;
  # a resumed run is bitwise the same as an uninterrupted one.
  zro=(--set strategy.name=zero --set strategy.stage=3 --set 'strategy.devices=["cpu:0","cpu:1"]')
  so=("${msh[@]}" --set strategy.data=2 --set strategy.tensor=2 --set strategy.shard_optimizer=true)
  "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${so[@]}" "${conv8[@]}" --set train.steps=8 --run-dir "$work/so" >"$work/so.log" 2>&1 &&
    "$distrain" compare "$work/one2/ckpt-000008.h5" "$work/so/ckpt-000008.h5" --rtol 1e-5 >"$work/so_cmp.log" &&
    ok "mesh 2 x 2 with shard_optimizer matches one_device with batch 32 ($(grep -oE 'relative [0-9.e+-]+' "$work/so_cmp.log" | sort -k2 -g | tail -n 1))" ||
    bad "shard_optimizer: $(tail -n 3 "$work/so.log" "$work/so_cmp.log" 2>/dev/null)"
  "$distrain" train "$recipe" --set strategy.per_replica_batch=32 --run-dir "$work/ref32" >/dev/null 2>&1
  "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${so[@]}" --set train.epochs=1 --run-dir "$work/g" >"$work/g.log" 2>&1
  "$distrain" train "$recipe" "${zro[@]}" --run-dir "$work/g" >"$work/g2.log" 2>&1
  grep -q "resuming from" "$work/g2.log" && "$distrain" compare "$work/ref32/ckpt-000040.h5" "$work/g/ckpt-000040.h5" --rtol 1e-5 >/dev/null &&
    ok "mesh 2 x 2 shard_optimizer -> zero stage 3" || bad "shard_optimizer -> zero 3: $(tail -n 3 "$work/g.log" "$work/g2.log")"
  "$distrain" train "$recipe" "${zro[@]}" --set train.epochs=1 --run-dir "$work/k" >/dev/null 2>&1
  "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${so[@]}" --run-dir "$work/k" >"$work/k2.log" 2>&1
  grep -q "resuming from" "$work/k2.log" && "$distrain" compare "$work/ref32/ckpt-000040.h5" "$work/k/ckpt-000040.h5" --rtol 1e-5 >/dev/null &&
    ok "zero stage 3 -> mesh 2 x 2 shard_optimizer" || bad "zero 3 -> shard_optimizer: $(tail -n 3 "$work/k2.log")"
  "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${so[@]}" --run-dir "$work/so_full" >/dev/null 2>&1
  "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${so[@]}" --set train.epochs=1 --run-dir "$work/so_res" >/dev/null 2>&1
  "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${so[@]}" --run-dir "$work/so_res" >"$work/so_res.log" 2>&1
  grep -q "resuming from" "$work/so_res.log" && "$distrain" compare "$work/so_full/ckpt-000040.h5" "$work/so_res/ckpt-000040.h5" --rtol 0 >/dev/null &&
    ok "a resumed shard_optimizer run ends bitwise where an uninterrupted one does" || bad "shard_optimizer resume: $(tail -n 3 "$work/so_res.log")"
  # The shipped conv recipes on Fashion-MNIST: the CNN (conv column -> max pool -> conv
  # row, then a dense pair) at tensor 2 and data 2 x tensor 2; the convnet (batch norm on
  # the slices between conv pairs) at tensor 2 (under data 2 its per-replica batch-norm
  # statistics differ from one_device's). Both with plain SGD: Adam turns rounding
  # differences of near-zero gradients into steps of the learning rate. For the convnet
  # also no dropout (the mesh draws its masks as the data-parallel strategies do) and no
  # bias before batch norm (its gradient is zero up to rounding). Compared at step 4,
  # relative to the model's largest weight: on real data, rounding soon flips a relu or a
  # max-pool winner somewhere, which moves a few weights by ~1e-5 at once. The CNN at data
  # 2 x tensor 2 does so by step 4 on some CPUs (3.4e-5 on a Zen without AVX-512, 8.5e-6 on
  # one with it), so it is held to 1e-4: losing one replica's half of the batch gives 1e-2.
  # The CNN's step-4 checkpoint continues under one_device to where one_device ends.
  conv_common=(--set train.steps=8 --set train.validate=false --set checkpoint.every_steps=4 --progress none
    --set optimizer.type=sgd --set optimizer.learning_rate=0.02 --set optimizer.momentum=0.0)
  convnet_args=(--set model.layers.12.rate=0.0 --set model.layers.7.use_bias=false)
  for job in "cnn 1 2 1e-5" "cnn 2 2 1e-4" "convnet 1 2 1e-5"; do
    set -- $job
    n=$(($2 * $3))
    r="$src/recipes/fashion_mnist_$1.toml"
    args=("${conv_common[@]}")
    [ "$1" = convnet ] && args+=("${convnet_args[@]}")
    "$distrain" train "$r" "${args[@]}" --set strategy.per_replica_batch=$((64 * $2)) --run-dir "$work/$1one$2" >/dev/null 2>&1
    if "${mpirun[@]}" -np $n "$distrain" train "$r" "${args[@]}" "${msh[@]}" --set strategy.data=$2 --set strategy.tensor=$3 \
      --run-dir "$work/$1m$2x$3" >"$work/$1m$2x$3.log" 2>&1 &&
      "$distrain" compare "$work/$1one$2/ckpt-000004.h5" "$work/$1m$2x$3/ckpt-000004.h5" --rtol $4 --scale model >"$work/$1cmp$2x$3.log"; then
      ok "$1 recipe: mesh data $2 x tensor $3 matches one_device ($(grep -oE 'relative [0-9.e+-]+' "$work/$1cmp$2x$3.log" | sort -k2 -g | tail -n 1))"
    else
      bad "$1 mesh $2 x $3: $(tail -n 5 "$work/$1m$2x$3.log" "$work/$1cmp$2x$3.log" 2>/dev/null)"
    fi
  done
  mkdir -p "$work/cnncont" && cp "$work/cnnm1x2/ckpt-000004.h5" "$work/cnncont/"
  "$distrain" train "$src/recipes/fashion_mnist_cnn.toml" "${conv_common[@]}" --run-dir "$work/cnncont" >"$work/cnncont.log" 2>&1
  grep -q "resuming from .*ckpt-000004" "$work/cnncont.log" &&
    "$distrain" compare "$work/cnnone1/ckpt-000008.h5" "$work/cnncont/ckpt-000008.h5" --rtol 1e-5 --scale model >/dev/null &&
    ok "cnn recipe: a mesh tensor 2 checkpoint continues under one_device" || bad "cnn mesh -> one_device: $(tail -n 3 "$work/cnncont.log")"
  # distrain check on the conv recipes at tensor 2: the CNN's ranks hold half of each conv
  # and dense kernel, in bytes (9x16 + 16 + 9x16x64 + 64 + 1600x32 + 32 + 32x10 + 16) x 4
  # (one_device: 487744); the convnet's batch norm between conv2d_1 and conv2d_2 is sliced
  # with conv2d_1's filters, its moving statistics too.
  "$distrain" check "$src/recipes/fashion_mnist_cnn.toml" "${msh[@]}" --set strategy.tensor=2 >"$work/cnncheck.log" 2>&1
  "$distrain" check "$src/recipes/fashion_mnist_convnet.toml" "${msh[@]}" --set strategy.tensor=2 >"$work/convnetcheck.log" 2>&1
  [ "$(grep -c 'parameters 0.23 MiB,' "$work/cnncheck.log")" = 2 ] &&
    grep -q 'conv2d_2/kernel \[:, :, 16:32, :\] of (3, 3, 32, 64)' "$work/cnncheck.log" &&
    grep -q 'conv2d_1/kernel \[:, :, :, 6:12\] of (3, 3, 1, 12)' "$work/convnetcheck.log" &&
    grep -q 'batch_norm_1/moving_variance \[6:12\] of (12,)' "$work/convnetcheck.log" &&
    ok "check: cnn 244032 bytes (0.23 MiB) of parameters per rank, convnet's conv and batch-norm slices" ||
    bad "conv check: $(head -n 4 "$work/cnncheck.log" "$work/convnetcheck.log")"
  # A launch that does not fit the mesh is refused before MPI starts, naming both sizes.
  "${mpirun[@]}" -np 3 "$distrain" train "$recipe" "${msh[@]}" --set strategy.tensor=2 --run-dir "$work/e" >"$work/e.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && grep -q 'the mesh data 1 x tensor 2 x pipeline 1 has 2 ranks, but the job has 3; launch with mpirun -np 2' "$work/e.log" &&
    ok "a mesh of 2 under mpirun -np 3 is refused" || bad "np 3: exit $rc: $(tail -n 3 "$work/e.log")"
  ;;
pipeline)
  msh=(--set strategy.name=mesh)
  # last_line DIR: the final "test accuracy A, loss L" of a run's log, which evaluation
  # through the stages must give as one_device does.
  final() { grep -oE 'test accuracy [0-9.]+, loss [0-9.]+' "$1" | tail -n 1; }
  # K steps through P stages with M micro-batches, each schedule, == one_device with the
  # same batch; every run ends within 120 s (no schedule deadlocks with M < P, M = P, M > P).
  "$distrain" train "$recipe" --set train.steps=8 --run-dir "$work/one" >"$work/one.log" 2>&1
  "$distrain" train "$recipe" --set train.steps=8 --set strategy.per_replica_batch=32 --run-dir "$work/one32" >/dev/null 2>&1
  pipe_case() {  # NAME REF NP ARGS...
    local name=$1 ref=$2 np=$3
    shift 3
    if timeout 120 "${mpirun[@]}" -np "$np" "$distrain" train "$recipe" "${msh[@]}" --set train.steps=8 "$@" --run-dir "$work/$name" \
      >"$work/$name.log" 2>&1 && "$distrain" compare "$work/$ref/ckpt-000008.h5" "$work/$name/ckpt-000008.h5" --rtol 1e-5 >"$work/$name.cmp"; then
      ok "$name matches one_device ($(grep -oE 'relative [0-9.e+-]+' "$work/$name.cmp" | sort -k2 -g | tail -n 1))"
    else
      bad "$name: exit $?: $(tail -n 3 "$work/$name.log" "$work/$name.cmp" 2>/dev/null)"
    fi
  }
  for p in 2 4; do
    for schedule in gpipe 1f1b; do
      for m in 1 4 8; do
        pipe_case "pipeline $p $schedule M=$m" one $p --set strategy.pipeline=$p --set strategy.schedule=$schedule --set strategy.micro_batches=$m
      done
    done
  done
  # Micro-batches that do not divide the batch (64 = 22 + 21 + 21, 13 x 4 + 12): a forward
  # of another size reallocates a copy's buffers, which under 1F1B once happened while the
  # copy's input gradient was still being sent (NaN or silently wrong gradients).
  # MALLOC_PERTURB_ fills freed memory with NaN bytes, so a send from freed memory shows.
  "$distrain" train "$recipe" --set train.steps=8 --set strategy.per_replica_batch=64 --run-dir "$work/one64" >/dev/null 2>&1
  for schedule in gpipe 1f1b; do
    for m in 3 5; do
      MALLOC_PERTURB_=255 pipe_case "pipeline 2 $schedule M=$m of 64" one64 2 --set strategy.pipeline=2 --set strategy.schedule=$schedule \
        --set strategy.micro_batches=$m --set strategy.per_replica_batch=64
    done
  done
  MALLOC_PERTURB_=255 pipe_case "pipeline 4 1f1b M=3 of 64" one64 4 --set strategy.pipeline=4 --set strategy.schedule=1f1b \
    --set strategy.micro_batches=3 --set strategy.per_replica_batch=64
  [ "$(final "$work/pipeline 4 1f1b M=4.log")" = "$(final "$work/one.log")" ] &&
    ok "evaluation through 4 stages gives one_device's $(final "$work/one.log")" ||
    bad "evaluation: '$(final "$work/pipeline 4 1f1b M=4.log")' vs '$(final "$work/one.log")'"
  pipe_case "data 2 x pipeline 2" one32 4 --set strategy.data=2 --set strategy.pipeline=2 --set strategy.micro_batches=4
  pipe_case "tensor 2 x pipeline 2" one 4 --set strategy.tensor=2 --set strategy.pipeline=2 --set strategy.micro_batches=4
  pipe_case "data 2 x tensor 2 x pipeline 2" one32 8 --set strategy.data=2 --set strategy.tensor=2 --set strategy.pipeline=2 \
    --set strategy.micro_batches=4
  pipe_case "data 2 x pipeline 2, shard_optimizer" one32 4 --set strategy.data=2 --set strategy.pipeline=2 --set strategy.micro_batches=4 \
    --set strategy.shard_optimizer=true
  # Checkpoints hold the whole model whatever the stages: pipeline 2 -> one_device and
  # back, tensor 2 x pipeline 2 -> pipeline 4, zero stage 3 -> pipeline 2, each ending
  # where two epochs of one_device end; a resumed pipeline run is bitwise the same.
  "$distrain" train "$recipe" --run-dir "$work/ref" >/dev/null 2>&1
  move() {  # NAME FIRST-CMD... -- SECOND-CMD...
    local name=$1
    shift
    local first=() second=()
    while [ "$1" != -- ]; do first+=("$1"); shift; done
    shift
    second=("$@")
    "${first[@]}" --set train.epochs=1 --run-dir "$work/$name" >"$work/$name.1.log" 2>&1
    "${second[@]}" --run-dir "$work/$name" >"$work/$name.2.log" 2>&1
    grep -q "resuming from" "$work/$name.2.log" &&
      "$distrain" compare "$work/ref/ckpt-000080.h5" "$work/$name/ckpt-000080.h5" --rtol 1e-5 >/dev/null &&
      ok "checkpoint: $name" || bad "checkpoint $name: $(tail -n 3 "$work/$name.1.log" "$work/$name.2.log")"
  }
  p2=("${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${msh[@]}" --set strategy.pipeline=2 --set strategy.micro_batches=4)
  move "pipeline 2 -> one_device" "${p2[@]}" -- "$distrain" train "$recipe"
  move "one_device -> pipeline 2" "$distrain" train "$recipe" -- "${p2[@]}"
  move "tensor 2 x pipeline 2 -> pipeline 4" "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${msh[@]}" --set strategy.tensor=2 \
    --set strategy.pipeline=2 -- "${mpirun[@]}" -np 4 "$distrain" train "$recipe" "${msh[@]}" --set strategy.pipeline=4
  move "zero stage 3 -> pipeline 2" "$distrain" train "$recipe" --set strategy.name=zero --set strategy.stage=3 \
    --set 'strategy.devices=["cpu:0","cpu:1"]' --set strategy.per_replica_batch=8 -- "${p2[@]}"
  "${p2[@]}" --run-dir "$work/full" >/dev/null 2>&1
  "${p2[@]}" --set train.epochs=1 --run-dir "$work/res" >/dev/null 2>&1
  "${p2[@]}" --run-dir "$work/res" >"$work/res.log" 2>&1
  grep -q "resuming from" "$work/res.log" && "$distrain" compare "$work/full/ckpt-000080.h5" "$work/res/ckpt-000080.h5" --rtol 0 >/dev/null &&
    ok "a resumed pipeline run ends bitwise where an uninterrupted one does" || bad "pipeline resume: $(tail -n 3 "$work/res.log")"
  # Per-stage memory follows the partition: stage 0 holds conv2d_1 (9x6 and 6 floats, each
  # padded to 16: 64 + 16), stage 1 the dense layers (96x16 + 16 + 16x10 + 10, padded:
  # 1536 + 16 + 160 + 16).
  "$distrain" check "$recipe" "${msh[@]}" --set strategy.pipeline=2 --set strategy.stage_boundaries='["max_pool2d_1"]' >"$work/check.log" 2>&1
  grep -q 'stage 0   rescaling_1 .. conv2d_1 (2 layer(s))' "$work/check.log" &&
    grep -q 'pipeline 0: parameters 0.000305 MiB,' "$work/check.log" && grep -q 'pipeline 1: parameters 0.00659 MiB,' "$work/check.log" &&
    ok "check: stage 0 holds 320 bytes (0.000305 MiB) of parameters, stage 1 6912 (0.00659 MiB)" || bad "pipeline check: $(head -n 8 "$work/check.log")"
  # The shipped recipe trains; bench reports each stage's idle share beside the theory.
  "${mpirun[@]}" -np 2 "$distrain" train "$src/recipes/fashion_mnist_mlp_pipeline.toml" --set train.steps=30 --set train.validate=false \
    --run-dir "$work/mlp" >"$work/mlp.log" 2>&1 && [ -f "$work/mlp/ckpt-000030.h5" ] &&
    ok "recipes/fashion_mnist_mlp_pipeline.toml trains under mpirun -np 2" || bad "mlp pipeline recipe: $(tail -n 3 "$work/mlp.log")"
  "${mpirun[@]}" -np 2 "$distrain" bench "$recipe" "${msh[@]}" --set strategy.pipeline=2 --set strategy.micro_batches=4 --steps 5 \
    --warmup 1 >"$work/bench.log" 2>&1
  grep -qE 'pipeline, 2 stages, 4 micro-batch\(es\), schedule 1f1b: idle share per stage 0\.[0-9]+ 0\.[0-9]+ \(theory 0\.200\)' "$work/bench.log" &&
    ok "bench: $(grep -oE 'idle share per stage.*\)' "$work/bench.log")" || bad "pipeline bench: $(tail -n 3 "$work/bench.log")"
  # Bad requests are refused before training, naming the key.
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${msh[@]}" --set strategy.pipeline=2 --set strategy.stage_boundaries='["nope"]' \
    --run-dir "$work/bad1" >"$work/bad1.log" 2>&1
  grep -q "stage_boundaries: no layer is named 'nope'" "$work/bad1.log" && ok "an unknown stage boundary is refused" ||
    bad "bad boundary: $(tail -n 2 "$work/bad1.log")"
  "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${msh[@]}" --set strategy.pipeline=2 --set strategy.micro_batches=17 \
    --run-dir "$work/bad2" >"$work/bad2.log" 2>&1
  grep -q "micro_batches.*17 micro-batches of a per_replica_batch of 16" "$work/bad2.log" && ok "more micro-batches than examples are refused" ||
    bad "bad micro_batches: $(tail -n 2 "$work/bad2.log")"
  ;;
hung)
  # SIGSTOP (not death, which the launcher reports) to a rank mid-run: the others give up
  # after strategy.timeout_seconds, naming the rank or the message they waited for, and
  # the job ends non-zero well within 30 s.
  # multi_worker_mirrored: stopped between collectives, rank 1 is named; stopped inside one
  # (after entering it, which ASan's slower collectives make likely), no counter can tell
  # who, and rank 0 says so.
  stop_rank_and_expect 1 '^\[rank 0\] error: rank 0: [a-z_]+ #[0-9]+ did not complete within 5 s: (rank 1 \(it is at collective #[0-9]+\) did not arrive|every rank entered it, so one stopped inside it)' \
    "${mpirun[@]}" -np 2 "$distrain" train "$recipe" "${mw[@]}" --set strategy.timeout_seconds=5 --set train.epochs=400 --run-dir "$work/h"
  # parameter_server, synchronous: a server that hears from no worker names the one behind
  # (or the message it was in the middle of with the stopped one); when the workers are
  # level, the stopped one holds up a collective among the workers, whose timeout (twice
  # the server's) names it. Either way rank 2 is named.
  stop_rank_and_expect 2 'error: rank [0-9]+: .*within (5|10) s' \
    "${mpirun[@]}" -np 3 "$distrain" train "$recipe" --set strategy.name=parameter_server --set strategy.staleness=0 \
    --set strategy.timeout_seconds=5 --set train.epochs=400 --run-dir "$work/hps"
  named=$(grep -m 1 -E '^\[rank [01]\] error: rank [01]: .*(the slowest, rank 2,|\(rank 2\) did not complete|did not complete within 10 s: rank 2 \(it is at collective)' "$work/hps.log")
  [ -n "$named" ] && ok "parameter_server: the stopped worker is named: $named" ||
    bad "parameter_server: no server message naming rank 2: $(grep -m 3 'error' "$work/hps.log")"
  # The mesh's tensor and pipeline exchanges run on communicators split from the world:
  # they carry its timeout too (they once waited forever).
  stop_rank_and_expect 1 '^\[rank 0\] error: rank 0: .*within 5 s' \
    "${mpirun[@]}" -np 2 "$distrain" train "$recipe" --set strategy.name=mesh --set strategy.tensor=2 \
    --set strategy.timeout_seconds=5 --set train.epochs=400 --run-dir "$work/htensor"
  stop_rank_and_expect 1 '^\[rank 0\] error: rank 0: .*within 5 s' \
    "${mpirun[@]}" -np 2 "$distrain" train "$recipe" --set strategy.name=mesh --set strategy.pipeline=2 \
    --set strategy.micro_batches=2 --set strategy.timeout_seconds=5 --set train.epochs=400 --run-dir "$work/hpipe"
  "$distrain" check "$recipe" --set strategy.timeout_seconds=1e10 >"$work/huge.log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "timeout_seconds: must be between 0" "$work/huge.log" &&
    ok "strategy.timeout_seconds beyond a year is refused" || bad "timeout_seconds = 1e10: exit $rc: $(tail -n 2 "$work/huge.log")"
  "$distrain" train "$recipe" --set strategy.timeout_seconds=-1 >"$work/neg.log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "timeout_seconds" "$work/neg.log" && ok "a negative strategy.timeout_seconds is refused" ||
    bad "timeout_seconds = -1: exit $rc: $(tail -n 2 "$work/neg.log")"
  ;;
gpt_mesh)
  # The Shakespeare GPT (4 blocks, width 128, 4 heads, tied head) on the mesh: 5 steps of
  # every layout give one_device's weights with the same global batch of 12, relative to
  # the largest weight. Tensor parallelism splits attention by heads and the MLP as a
  # column/row pair, the embedding and the tied head by vocabulary (65 tokens: slices of
  # 32 and 33, or 16, 16, 16 and 17) unless vocab_parallel = false; pipeline stages start at block boundaries, the last keeping a copy of
  # the embedding for the tied head.
  gpt=("$src/recipes/shakespeare_char_gpt.toml" --set "data.path=$src/data/tiny_shakespeare.txt" --set train.validate=false)
  msh=(--set strategy.name=mesh)
  "$distrain" train --progress none "${gpt[@]}" --set train.steps=5 --run-dir "$work/one" >"$work/one.log" 2>&1 || bad "one_device: $(tail -n 3 "$work/one.log")"
  gpt_case() {  # NAME NP ARGS...   (against $work/${ref:-one})
    local name=$1 np=$2
    shift 2
    if timeout 300 "${mpirun[@]}" -np "$np" "$distrain" train --progress none "${gpt[@]}" "${msh[@]}" --set train.steps=5 "$@" --run-dir "$work/$name" \
      >"$work/$name.log" 2>&1 &&
      "$distrain" compare "$work/${ref:-one}/ckpt-000005.h5" "$work/$name/ckpt-000005.h5" --rtol "${rtol:-1e-5}" --scale model >"$work/$name.cmp"; then
      ok "gpt $name matches ${ref:-one} ($(grep -oE 'relative [0-9.e+-]+' "$work/$name.cmp" | sort -k2 -g | tail -n 1))"
    else
      bad "gpt $name: $(tail -n 3 "$work/$name.log" "$work/$name.cmp" 2>/dev/null)"
    fi
  }
  gpt_case tensor2 2 --set strategy.tensor=2
  gpt_case tensor4 4 --set strategy.tensor=4
  gpt_case tensor2_vocabulary_whole 2 --set strategy.tensor=2 --set strategy.vocab_parallel=false
  gpt_case tensor2_sequence_parallel 2 --set strategy.tensor=2 --set strategy.sequence_parallel=true
  gpt_case tensor4_sequence_parallel 4 --set strategy.tensor=4 --set strategy.sequence_parallel=true
  gpt_case pipeline2 2 --set strategy.pipeline=2 --set strategy.micro_batches=4
  gpt_case pipeline4 4 --set strategy.pipeline=4 --set strategy.micro_batches=3 --set strategy.schedule=gpipe
  gpt_case data2xtensor2xpipeline2 8 --set strategy.data=2 --set strategy.tensor=2 --set strategy.pipeline=2 \
    --set strategy.per_replica_batch=6 --set strategy.micro_batches=3 --set strategy.shard_optimizer=true
  gpt_case tensor2xpipeline2_sequence_parallel_recompute 4 --set strategy.tensor=2 --set strategy.pipeline=2 \
    --set strategy.micro_batches=2 --set strategy.sequence_parallel=true --set train.recompute=blocks
  gpt_case data2xpipeline2_shard_optimizer_offload 4 --set strategy.data=2 --set strategy.pipeline=2 --set strategy.per_replica_batch=6 \
    --set strategy.micro_batches=3 --set strategy.shard_optimizer=true --set strategy.offload_optimizer=true
  gpt_case data2xtensor2xpipeline2_sequence_parallel 8 --set strategy.data=2 --set strategy.tensor=2 --set strategy.pipeline=2 \
    --set strategy.per_replica_batch=6 --set strategy.micro_batches=3 --set strategy.sequence_parallel=true
  # optimizer.clip_norm below every step's norm: the mesh's global norm counts each element
  # of the model once (slices per tensor rank, whole variables once, the tied table once,
  # ZeRO-1 shards once), so it clips as one_device does and logs the same grad_norm.
  clip=(--set optimizer.clip_norm=0.05)
  "$distrain" train --progress none "${gpt[@]}" "${clip[@]}" --set train.steps=5 --run-dir "$work/one_clip" >/dev/null 2>&1
  norm_of() { grep -oE '"grad_norm":[0-9.e+-]+' "$1/metrics.jsonl" | tail -n 1; }
  ref=one_clip gpt_case tensor2xpipeline2_clip 4 --set strategy.tensor=2 --set strategy.pipeline=2 --set strategy.micro_batches=2 "${clip[@]}"
  ref=one_clip gpt_case data2xtensor2xpipeline2_shard_optimizer_clip 8 --set strategy.data=2 --set strategy.tensor=2 \
    --set strategy.pipeline=2 --set strategy.per_replica_batch=6 --set strategy.micro_batches=3 --set strategy.shard_optimizer=true "${clip[@]}"
  awk -v a="$(norm_of "$work/one_clip" | cut -d: -f2)" -v b="$(norm_of "$work/data2xtensor2xpipeline2_shard_optimizer_clip" | cut -d: -f2)" \
    'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0.05 && d <= 1e-5 * a) }' &&
    ok "gpt clip: the mesh logs one_device's grad_norm ($(norm_of "$work/one_clip"))" ||
    bad "gpt clip grad_norm: $(norm_of "$work/one_clip") vs $(norm_of "$work/data2xtensor2xpipeline2_shard_optimizer_clip")"
  # The memory prediction (check's and bench's): every replica's measured high-water mark
  # within 10% of it, for each kind of layout (the issue's goal; all were within 0.5%).
  mem_case() {  # NAME NP ARGS...   (NP 0: no mpirun)
    local name=$1 np=$2
    shift 2
    local run=()
    [ "$np" -gt 0 ] && run=("${mpirun[@]}" -np "$np")
    if timeout 300 "${run[@]}" "$distrain" bench "${gpt[@]}" --steps 1 --warmup 1 --json "$@" >"$work/$name.json" 2>"$work/$name.err" &&
      python3 - "$work/$name.json" >"$work/$name.ratio" <<'PY'
import json, sys
ratios = [m / p for m, p in json.load(open(sys.argv[1]))["device_memory_per_replica"]]
print(" ".join(f"{r:.3f}" for r in ratios))
sys.exit(0 if ratios and all(0.9 <= r <= 1.1 for r in ratios) else 1)
PY
    then
      ok "gpt $name: measured/predicted device memory per replica $(cat "$work/$name.ratio")"
    else
      bad "gpt $name memory: $(cat "$work/$name.ratio" 2>/dev/null) $(tail -n 2 "$work/$name.err")"
    fi
  }
  mem_case memory_one_device 0
  mem_case memory_zero3_recompute_offload 0 --set strategy.name=zero --set strategy.stage=3 \
    --set 'strategy.devices=["cpu:0","cpu:1"]' --set strategy.per_replica_batch=6 --set train.recompute=blocks \
    --set strategy.offload_optimizer=true
  mem_case memory_tensor2_sequence_parallel 2 "${msh[@]}" --set strategy.tensor=2 --set strategy.sequence_parallel=true
  mem_case memory_data2xtensor2xpipeline2 8 "${msh[@]}" --set strategy.data=2 --set strategy.tensor=2 --set strategy.pipeline=2 \
    --set strategy.per_replica_batch=6 --set strategy.micro_batches=3 --set strategy.shard_optimizer=true
  # plan's choice for 2 ranks of 30 MiB (data 2 alone needs 33 MiB: it accumulates, shards or
  # recomputes) trains within them, its peak as predicted; with the ranks sharing cores and
  # no OMP_NUM_THREADS, bench's note on threads goes to stderr and --json stays one document.
  "$distrain" plan "${gpt[@]}" --ranks 2 --device-memory 30MiB --profile-steps 1 --profile-rounds 1 --write "$work/planned30.toml" >"$work/plan30.log" 2>&1
  if env -u OMP_NUM_THREADS timeout 300 "${mpirun[@]}" -np 2 "$distrain" bench "$work/planned30.toml" --steps 1 --warmup 1 --json \
    >"$work/planned30.json" 2>"$work/planned30.err" && python3 - "$work/planned30.json" >"$work/planned30.ratio" <<'PY'
import json, sys
pairs = json.load(open(sys.argv[1]))["device_memory_per_replica"]
print(" ".join(f"{m / 2**20:.2f} MiB ({m / p:.3f} of predicted)" for m, p in pairs))
sys.exit(0 if pairs and all(m <= 30 * 2**20 and 0.9 <= m / p <= 1.1 for m, p in pairs) else 1)
PY
  then
    ok "gpt: plan's layout for 30 MiB ($(grep '^choice' "$work/plan30.log" | cut -c 13- | cut -d: -f1)) peaks at $(cat "$work/planned30.ratio")"
  else
    bad "gpt plan 30 MiB: $(grep '^choice' "$work/plan30.log") $(cat "$work/planned30.ratio" 2>/dev/null) $(head -c 200 "$work/planned30.json") $(tail -n 2 "$work/planned30.err")"
  fi
  # plan's traffic is what a run sends. Along the tensor axis (each layer's tensor_traffic,
  # the loss's sums, the whole weights' sums under sequence parallelism) rank 0's bytes and
  # collectives per step exactly, for each tensor layout of 4 ranks on 1 host (tensor 4
  # included): the GPT, with the vocabulary kept whole too (the head's output gathered),
  # the MLP and the CNN (their first split layers read untrained layers: no input gradient).
  # Along the data axis the bytes within 1% without a pipeline (ZeRO-3 gathers the tied
  # table once more for the head, which plan leaves out: 0.7% here), recomputation's
  # regathers included.
  traffic_case() {  # NAME AXES RECIPE-ARGS...   (AXES: "tensor" or "tensor data"; RECIPE-ARGS to plan and bench)
    local name=$1 axes=$2
    shift 2
    "$distrain" plan "$@" --ranks 4 --hosts 1 --links intra=1GB/s --profile-steps 1 --profile-rounds 1 --json \
      >"$work/$name.plan.json" 2>"$work/$name.plan.err" || { bad "$name: plan: $(tail -n 2 "$work/$name.plan.err")"; return; }
    python3 - "$work/$name.plan.json" "$axes" >"$work/$name.layouts" <<'PY'
import json, shlex, sys
data = "data" in sys.argv[2].split()
for c in json.load(open(sys.argv[1])):
    if c["fits"] and not c["offload_optimizer"] and (c["tensor"] > 1 or (data and c["data"] > 1 and c["pipeline"] == 1)):
        sent = c["sent_per_step"]
        sets = " ".join("--set " + shlex.quote(s) for s in c["set"])
        print(c["layout"], sent["tensor_bytes"], sent["tensor_collectives"], sent["data_bytes"] if data and c["pipeline"] == 1 else -1,
              sets, sep="\t")
PY
    local layout tensor_bytes collectives data_bytes sets checked=0
    while IFS=$'\t' read -r layout tensor_bytes collectives data_bytes sets; do
      eval "local -a set_args=($sets)"
      if ! timeout 300 "${mpirun[@]}" -np 4 "$distrain" bench "$@" "${set_args[@]}" --steps 2 --warmup 1 --json \
          >"$work/$name.bench.json" 2>"$work/$name.bench.err" </dev/null; then
        bad "$name $layout: bench: $(tail -n 2 "$work/$name.bench.err")"; continue
      fi
      local seen
      if seen=$(python3 - "$work/$name.bench.json" "$tensor_bytes" "$collectives" "$data_bytes" 2>&1 <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["sent_per_step"]
tensor_bytes, collectives, data_bytes = (float(v) for v in sys.argv[2:])
print(f"bench counted {s['tensor_bytes']:.0f} B in {s['tensor_collectives']:.0f} collectives along the tensor axis, "
      f"{s['data_bytes']:.0f} B along the data axis")
same_tensor = round(s["tensor_bytes"]) == round(tensor_bytes) and round(s["tensor_collectives"]) == round(collectives)
sys.exit(0 if same_tensor and (data_bytes < 0 or abs(s["data_bytes"] - data_bytes) <= 0.01 * data_bytes) else 1)
PY
      ); then
        checked=$((checked + 1))
      else
        bad "$name $layout: plan says $tensor_bytes B in $collectives collectives along the tensor axis, $data_bytes B along the data axis; $seen"
      fi
    done <"$work/$name.layouts"
    [ "$checked" -gt 0 ] && ok "$name: plan's traffic is bench's for $checked layouts" || bad "$name: no layout checked"
  }
  traffic_case traffic "tensor data" "${gpt[@]}"
  traffic_case traffic_vocabulary_whole tensor "${gpt[@]}" "${msh[@]}" --set strategy.vocab_parallel=false
  traffic_case traffic_mlp tensor "$src/recipes/fashion_mnist_mlp_tensor_parallel.toml"
  traffic_case traffic_cnn tensor "$src/recipes/fashion_mnist_cnn.toml"
  # bf16 products (emulated where the CPU has neither AVX512_BF16 nor AMX): tensor 2 with
  # sequence parallelism keeps to one_device in bf16 within a bf16 step (1e-3 of the largest
  # weight; operands are rounded alike, the sums' order differs), and the operand copies are
  # predicted too.
  bf16=(--set train.precision=bf16)
  "$distrain" train --progress none "${gpt[@]}" "${bf16[@]}" --set train.steps=5 --run-dir "$work/one_bf16" >/dev/null 2>&1
  ref=one_bf16 rtol=1e-3 gpt_case tensor2_sequence_parallel_bf16 2 --set strategy.tensor=2 --set strategy.sequence_parallel=true "${bf16[@]}"
  # A stage's output is rounded as one_device rounds that layer's, and the sums are the
  # same: pipeline 2 in bf16 is one_device in bf16 (bitwise, measured).
  ref=one_bf16 rtol=1e-6 gpt_case pipeline2_bf16 2 --set strategy.pipeline=2 "${bf16[@]}"
  # ZeRO under bf16 over MPI: float32 masters, their bf16 rounding all-gathered as 16-bit
  # words; stage 3's masters in host memory. Every layout reads the same rounded weights as
  # one_device in bf16, but the two ranks' gradients are summed in another order: an ulp
  # there can carry one of attention's bf16 operands (a probability, a score gradient) to
  # the next bf16 value. Within 1e-4 of the largest weight (9e-6 measured; 7e-9 while
  # attention's products were float32).
  zero16=(--set strategy.name=zero --set strategy.per_replica_batch=6 "${bf16[@]}")
  ref=one_bf16 rtol=1e-4 gpt_case zero2_bf16 2 "${zero16[@]}" --set strategy.stage=2
  ref=one_bf16 rtol=1e-4 gpt_case zero3_bf16_offload 2 "${zero16[@]}" --set strategy.stage=3 --set strategy.offload_optimizer=true
  # The mesh's shard_optimizer under bf16: float32 masters of each data rank's shard, here in
  # host memory, and bf16 whole weights, as zero stage 1; with tensor 2 within a bf16 step
  # of one_device in bf16, as above.
  shard16=(--set strategy.data=2 --set strategy.tensor=2 --set strategy.per_replica_batch=6 --set strategy.shard_optimizer=true
    --set strategy.offload_optimizer=true "${bf16[@]}")
  ref=one_bf16 rtol=1e-3 gpt_case data2xtensor2_shard_optimizer_bf16_offload 4 "${shard16[@]}"
  mem_case memory_data2xtensor2_shard_optimizer_bf16_offload 4 "${msh[@]}" "${shard16[@]}"
  # With pipeline stages the micro-batches in flight unpack the same bf16 weights: bitwise
  # the layout without shard_optimizer (whose float32 weights each layer reads rounded),
  # which is within a bf16 step of one_device (its micro-batches' gradients add up in
  # another order than one whole batch's).
  pipe16=(--set strategy.data=2 --set strategy.pipeline=2 --set strategy.micro_batches=3 --set strategy.per_replica_batch=6
    "${bf16[@]}")
  ref=one_bf16 rtol=1e-3 gpt_case data2xpipeline2_bf16 4 "${pipe16[@]}"
  pipe16+=(--set strategy.shard_optimizer=true)
  ref=data2xpipeline2_bf16 rtol=0 gpt_case data2xpipeline2_shard_optimizer_bf16 4 "${pipe16[@]}"
  mem_case memory_data2xpipeline2_shard_optimizer_bf16 4 "${msh[@]}" "${pipe16[@]}"
  mem_case memory_one_device_bf16 0 "${bf16[@]}"
  mem_case memory_zero2_bf16_offload 0 "${zero16[@]}" --set strategy.stage=2 --set 'strategy.devices=["cpu:0","cpu:1"]' \
    --set strategy.offload_optimizer=true
  mem_case memory_tensor2_sequence_parallel_bf16 2 "${msh[@]}" --set strategy.tensor=2 --set strategy.sequence_parallel=true "${bf16[@]}"
  "$distrain" check "${gpt[@]}" "${msh[@]}" --set strategy.tensor=2 --set strategy.device_memory=10MiB >"$work/over.log" 2>&1
  rc=$?
  [ "$rc" = 2 ] && [ "$(grep -c '^rank.*over strategy.device_memory = 10.00 MiB' "$work/over.log")" = 2 ] &&
    grep -q '^error: .*over strategy.device_memory = 10.00 MiB; shard' "$work/over.log" &&
    ok "check flags each rank whose predicted bytes exceed strategy.device_memory, exit 2" ||
    bad "check over budget (exit $rc): $(grep '^rank\|^error' "$work/over.log")"
  # A checkpoint of data 2 x tensor 2 x pipeline 2 (ZeRO-1) at step 10 resumes under
  # one_device and under tensor 4: steps 11-20 take the uninterrupted run's steps (the
  # weights after each within 1e-5 of the largest) and end with its running loss.
  every=(--set checkpoint.every_steps=1 --set checkpoint.keep=30)
  loss_of() { grep -oE '"loss":[0-9.e+-]+' "$1/metrics.jsonl" | tail -n 1 | cut -d: -f2; }
  same_losses() {  # DIR_A DIR_B
    local s
    for s in $(seq 11 20); do
      "$distrain" compare "$1/ckpt-0000$s.h5" "$2/ckpt-0000$s.h5" --rtol 1e-5 --scale model >/dev/null || return 1
    done
    awk -v a="$(loss_of "$1")" -v b="$(loss_of "$2")" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-5 * a) }'
  }
  "$distrain" train --progress none "${gpt[@]}" "${every[@]}" --set train.steps=20 --run-dir "$work/full" >/dev/null 2>&1
  "${mpirun[@]}" -np 8 "$distrain" train --progress none "${gpt[@]}" "${every[@]}" "${msh[@]}" --set strategy.data=2 --set strategy.tensor=2 \
    --set strategy.pipeline=2 --set strategy.per_replica_batch=6 --set strategy.micro_batches=3 --set strategy.shard_optimizer=true \
    --set train.steps=10 --run-dir "$work/r1" >"$work/r1.log" 2>&1
  cp -r "$work/r1" "$work/r4"
  "$distrain" train --progress none "${gpt[@]}" "${every[@]}" --set train.steps=20 --run-dir "$work/r1" >"$work/r1b.log" 2>&1
  grep -q "resuming from .*ckpt-000010" "$work/r1b.log" && same_losses "$work/full" "$work/r1" &&
    ok "gpt: data 2 x tensor 2 x pipeline 2 step 10 -> one_device: steps 11-20 lose as the uninterrupted run" ||
    bad "gpt 3d -> one_device: $(tail -n 3 "$work/r1.log" "$work/r1b.log") losses $(loss_of "$work/full") $(loss_of "$work/r1")"
  "${mpirun[@]}" -np 4 "$distrain" train --progress none "${gpt[@]}" "${every[@]}" "${msh[@]}" --set strategy.tensor=4 --set train.steps=20 \
    --run-dir "$work/r4" >"$work/r4b.log" 2>&1
  grep -q "resuming from .*ckpt-000010" "$work/r4b.log" && same_losses "$work/full" "$work/r4" &&
    ok "gpt: data 2 x tensor 2 x pipeline 2 step 10 -> tensor 4: steps 11-20 lose as the uninterrupted run" ||
    bad "gpt 3d -> tensor 4: $(tail -n 3 "$work/r4b.log") losses $(loss_of "$work/full") $(loss_of "$work/r4")"
  # The same layout resumes from the masters it checkpointed at step 5: steps 6-10 are the
  # uninterrupted run's, bitwise.
  "${mpirun[@]}" -np 4 "$distrain" train --progress none "${gpt[@]}" "${every[@]}" "${msh[@]}" "${shard16[@]}" --set train.steps=10 \
    --run-dir "$work/m16" >"$work/m16.log" 2>&1
  "${mpirun[@]}" -np 4 "$distrain" train --progress none "${gpt[@]}" "${every[@]}" "${msh[@]}" "${shard16[@]}" --set train.steps=5 \
    --run-dir "$work/m16r" >"$work/m16r.log" 2>&1
  "${mpirun[@]}" -np 4 "$distrain" train --progress none "${gpt[@]}" "${every[@]}" "${msh[@]}" "${shard16[@]}" --set train.steps=10 \
    --run-dir "$work/m16r" >"$work/m16rb.log" 2>&1
  grep -q "resuming from .*ckpt-000005" "$work/m16rb.log" &&
    "$distrain" compare "$work/m16/ckpt-000010.h5" "$work/m16r/ckpt-000010.h5" --rtol 0 >"$work/m16.cmp" 2>&1 &&
    ok "gpt: data 2 x tensor 2, shard_optimizer, bf16 masters offloaded: resumed at step 5, step 10 bitwise the uninterrupted run's" ||
    bad "gpt bf16 masters resume: $(tail -n 2 "$work/m16rb.log" "$work/m16.cmp")"
  # Layouts the GPT cannot take are refused before training, naming the key.
  "$distrain" check "${gpt[@]}" "${msh[@]}" --set strategy.tensor=8 >"$work/t8.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && grep -q "layer 'h.0.attn': heads = 4 do not split over a tensor degree of 8" "$work/t8.log" &&
    ok "tensor 8 with 4 heads is refused naming the layer" || bad "tensor 8: exit $rc: $(tail -n 2 "$work/t8.log")"
  "$distrain" check "${gpt[@]}" "${msh[@]}" --set strategy.pipeline=2 --set 'strategy.stage_boundaries=["h.1.attn"]' >"$work/cut.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && grep -q "a stage cannot start at 'h.1.attn'" "$work/cut.log" &&
    ok "a stage boundary inside a block is refused" || bad "boundary h.1.attn: exit $rc: $(tail -n 2 "$work/cut.log")"
  ;;
llama_mesh)
  # The Shakespeare Llama (4 blocks: grouped-query attention with rotary positions, RMS norms,
  # SwiGLU, an untied head) across MPI ranks: 5 steps of each layout give one_device's
  # weights with the same global batch of 12, relative to the largest weight. The thread
  # communicators' layouts are in test_gpt_strategies.cpp; these are the process ones.
  llama=("$src/recipes/llama_shakespeare.toml" --set "data.path=$src/data/tiny_shakespeare.txt" --set train.validate=false --set train.steps=5)
  msh=(--set strategy.name=mesh)
  "$distrain" train --progress none "${llama[@]}" --run-dir "$work/one" >"$work/one.log" 2>&1 || bad "one_device: $(tail -n 3 "$work/one.log")"
  llama_case() {  # NAME NP ARGS...
    local name=$1 np=$2
    shift 2
    if timeout 300 "${mpirun[@]}" -np "$np" "$distrain" train --progress none "${llama[@]}" "$@" --run-dir "$work/$name" \
      >"$work/$name.log" 2>&1 &&
      "$distrain" compare "$work/one/ckpt-000005.h5" "$work/$name/ckpt-000005.h5" --rtol 1e-5 --scale model >"$work/$name.cmp"; then
      ok "llama $name matches one_device ($(grep -oE 'relative [0-9.e+-]+' "$work/$name.cmp" | sort -k2 -g | tail -n 1))"
    else
      bad "llama $name: $(tail -n 3 "$work/$name.log" "$work/$name.cmp" 2>/dev/null)"
    fi
  }
  llama_case multi_worker_mirrored2 2 --set strategy.name=multi_worker_mirrored --set strategy.per_replica_batch=6
  llama_case zero1_offload 2 --set strategy.name=zero --set strategy.stage=1 --set strategy.per_replica_batch=6 \
    --set strategy.offload_optimizer=true
  llama_case zero2_offload 2 --set strategy.name=zero --set strategy.stage=2 --set strategy.per_replica_batch=6 \
    --set strategy.offload_optimizer=true
  llama_case tensor2_sequence_parallel 2 "${msh[@]}" --set strategy.tensor=2 --set strategy.sequence_parallel=true
  llama_case pipeline4 4 "${msh[@]}" --set strategy.pipeline=4 --set strategy.micro_batches=3
  llama_case pipeline4_gpipe 4 "${msh[@]}" --set strategy.pipeline=4 --set strategy.micro_batches=4 --set strategy.schedule=gpipe
  llama_case data2xpipeline2_shard_optimizer_offload 4 "${msh[@]}" --set strategy.data=2 --set strategy.pipeline=2 \
    --set strategy.per_replica_batch=6 --set strategy.micro_batches=3 --set strategy.shard_optimizer=true --set strategy.offload_optimizer=true
  ;;
*)
  echo "unknown group $group"
  exit 2
  ;;
esac
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
