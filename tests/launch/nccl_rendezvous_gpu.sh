#!/usr/bin/env bash
# nccl_rendezvous_gpu.sh — GPU ranks that share no MPI job: 2 ranks started with
# torchrun's variables (RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT),
# meeting at the rendezvous store; resnet20, 4 steps, --check-replicas 1.
#  - NCCL part (2+ GPUs): --backend auto picks nccl (the ncclUniqueId through the
#    rendezvous store), each rank binds the GPU of its LOCAL_RANK, replicas bitwise
#    identical, and the checkpoint is the same run's under mpiexec --backend nccl
#    (relative difference < 1e-5). With 1 GPU this part cannot run (it is about NCCL's id
#    exchange, and NCCL refuses two ranks on one GPU): it says so, and checks instead
#    that auto (NCCL) refuses the two ranks on one GPU, naming the host data plane.
#  - Host-plane part (issue 38; any GPU count): --device cuda --backend gloo: the GPU
#    model with gradients staged through pinned host memory and summed by Gloo (both
#    ranks on the one GPU where there is one), replicas bitwise identical, run.json
#    backend gloo and device cuda:0, and the checkpoint within 1e-5 of the same run under
#    mpiexec --device cuda --backend mpi.
#  - --backend gloo (device auto) stays on the CPU: run.json device cpu.
# SKIP (77) without a CUDA device.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
gpu_plane
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
TRAIN=(train --synthetic --synthetic-samples 512 --model resnet20 --batch-size 32 --max-steps 4 --lr 0.05
  --momentum 0.9 --seed 7 --check-replicas 1 --log-every 1 --no-eval --collective-timeout 60)
LAST=checkpoints/step-00000004.h5
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CLEAN=(env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMIX_NAMESPACE -u PMIX_RANK -u SLURM_PROCID
  -u SLURM_NTASKS -u PMI_RANK -u PMI_FD -u TF_CONFIG)

# run_pair NAME WANT [options]: 2 ranks at a fresh store. WANT ok: both exit 0; refused:
# rank 0 (the store's host) exits 2, rank 1 not 0 (it may lose the store first).
run_pair() {
  local name=$1 want=$2 port st
  shift 2
  port=$(free_port)
  local pids=()
  for r in 0 1; do
    "${CLEAN[@]}" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 300 "$CNNSCALE" "${TRAIN[@]}" --run-dir "$TMP/$name" "$@" >"$TMP/$name.$r.out" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    wait "${pids[$r]}"
    st=$?
    if [ "$want" = ok ]; then expect_eq "$name: rank $r exit status" 0 "$st"
    elif [ "$r" = 0 ]; then expect_eq "$name: rank 0 exit status 2 (a user error)" 2 "$st"
    else expect_ne "$name: rank 1 exit status not 0" 0 "$st"; fi
  done
}

# NCCL part.
if [ "$GPU_PLANE" = nccl ]; then
  run_pair auto ok
  expect_grep "auto: backend nccl" "backend nccl" "$TMP/auto.0.out"
  expect_grep "auto: replicas identical" "replicas identical at all 4 check" "$TMP/auto.0.out"
  timeout 300 $M -n 2 "$CNNSCALE" "${TRAIN[@]}" --backend nccl --run-dir "$TMP/mpi" >"$TMP/mpi.out" 2>&1
  expect_eq "mpiexec --backend nccl exit status" 0 "$?"
  expect_ckpt_close "rendezvous nccl == mpiexec nccl" "$TMP/mpi/$LAST" "$TMP/auto/$LAST"
else
  echo "note: NCCL part not run: NCCL's id exchange through the rendezvous store needs NCCL between two GPUs," \
    "and NCCL refuses two ranks on one GPU (nvidia-smi lists $gpus)"
  run_pair auto1 refused
  cat "$TMP/auto1.0.out" "$TMP/auto1.1.out" >"$TMP/auto1.out"
  expect_grep "1 GPU, auto (NCCL): two ranks on one GPU refused" "would share one GPU" "$TMP/auto1.out"
  expect_grep "1 GPU, auto (NCCL): the refusal names the host data plane" \
    "share the GPUs over a host data plane with --device cuda --backend mpi \(or gloo\)" "$TMP/auto1.out"
fi

# Host-plane part.
run_pair hgloo ok --device cuda --backend gloo
expect_grep "host plane: backend gloo" "2 rank\(s\) on 1 node\(s\), backend gloo" "$TMP/hgloo.0.out"
expect_grep "host plane: rank 0 says the GPU ranks go over it" 'GPU ranks over the host data plane \(gloo\)' \
  "$TMP/hgloo.0.out"
if [ "$gpus" -eq 1 ]; then
  expect_grep "host plane: the two ranks share the GPU" 'up to 2 ranks share one GPU' "$TMP/hgloo.0.out"
fi
expect_grep "host plane: replicas identical" "replicas identical at all 4 check" "$TMP/hgloo.0.out"
expect_grep "host plane: run.json backend gloo" '"backend": *"gloo"' "$TMP/hgloo/run.json"
expect_grep "host plane: run.json device cuda:0" '"device": *"cuda:0' "$TMP/hgloo/run.json"
timeout 300 $M -n 2 "$CNNSCALE" "${TRAIN[@]}" --device cuda --backend mpi --run-dir "$TMP/hmpi" >"$TMP/hmpi.out" 2>&1
expect_eq "mpiexec --device cuda --backend mpi exit status" 0 "$?"
expect_grep "mpiexec host plane: backend mpi" "2 rank\(s\) on 1 node\(s\), backend mpi" "$TMP/hmpi.out"
expect_ckpt_close "rendezvous host plane (gloo) == mpiexec host plane (mpi)" "$TMP/hmpi/$LAST" "$TMP/hgloo/$LAST"

# --backend gloo with the device left to auto: the CPU.
run_pair gloo ok --backend gloo
expect_grep "gloo: backend gloo" "backend gloo" "$TMP/gloo.0.out"
expect_grep "gloo: on the CPU (run.json device cpu)" '"device": *"cpu"' "$TMP/gloo/run.json"
if [ "$_fail" -gt 0 ]; then
  for f in "$TMP"/*.out; do echo "    --- $f"; tail -8 "$f" | sed 's/^/    | /'; done
fi
finish
