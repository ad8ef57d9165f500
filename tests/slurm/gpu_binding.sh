#!/usr/bin/env bash
# tests/slurm/gpu_binding.sh — GPU binding under real Slurm GPU allocations (issue 18,
# item 2): the local cluster declares this machine's GPUs as gres gpu
# (CNNSCALE_SLURM_GPUS=auto, scripts/local-slurm-cluster.sh), and on one node with n
# tasks (n = the GPUs, at most 8):
#  - srun --gpus-per-task=1: Slurm gives each task its own single-GPU
#    CUDA_VISIBLE_DEVICES, so every task sees "ordinal 0" — the case that comparing
#    CUDA_VISIBLE_DEVICES strings got wrong; checked: the tasks' values are distinct
#    single devices;
#  - srun --gres=gpu:n: every task sees all n GPUs (the same list) and cnnscale picks
#    one per local rank;
# in both, `cnnscale env` (backend auto) must give every rank a GPU (device_id=GPU-...,
# the UUID) and n distinct UUIDs, with backend nccl (two ranks on one GPU are an error).
# SKIP (77) with fewer than 2 GPUs (distinct UUIDs need two), without root (the local
# cluster), or when a cluster without gres gpu is already up.
# Labels slurm and gpu.
set -u
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -lt 2 ]; then
  echo "SKIP: needs 2 or more CUDA devices (nvidia-smi lists ${gpus:-0}) to see distinct UUIDs per rank"
  exit 77
fi
export CNNSCALE_SLURM_GPUS=auto
source "$CNNSCALE_SOURCE/tests/slurm/cluster_lib.sh"
cluster_up
declared=$(scontrol show node cn1 2>/dev/null | tr ' ' '\n' | sed -n 's/^Gres=gpu:\([0-9]*\).*/\1/p' | head -n 1)
if [ -z "$declared" ] || [ "$declared" -lt 2 ]; then
  echo "SKIP: the local cluster that is up declares gres gpu:${declared:-none} on cn1; run"
  echo "      '$CLUSTER down' so that this test brings it up with CNNSCALE_SLURM_GPUS=auto"
  exit 77
fi
n=$declared; [ "$n" -gt 8 ] && n=8
echo "cn1 declares gpu:$declared; $n tasks"
cd "$WORK" || exit 1

check_env() {  # NAME FILE: n ranks, each on a GPU, n distinct UUIDs, backend nccl
  local name=$1 f=$2 r
  expect_eq "$name: $n ranks reported" "$n" "$(grep -c '^launcher=srun+pmix ' "$f")"
  for ((r = 0; r < n; r++)); do
    expect_grep "$name: rank $r bound to a GPU UUID, backend nccl" \
      "^launcher=srun\+pmix rank=$r size=$n .* backend=nccl device_id=GPU-[0-9a-fA-F-]+" "$f"
  done
  expect_eq "$name: $n distinct GPU UUIDs" "$n" \
    "$(grep -o 'device_id=GPU-[0-9a-fA-F-]*' "$f" | sort -u | wc -l)"
}

# 1. --gpus-per-task=1: one device per task.
timeout 120 srun -N1 -n "$n" --gpus-per-task=1 bash -c 'echo "$SLURM_PROCID ${CUDA_VISIBLE_DEVICES:-unset}"' \
  >"$TMP/gpt.cvd" 2>&1
expect_eq "--gpus-per-task=1: every task has one device of its own (CUDA_VISIBLE_DEVICES: $(awk '{print $2}' "$TMP/gpt.cvd" | paste -sd' '))" \
  "$n" "$(awk '$2 ~ /^[0-9]+$/ {print $2}' "$TMP/gpt.cvd" | sort -u | wc -l)"
timeout 180 srun -N1 -n "$n" --gpus-per-task=1 --mpi=pmix "$CNNSCALE" env >"$TMP/gpt.env" 2>"$TMP/gpt.err"
expect_eq "--gpus-per-task=1: cnnscale env exit status" 0 "$?"
check_env "--gpus-per-task=1" "$TMP/gpt.env"

# 2. --gres=gpu:n: all node GPUs visible to every task, one chosen per local rank.
timeout 120 srun -N1 -n "$n" --gres=gpu:"$n" bash -c 'echo "$SLURM_PROCID ${CUDA_VISIBLE_DEVICES:-unset}"' \
  >"$TMP/gres.cvd" 2>&1
expect_eq "--gres=gpu:$n: every task sees the same $n devices" \
  "1 $n" "$(awk '{print $2}' "$TMP/gres.cvd" | sort -u | awk -F, '{c = NF} END {print NR, c}')"
timeout 180 srun -N1 -n "$n" --gres=gpu:"$n" --mpi=pmix "$CNNSCALE" env >"$TMP/gres.env" 2>"$TMP/gres.err"
expect_eq "--gres=gpu:$n: cnnscale env exit status" 0 "$?"
check_env "--gres=gpu:$n" "$TMP/gres.env"

if [ "$_fail" -gt 0 ]; then
  for f in gpt.cvd gpt.env gpt.err gres.cvd gres.env gres.err; do show_out "$TMP/$f"; done
fi
finish
