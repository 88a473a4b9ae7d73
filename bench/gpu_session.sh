#!/usr/bin/env bash
# Everything issue 5 measures on a GPU, in one command, for the lent GPU machine.
#   here:            bash bench/gpu_session.sh prepare     # writes .gpu/ (carry it)
#   on the GPU:      bash bench/gpu_session.sh run OUTDIR  # from the repository root
# prepare packs the relocatable bundle (make bundle), the unit-test binary and the
# Fashion-MNIST files into .gpu/ (git-ignored, about 56 MB). run unpacks them, points the
# library path at the CUDA, cuBLAS, cuDNN and NCCL libraries of the machine's PyTorch,
# and writes into OUTDIR: info.txt, gpu_tests.txt (the CUDA unit tests), bench.jsonl
# (distrain bench on cuda:0 and PyTorch eager / torch.compile, batch 64 and 512, side by
# side), and train.txt + train.json (the default recipe trained on cuda:0, with time).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: gpu_session.sh prepare | run OUTDIR}

if [ "$mode" = prepare ]; then
  set -e
  make -s bundle >/dev/null
  rm -rf .gpu && mkdir -p .gpu/data .gpu/tests
  cp dist/distrain-*-linux-*.tar.gz .gpu/
  cp build/tests/unit_tests .gpu/tests/
  cp /usr/share/datasets/fashion-mnist/*.gz .gpu/data/
  du -sh .gpu
  exit 0
fi

out=${2:?usage: gpu_session.sh run OUTDIR}
mkdir -p "$out"
work=$(mktemp -d)
tar -C "$work" -xzf .gpu/distrain-*-linux-*.tar.gz
bundle=$(ls -d "$work"/distrain-*)
exe="$bundle/bin/distrain"
export LD_LIBRARY_PATH="$("$bundle/bin/distrain-gpu" --library-path):$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS=8
data="$PWD/.gpu/data"

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; "$exe" info; } >"$out/info.txt" 2>&1
# The CUDA cases of the unit tests (parity with the CPU, training, logical devices, NCCL).
DISTRAIN_CUDA_PLUGIN="$bundle/lib/libdistrain_cuda.so" .gpu/tests/unit_tests -tc='*cuda*' >"$out/gpu_tests.txt" 2>&1
echo "unit_tests exit $?" >>"$out/gpu_tests.txt"

: >"$out/bench.jsonl"
for batch in 64 512; do
  "$exe" bench recipes/fashion_mnist_cnn.toml --set 'strategy.devices=["cuda:0"]' \
    --set strategy.per_replica_batch=$batch --set "data.path=\"$data\"" --steps 200 --warmup 30 --json \
    >>"$out/bench.jsonl" 2>>"$out/bench.err"
  python3 bench/pytorch_gpu_reference.py --batch $batch >>"$out/bench.jsonl" 2>>"$out/bench.err"
done

# The default recipe on cuda:0: accuracy and training time.
{ time "$exe" train recipes/fashion_mnist_cnn.toml --set 'strategy.devices=["cuda:0"]' \
  --set "data.path=\"$data\"" --run-dir "$work/run"; } >"$out/train.txt" 2>&1
cp "$work/run/summary.json" "$out/train.json" 2>/dev/null
echo "done: $(ls "$out")"
