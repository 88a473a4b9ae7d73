#!/usr/bin/env bash
# The checkpoints of 5 steps under every layout a structural change must leave bitwise as
# they were: bench/layout_checkpoints.sh DISTRAIN OUT_DIR writes OUT_DIR/<case>/ckpt-000005.h5
# for the CNN (one_device, mirrored, multi_worker_mirrored on 2 ranks, central_storage,
# zero 1/2/3, synchronous parameter_server), the MLP on a data 2 x tensor 2 x pipeline 2
# mesh, and the Shakespeare GPT (tensor 2 + sequence parallel, pipeline 2 with 1F1B,
# zero 3 + offload + recompute, bf16). Run it with the binaries before and after, then
#   for c in OUT_A/*/; do distrain compare $c/ckpt-000005.h5 OUT_B/$(basename $c)/ckpt-000005.h5 --rtol 0; done
B=$(realpath "$1"); O=$(realpath -m "$2"); mkdir -p "$O"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPI="mpirun --oversubscribe -np"
cd "$(dirname "$0")/.."
CNN=recipes/fashion_mnist_cnn.toml
GPT=recipes/shakespeare_char_gpt.toml
C="--set train.steps=5 --set train.validate=false --set train.tensorboard=false"
G="--set train.steps=5 --set train.validate=false --set train.tensorboard=false --set strategy.per_replica_batch=8"
run() { name=$1; shift; echo "== $name"; "$@" --run-dir $O/$name > $O/$name.log 2>&1 || { echo "FAIL $name"; tail -3 $O/$name.log; }; }
run cnn_one   $B train $CNN $C
run cnn_mirr  $B train $CNN $C --set strategy.name=mirrored --set 'strategy.devices=["cpu:0","cpu:1"]'
run cnn_mwm   $MPI 2 $B train $CNN $C --set strategy.name=multi_worker_mirrored --set 'strategy.devices=["cpu:0"]'
run cnn_cs    $B train $CNN $C --set strategy.name=central_storage --set 'strategy.devices=["cpu:0","cpu:1"]'
for s in 1 2 3; do run cnn_zero$s $MPI 2 $B train $CNN $C --set strategy.name=zero --set strategy.stage=$s --set 'strategy.devices=["cpu:0"]'; done
run cnn_ps    $MPI 3 $B train $CNN $C --set strategy.name=parameter_server --set strategy.num_ps=1 --set strategy.staleness=0 --set 'strategy.devices=["cpu:0"]'
run mlp_mesh  $MPI 8 $B train recipes/fashion_mnist_mlp_pipeline.toml $C --set strategy.name=mesh --set strategy.data=2 --set strategy.tensor=2 --set strategy.pipeline=2 --set strategy.micro_batches=2 --set 'strategy.devices=["cpu:0"]'
run gpt_tp_sp $MPI 2 $B train $GPT $G --set strategy.name=mesh --set strategy.tensor=2 --set strategy.sequence_parallel=true --set 'strategy.devices=["cpu:0"]'
run gpt_pp    $MPI 2 $B train $GPT $G --set strategy.name=mesh --set strategy.pipeline=2 --set strategy.micro_batches=2 --set strategy.schedule=1f1b --set 'strategy.devices=["cpu:0"]'
run gpt_zero3 $MPI 2 $B train $GPT $G --set strategy.name=zero --set strategy.stage=3 --set strategy.offload_optimizer=true --set train.recompute=blocks --set 'strategy.devices=["cpu:0"]'
run gpt_bf16  $B train $GPT $G --set train.precision=bf16
