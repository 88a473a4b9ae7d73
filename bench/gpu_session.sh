#!/usr/bin/env bash
# Everything measured on the lent GPU machine, in one command.
#   here:            [LLMC_DIR=~/llm.c] [BASELINE=old.tar.gz] bash bench/gpu_session.sh prepare [gpt]   # writes .gpu/ (carry it)
#   on the GPU:      bash bench/gpu_session.sh run OUTDIR [PART...]    # from the repository root
# prepare packs the relocatable bundle (make bundle), the unit-test binary and the
# Fashion-MNIST files into .gpu/ (git-ignored, about 60 MB; 30 MB less with 'gpt', which
# leaves Fashion-MNIST out: enough for the parts tests, sanitize, gpt, gpt_refs and
# kernels), and the kernel timer (bench/kernel_times.cpp); with LLMC_DIR (a checkout of
# https://github.com/karpathy/llm.c) also llm.c's CUDA trainer built from it (build_llmc);
# with BASELINE (a bundle made by `make bundle` at an earlier commit) that bundle's
# executable and CUDA plugin, for the part ab.
# run unpacks them, points the
# library path at the CUDA, cuBLAS, cuDNN and NCCL libraries of the machine's PyTorch,
# and runs the PARTs (default: all but kernels_refs and gemm_modes, in this order), each
# under a time limit. OUTDIR gets up to eight files (the device tool brings back at most
# eight): info.txt (GPU, driver, CPU), progress.txt, tests.txt, train.txt, profile.txt,
# kernels.txt, results.jsonl (every figure, one JSON object per line) and errors.txt (what
# the commands wrote to stderr).
#   tests     the CUDA unit tests (parity with the CPU, logical devices, NCCL with one rank)
#   train     the default recipe on cuda:0 and the GPU recipe, per-epoch metrics and time
#             to 91%; the last checkpoint evaluated on the CPU
#   bench     distrain bench on cuda:0 at batch 64, 512 and 4096, figures read every 16 steps and every step
#   profile   bench --profile on cuda:0 at batch 64 and 4096 (profile.txt)
#   refs      PyTorch eager, torch.compile(mode="reduce-overhead") and JAX jit, same batches
#   cpu       mirrored and multi_worker_mirrored (the bundle's bin/mpirun) on 1, 2, 4, 8
#             replicas of 2 threads each, and PyTorch DDP over gloo with the same
#             per-process batch and threads
#   strategies  zero (threads, offloaded, 2 ranks), multi_worker_mirrored, parameter_server and mesh
#             layouts on cuda:0 under the bundle's mpirun, ranks sharing the GPU, each against
#             one_device on cuda:0 (tests.txt)
#   sanitize  the CUDA unit tests under compute-sanitizer memcheck and racecheck (those
#             SANITIZE_TESTS names, a doctest filter; default all)
#   gpt       distrain bench on cuda:0, float32 and bf16: the Shakespeare GPT (batch 12 x 64)
#             and GPT-2 124M at batch 4 and 16 x 1024 (random token ids); GPT-2's layers
#             at 16 x 1024 profiled (profile.txt)
#   gpt_refs  PyTorch eager at the same GPT-2 points, torch.compile at 16 x 1024
#   kernels   every kernel's device time (bench/kernel_times.cpp through CUPTI) in distrain's
#             GPT-2 124M at 16 x 1024, 12 steps (kernels.txt)
#   kernels_refs  the same for PyTorch eager and torch.compile
#   gemm_modes    bench/bf16_gemm_modes.cu: GPT-2's bf16 products with packed operands and
#             with cuBLAS's own rounding (CUBLAS_COMPUTE_32F_FAST_16BF), into kernels.txt
#   ab        the baseline (prepared with BASELINE) and this build in turn, twice: GPT-2 124M
#             at 16 and 4 x 1024 and the Shakespeare GPT, PRECISIONS; each JSON line in
#             results.jsonl gets "build": "baseline" or "this"
#   llmc      llm.c's train_gpt2cu (prepared with LLMC_DIR), GPT-2 124M from scratch at 4 and
#             16 x 1024 on random token ids, its defaults (bf16, float32 master weights,
#             GELU recomputed): step times into results.jsonl, its output into train.txt
# PRECISIONS (default "float32 bf16") limits gpt and gpt_refs to those train.precision values.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: gpu_session.sh prepare | run OUTDIR [PART...]}

# llm.c's CUDA trainer from the checkout $1 into $2, with llm.c's own Makefile (this
# repository carries none of llm.c's code), in a scratch copy with two fixes for this
# machine: CUDA 13's cudaMemAdvise takes a cudaMemLocation where older releases took a
# device id, and the Makefile links NVML (the GPU driver's library, absent here) although
# train_gpt2cu calls none of it: an empty library of that name satisfies the link.
build_llmc() {
  local src=$1 dst=$2 tmp
  tmp=$(mktemp -d)
  cp -r "$src"/. "$tmp/"
  sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
    "$tmp/llmc/cuda_utils.cuh"
  mkdir -p "$tmp/nvml"
  echo "" | gcc -x c -shared -o "$tmp/nvml/libnvidia-ml.so" -
  LIBRARY_PATH="$tmp/nvml" make -s -C "$tmp" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 \
    GPU_COMPUTE_CAPABILITY=90 NVCC=/usr/local/cuda/bin/nvcc >/dev/null
  cp "$tmp/train_gpt2cu" "$dst"
  rm -rf "$tmp"
}

if [ "$mode" = prepare ]; then
  set -e
  make -s bundle >/dev/null
  cmake --build build -j "$(nproc)" --target unit_tests >/dev/null
  rm -rf .gpu && mkdir -p .gpu/data .gpu/tests
  cp dist/distrain-*-linux-*.tar.gz .gpu/
  gzip -c build/tests/unit_tests >.gpu/tests/unit_tests.gz  # the device tool carries 64 MiB in all
  mkdir -p .gpu/tools  # the kernel timer and the CUPTI it links (unpacked by run)
  g++ -O2 -std=c++17 -shared -fPIC -I/usr/local/cuda/include bench/kernel_times.cpp -o .gpu/tools/libkernel_times.so \
    -L/usr/local/cuda/lib -lcupti -Wl,-rpath,'$ORIGIN'
  gzip -9 -c /usr/local/cuda/lib/libcupti.so.13 >.gpu/tools/libcupti.so.13.gz
  /usr/local/cuda/bin/nvcc -O2 -std=c++17 -arch=sm_90 bench/bf16_gemm_modes.cu -o .gpu/tools/bf16_gemm_modes -lcublas
  [ -z "${LLMC_DIR:-}" ] || build_llmc "$LLMC_DIR" .gpu/tools/train_gpt2cu
  if [ -n "${BASELINE:-}" ]; then  # the rest of its bundle is this one's
    mkdir -p .gpu/baseline
    tar -C .gpu/baseline -xzf "$BASELINE" --strip-components=2 --wildcards '*/bin/distrain' '*/lib/libdistrain_cuda.so'
    gzip .gpu/baseline/distrain .gpu/baseline/libdistrain_cuda.so
  fi
  [ "${2:-}" = gpt ] || cp /usr/share/datasets/fashion-mnist/*.gz .gpu/data/
  du -sh .gpu
  exit 0
fi

out=${2:?usage: gpu_session.sh run OUTDIR [PART...]}
shift 2
parts=${*:-tests strategies train bench profile refs cpu sanitize gpt gpt_refs llmc kernels}
mkdir -p "$out"
work=$(mktemp -d)
tar -C "$work" -xzf .gpu/distrain-*-linux-*.tar.gz
unit_tests="$work/unit_tests"
gunzip -c .gpu/tests/unit_tests.gz >"$unit_tests" && chmod +x "$unit_tests"
cp .gpu/tools/libkernel_times.so "$work/" && gunzip -c .gpu/tools/libcupti.so.13.gz >"$work/libcupti.so.13"
bundle=$(ls -d "$work"/distrain-*)
exe="$bundle/bin/distrain"
export LD_LIBRARY_PATH="$("$bundle/bin/distrain-gpu" --library-path):$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS=8 PYTHONUNBUFFERED=1
export DISTRAIN_CUDA_PLUGIN="$bundle/lib/libdistrain_cuda.so"
data="$PWD/.gpu/data"
recipe=recipes/fashion_mnist_cnn.toml
on_gpu=(--set 'strategy.devices=["cuda:0"]' --set "data.path=\"$data\"")
batches="64 512 4096"
precisions=${PRECISIONS:-float32 bf16}
results="$out/results.jsonl" errors="$out/errors.txt"
stamp() { echo "== $(date -u +%T) $*" | tee -a "$out/progress.txt"; }

{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  echo "nsys: $(command -v nsys || ls /usr/local/cuda*/bin/nsys 2>/dev/null || echo absent)"
  lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\))"; "$exe" info; } >"$out/info.txt" 2>&1

part_tests() {
  timeout 240 "$unit_tests" -tc='*cuda*' >>"$out/tests.txt" 2>&1
  echo "unit_tests exit $?" >>"$out/tests.txt"
}
# One run on cuda:0: its output, per-epoch metrics and process time into train.txt.
train_run() {
  local name=$1
  shift
  echo "== train $name: $*" >>"$out/train.txt"
  { time timeout 200 "$exe" train "$@" "${on_gpu[@]}" --run-dir "$work/$name" --progress none; } >>"$out/train.txt" 2>&1
  echo "train exit $?" >>"$out/train.txt"
  cat "$work/$name/metrics.jsonl" "$work/$name/summary.json" >>"$out/train.txt" 2>/dev/null
}
part_train() {
  train_run default $recipe
  train_run gpu recipes/fashion_mnist_cnn_gpu.toml
  train_run gpu_256 recipes/fashion_mnist_cnn_gpu.toml --set strategy.per_replica_batch=256 --set optimizer.schedule.warmup_steps=234
  train_run gpu_1024 recipes/fashion_mnist_cnn_gpu.toml --set strategy.per_replica_batch=1024 --set optimizer.schedule.warmup_steps=58 --set train.epochs=15
  local ckpt
  ckpt=$(find "$work/default" -name 'ckpt-*.h5' | sort -V | tail -1)
  echo "== eval on the CPU: $ckpt" >>"$out/train.txt"
  timeout 120 "$exe" eval --ckpt "$ckpt" --data "$data" >>"$out/train.txt" 2>&1
  echo "eval exit $?" >>"$out/train.txt"
}
# Each size twice: the figures read every 16 steps (the default on a GPU, as training
# reads them) and after every step (each step waiting for the device, as before the
# step ledger), side by side in one command.
part_bench() {
  for batch in $batches; do
    for every in 16 1; do
      timeout 120 "$exe" bench $recipe "${on_gpu[@]}" --set strategy.per_replica_batch=$batch \
        --steps 200 --warmup 30 --read-every $every --json >>"$results" 2>>"$errors"
    done
  done
}
# Where a step's time goes on the GPU (each layer followed by a stream sync).
part_profile() {
  for batch in 64 4096; do
    timeout 120 "$exe" bench $recipe "${on_gpu[@]}" --set strategy.per_replica_batch=$batch \
      --steps 100 --warmup 20 --profile >>"$out/profile.txt" 2>>"$errors"
  done
}
part_refs() {
  for batch in $batches; do
    timeout 150 python3 bench/pytorch_gpu_reference.py --batch $batch >>"$results" 2>>"$errors"
  done
  timeout 150 python3 bench/jax_gpu_reference.py --batch $batches >>"$results" 2>>"$errors"
}
part_cpu() {
  for n in 1 2 4 8; do
    OMP_NUM_THREADS=$((2 * n)) timeout 120 "$exe" bench $recipe --strategy mirrored --replicas $n \
      --set strategy.threads=$((2 * n)) --set "data.path=\"$data\"" --steps 100 --warmup 10 --json \
      >>"$results" 2>>"$errors"
  done
  # multi_worker_mirrored: one process per replica under the bundle's own Open MPI (bin/mpirun).
  for n in 1 2 4 8; do
    PATH="$bundle/bin:$PATH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=$((2 * n)) \
      timeout 120 "$exe" bench $recipe --strategy multi_worker_mirrored --replicas $n --set "data.path=\"$data\"" \
      --steps 100 --warmup 10 --json >>"$results" 2>>"$errors"
  done
  (cd bench && timeout 300 python3 pytorch_ddp_reference.py --replicas 1,2,4,8 --threads-each 2 --steps 100 --warmup 10) \
    >>"$results" 2>>"$errors"
}
# GPT-2 124M on 1,024-token windows of random ids (the speed does not depend on them).
gpt2_on_gpu=(--set 'strategy.devices=["cuda:0"]' --set "data.train_file=\"$work/gpt2.bin\""
  --set "data.val_file=\"$work/gpt2.bin\"" --set data.seq_len=1024 --set 'model.input_shape=[1024]')
make_gpt2_tokens() {
  [ -f "$work/gpt2.bin" ] || python3 -c "import random, array, sys; random.seed(1)
array.array('H', (random.randrange(50257) for _ in range(1 << 21))).tofile(open(sys.argv[1], 'wb'))" "$work/gpt2.bin"
}
part_gpt() {
  make_gpt2_tokens
  for precision in $precisions; do
    timeout 60 "$exe" bench recipes/shakespeare_char_gpt.toml --set 'strategy.devices=["cuda:0"]' \
      --set "data.path=\"$PWD/data/tiny_shakespeare.txt\"" --set "train.precision=\"$precision\"" \
      --steps 100 --warmup 10 --json >>"$results" 2>>"$errors"
    for batch in 4 16; do
      timeout 120 "$exe" bench recipes/gpt2_124m.toml "${gpt2_on_gpu[@]}" --set strategy.per_replica_batch=$batch \
        --set "train.precision=\"$precision\"" --steps 20 --warmup 5 --json >>"$results" 2>>"$errors"
    done
  done
  for precision in $precisions; do
    echo "== GPT-2 124M, 16 x 1024, $precision" >>"$out/profile.txt"
    timeout 90 "$exe" bench recipes/gpt2_124m.toml "${gpt2_on_gpu[@]}" --set strategy.per_replica_batch=16 \
      --set "train.precision=\"$precision\"" --steps 5 --warmup 2 --profile >>"$out/profile.txt" 2>>"$errors"
  done
}
# One bench of `build` (baseline or this), its JSON line tagged with the build's name.
ab_bench() {
  local build=$1 exe=$2 plugin=$3
  shift 3
  DISTRAIN_CUDA_PLUGIN=$plugin timeout 120 "$exe" bench "$@" --json 2>>"$errors" |
    python3 -c "import json, sys; [print(json.dumps({**json.loads(l), 'build': sys.argv[1]})) for l in sys.stdin if l.strip()]" \
      "$build" >>"$results"
}
part_ab() {
  [ -f .gpu/baseline/distrain.gz ] || { echo "ab: no .gpu/baseline: prepare with BASELINE=<bundle>" >>"$errors"; return; }
  gunzip -c .gpu/baseline/distrain.gz >"$bundle/bin/distrain-baseline" && chmod +x "$bundle/bin/distrain-baseline"
  gunzip -c .gpu/baseline/libdistrain_cuda.so.gz >"$bundle/lib/libdistrain_cuda_baseline.so"
  make_gpt2_tokens
  for round in 1 2; do
    for precision in $precisions; do
      for build in baseline this; do
        local exe_of=$exe plugin=$DISTRAIN_CUDA_PLUGIN
        [ $build = baseline ] && exe_of=$bundle/bin/distrain-baseline plugin=$bundle/lib/libdistrain_cuda_baseline.so
        for batch in 16 4; do
          ab_bench $build "$exe_of" "$plugin" recipes/gpt2_124m.toml "${gpt2_on_gpu[@]}" \
            --set strategy.per_replica_batch=$batch --set "train.precision=\"$precision\"" --steps 20 --warmup 5
        done
        ab_bench $build "$exe_of" "$plugin" recipes/shakespeare_char_gpt.toml --set 'strategy.devices=["cuda:0"]' \
          --set "data.path=\"$PWD/data/tiny_shakespeare.txt\"" --set "train.precision=\"$precision\"" --steps 100 --warmup 10
      done
    done
  done
}
part_gpt_refs() {
  for precision in $precisions; do
    for batch in 4 16; do
      timeout 90 python3 bench/gpt_pytorch_reference.py --device cuda --size gpt2_124m --seq 1024 --batch $batch \
        --precision $precision --steps 20 --warmup 5 >>"$results" 2>>"$errors"
    done
    timeout 240 python3 bench/gpt_pytorch_reference.py --device cuda --compile --size gpt2_124m --seq 1024 --batch 16 \
      --precision $precision --steps 20 --warmup 5 >>"$results" 2>>"$errors"
  done
}
# Per-kernel device time, summed over 12 steps (2 of them warm-up) in each process.
with_kernel_times() { CUDA_INJECTION64_PATH="$work/libkernel_times.so" KERNEL_TIMES_OUT="$out/kernels.txt" "$@"; }
part_kernels() {
  make_gpt2_tokens
  for precision in $precisions; do
    echo "== distrain, GPT-2 124M, 16 x 1024, $precision" >>"$out/kernels.txt"
    with_kernel_times timeout 90 "$exe" bench recipes/gpt2_124m.toml "${gpt2_on_gpu[@]}" \
      --set strategy.per_replica_batch=16 --set "train.precision=\"$precision\"" --steps 10 --warmup 2 \
      >>"$out/kernels.txt" 2>>"$errors"
  done
}
part_gemm_modes() {
  echo "== bf16 products on cuBLAS: packed operands or CUBLAS_COMPUTE_32F_FAST_16BF" >>"$out/kernels.txt"
  timeout 120 .gpu/tools/bf16_gemm_modes >>"$out/kernels.txt" 2>>"$errors"
}
# llm.c's token files: a 256-int32 header (20240520, version 1, count), then uint16 ids.
make_llmc_tokens() {
  [ -f "$work/llmc_val.bin" ] || python3 - "$work" <<'PY'
import array, random, struct, sys
random.seed(1)
for name in ("llmc_train.bin", "llmc_val.bin"):
    n = 1 << 21
    with open(f"{sys.argv[1]}/{name}", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        array.array("H", (random.randrange(50257) for _ in range(n))).tofile(f)
PY
}
# 30 steps; the median of steps 6-30 ("step N/M | ... | X ms |" lines) as one JSON line.
part_llmc() {
  local llmc=$PWD/.gpu/tools/train_gpt2cu
  [ -x "$llmc" ] || { echo "llmc: no .gpu/tools/train_gpt2cu: prepare with LLMC_DIR=<llm.c checkout>" >>"$errors"; return; }
  make_llmc_tokens
  for batch in 4 16; do
    echo "== llm.c train_gpt2cu, GPT-2 124M (d12), $batch x 1024" >>"$out/train.txt"
    (cd "$work" && timeout 180 "$llmc" -i llmc_train.bin -j llmc_val.bin -e d12 -b $batch -t 1024 \
      -d $((batch * 1024)) -x 30 -v 100000 -s 100000 -h 0) >"$work/llmc.txt" 2>&1
    cat "$work/llmc.txt" >>"$out/train.txt"
    python3 - "$work/llmc.txt" $batch >>"$results" <<'PY'
import json, re, statistics, sys
ms = [float(m.group(2)) for m in re.finditer(r"step\s+(\d+)/\d+ \|.*?\| ([\d.]+) ms \|", open(sys.argv[1]).read())
      if int(m.group(1)) > 5]
batch = int(sys.argv[2])
if ms:
    step = statistics.median(ms)
    print(json.dumps({"framework": "llm.c train_gpt2cu", "size": "gpt2_124m", "batch": batch, "seq": 1024,
                      "precision": "bf16", "steps": len(ms), "step_ms": step, "tokens_per_sec": batch * 1024 / step * 1e3}))
PY
  done
}
part_kernels_refs() {
  for precision in $precisions; do
    for compile in "" --compile; do
      echo "== PyTorch ${compile:-eager}, GPT-2 124M, 16 x 1024, $precision" >>"$out/kernels.txt"
      with_kernel_times timeout 240 python3 bench/gpt_pytorch_reference.py --device cuda $compile --size gpt2_124m \
        --seq 1024 --batch 16 --precision $precision --steps 10 --warmup 2 >>"$out/kernels.txt" 2>>"$errors"
    done
  done
}
# zero, parameter_server and the mesh on cuda:0, several ranks sharing it (their exchanges
# through host memory: NCCL refuses two ranks on one GPU), the Shakespeare GPT 5 steps in
# float32, each against one_device on cuda:0 with the same global batch of 12 (relative to
# the largest weight), into tests.txt as "ok"/"bad" lines.
part_strategies() {
  local gpt=(recipes/shakespeare_char_gpt.toml --set "data.path=\"$PWD/data/tiny_shakespeare.txt\"" --set train.validate=false
    --set train.steps=5 --progress none --set 'strategy.devices=["cuda:0"]')
  local mpi=("$bundle/bin/mpirun" --oversubscribe --bind-to none -x OMP_NUM_THREADS=2 -x LD_LIBRARY_PATH -x DISTRAIN_CUDA_PLUGIN)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  echo "== strategies on cuda:0 against one_device on cuda:0" >>"$out/tests.txt"
  timeout 60 "$exe" train "${gpt[@]}" --run-dir "$work/s_one" >"$work/s_one.log" 2>&1 || tail -n 3 "$work/s_one.log" >>"$out/tests.txt"
  case_on_gpu() {  # NAME NP ARGS...   (NP 0: one process; rtol=R before it for another tolerance)
    local name=$1 np=$2 launch=()
    shift 2
    [ "$np" -gt 0 ] && launch=("${mpi[@]}" -np "$np")
    if timeout 120 "${launch[@]}" "$exe" train "${gpt[@]}" "$@" --run-dir "$work/s_$name" >"$work/s_$name.log" 2>&1 &&
      "$exe" compare "$work/s_one/ckpt-000005.h5" "$work/s_$name/ckpt-000005.h5" --rtol "${rtol:-1e-4}" --scale model >"$work/s_$name.cmp" 2>&1; then
      echo "ok $name ($(grep -oE 'relative [0-9.e+-]+' "$work/s_$name.cmp" | sort -k2 -g | tail -n 1))" >>"$out/tests.txt"
    else
      echo "bad $name: $(tail -n 3 "$work/s_$name.log" "$work/s_$name.cmp" 2>/dev/null | tr '\n' ' ')" >>"$out/tests.txt"
    fi
  }
  local half=(--set strategy.per_replica_batch=6)
  for stage in 1 2 3; do
    case_on_gpu zero${stage}_threads 0 --set strategy.name=zero --set strategy.stage=$stage "${half[@]}" \
      --set 'strategy.devices=["cuda:0","cuda:0"]'
    case_on_gpu zero${stage}_2ranks 2 --set strategy.name=zero --set strategy.stage=$stage "${half[@]}"
  done
  case_on_gpu zero2_offload_threads 0 --set strategy.name=zero --set strategy.stage=2 --set strategy.offload_optimizer=true \
    "${half[@]}" --set 'strategy.devices=["cuda:0","cuda:0"]'
  case_on_gpu multi_worker_2ranks 2 --set strategy.name=multi_worker_mirrored "${half[@]}"
  case_on_gpu parameter_server_sync 3 --set strategy.name=parameter_server --set strategy.staleness=0 "${half[@]}"
  local mesh=(--set strategy.name=mesh)
  case_on_gpu mesh_tensor2_sp 2 "${mesh[@]}" --set strategy.tensor=2 --set strategy.sequence_parallel=true
  case_on_gpu mesh_pipeline2 2 "${mesh[@]}" --set strategy.pipeline=2 --set strategy.micro_batches=4
  case_on_gpu mesh_data2_zero1 2 "${mesh[@]}" --set strategy.data=2 --set strategy.shard_optimizer=true "${half[@]}"
  case_on_gpu mesh_d2_t2_p2 8 "${mesh[@]}" --set strategy.data=2 --set strategy.tensor=2 --set strategy.pipeline=2 \
    --set strategy.micro_batches=3 --set strategy.shard_optimizer=true "${half[@]}"
  # bf16 on the mesh: float32 masters sharded over the data axis, against one_device in bf16.
  timeout 60 "$exe" train "${gpt[@]}" --set 'train.precision="bf16"' --run-dir "$work/s_one_bf16" >/dev/null 2>&1
  mv "$work/s_one" "$work/s_one_f32" && mv "$work/s_one_bf16" "$work/s_one"
  # tests/dist holds the CPU's bf16 mesh with tensor 2 to 1e-3 (an ulp carried past a rounding).
  rtol=1e-3 case_on_gpu mesh_bf16_t2_d2_zero1 4 "${mesh[@]}" --set 'train.precision="bf16"' --set strategy.tensor=2 --set strategy.data=2 \
    --set strategy.shard_optimizer=true "${half[@]}"
}
part_sanitize() {
  local cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  # NCCL's own start-up probes kernel images it was not built with (error 209, handled
  # inside NCCL): memcheck runs without the NCCL case, which racecheck covers.
  for tool in memcheck racecheck; do
    local skip=""
    [ $tool = memcheck ] && skip="-tce=*nccl*"
    echo "== compute-sanitizer --tool $tool" >>"$out/tests.txt"
    timeout 120 "$cs" --tool $tool --error-exitcode 9 "$unit_tests" -tc="${SANITIZE_TESTS:-cuda*}" $skip >>"$out/tests.txt" 2>&1
    echo "$tool exit $?" >>"$out/tests.txt"
  done
}

for part in $parts; do
  stamp "$part"
  "part_$part"
done
stamp done
# The summary of the parts that ran (a part's file may be absent: not an error of the run).
cat "$out"/tests.txt "$out"/train.txt 2>/dev/null | grep "exit\|test cases\|accuracy" | tail -n 20
exit 0
