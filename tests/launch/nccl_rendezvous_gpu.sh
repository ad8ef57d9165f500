#!/usr/bin/env bash
# nccl_rendezvous_gpu.sh — NCCL for ranks that share no MPI job: 2 ranks started with
# torchrun's variables (RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT)
# on 2 GPUs: --backend auto picks nccl (the ncclUniqueId through the rendezvous store),
# each rank binds the GPU of its LOCAL_RANK, resnet20 trains with bitwise-identical
# replicas and reaches the checkpoint of the same run under mpiexec --backend nccl
# (relative difference < 1e-5); --backend gloo there stays on the CPU.
# SKIP (77) with fewer than 2 GPUs: NCCL refuses two ranks on one GPU.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_gpus 2 "NCCL does not allow two ranks on one GPU"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
TRAIN=(train --synthetic --synthetic-samples 512 --model resnet20 --batch-size 32 --max-steps 4 --lr 0.05
  --momentum 0.9 --seed 7 --check-replicas 1 --log-every 1 --no-eval --collective-timeout 60)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CLEAN=(env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMIX_NAMESPACE -u PMIX_RANK -u SLURM_PROCID
  -u SLURM_NTASKS -u PMI_RANK -u PMI_FD -u TF_CONFIG)

run_pair() {  # run_pair NAME [options]: 2 ranks at a fresh store
  local name=$1 port
  shift
  port=$(free_port)
  local pids=()
  for r in 0 1; do
    "${CLEAN[@]}" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 300 "$CNNSCALE" "${TRAIN[@]}" --run-dir "$TMP/$name" "$@" >"$TMP/$name.$r.out" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    wait "${pids[$r]}"
    expect_eq "$name: rank $r exit status" 0 "$?"
  done
}

run_pair auto
expect_grep "auto: backend nccl" "backend nccl" "$TMP/auto.0.out"
expect_grep "auto: replicas identical" "replicas identical at all 4 check" "$TMP/auto.0.out"
run_pair gloo --backend gloo
expect_grep "gloo: backend gloo on the CPU" "backend gloo" "$TMP/gloo.0.out"
timeout 300 $M -n 2 "$CNNSCALE" "${TRAIN[@]}" --backend nccl --run-dir "$TMP/mpi" >"$TMP/mpi.out" 2>&1
expect_eq "mpiexec --backend nccl exit status" 0 "$?"
expect_ckpt_close "rendezvous nccl == mpiexec nccl" "$TMP/mpi/checkpoints/step-00000004.h5" \
  "$TMP/auto/checkpoints/step-00000004.h5"
finish
