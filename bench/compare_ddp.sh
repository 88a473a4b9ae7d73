#!/usr/bin/env bash
# Weak scaling of the default CNN, 1 and 2 replicas, on this machine's threads:
# distrain mirrored (threads), distrain multi_worker_mirrored (mpirun) and PyTorch DDP
# over gloo (bench/pytorch_ddp_reference.py), one after the other in one command.
#   bench/compare_ddp.sh [BUILD_DIR] [THREADS]
set -euo pipefail
build=${1:-build}
threads=${2:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
export OMP_NUM_THREADS=$threads
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
recipe=$here/recipes/fashion_mnist_cnn.toml
for s in mirrored multi_worker_mirrored; do
  "$here/$build/distrain" bench "$recipe" --strategy $s --replicas 1,2 --steps 100 --warmup 10
done
(cd "$here/bench" && /usr/bin/python3 pytorch_ddp_reference.py --replicas 1,2 --threads "$threads" --steps 100 --warmup 10 2>/dev/null)
