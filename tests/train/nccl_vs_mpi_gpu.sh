#!/usr/bin/env bash
# nccl_vs_mpi_gpu.sh — NCCL on 2 GPUs vs MPI on the CPU (issue 18, "Tests that must
# exist"): resnet20 + AdamW, synthetic 3×32×32 images, 2 ranks × 32 = global batch 64 in
# both runs, --check-replicas 1. `--backend nccl --tf32 off` (the CUDA model, full fp32) must
# follow the CPU (oneDNN) run: the same loss at every step within relative 1e-3 and
# final parameters within ckpt_diff's max relative norm difference 2e-3.
# Why these bounds: step 1 starts from bitwise the same parameters (rank 0's broadcast
# of an initialisation both models draw alike), and one step of the GPU model matches
# the CPU's within rel. 1e-4 per layer (test_cuda_model_gpu); the differences are fp32
# summation order in cuDNN/cuBLAS vs oneDNN. AdamW divides each update by sqrt(v), so
# an element whose gradient is ~0 can take a full ±lr step of the other sign on one
# device: with lr 1e-3 and 8 steps such flips move a conv weight tensor (norm ~5) by
# ~4e-4 each, hence 2e-3 for the parameters (while training moves them by more than
# 10× that: checked) and 1e-3 for the losses.
# SKIP (77) with fewer than 2 GPUs: this test is about NCCL itself, summing between two
# GPUs, and NCCL does not allow two ranks on one GPU. On one GPU the same comparison of
# 2 GPU ranks with the CPU trainer on MPI runs over the host data plane in
# host_plane_gpu.sh (issue 38).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_gpus 2 "needs NCCL between two GPUs (NCCL does not allow two ranks on one GPU; the host-data-plane form of this comparison, which runs on one GPU, is host_plane_gpu)"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
STEPS=8 TOL_LOSS=1e-3 TOL_PARAM=2e-3
ARGS=(--synthetic --model resnet20 --image-size 32 --channels 3 --classes 10 --batch-size 32 --seed 3
  --optimizer adamw --lr 1e-3 --weight-decay 1e-2 --max-steps $STEPS --check-replicas 1 --log-every 1
  --checkpoint-every 2 --keep-checkpoints 100 --no-eval --no-tensorboard --collective-timeout 300)
for b in nccl mpi; do
  extra=(); [ $b = nccl ] && extra=(--tf32 off)
  timeout 600 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --backend $b "${extra[@]}" --run-dir "$TMP/$b" >"$TMP/$b.out" 2>&1
  expect_eq "$b: exit status" 0 "$?"
  expect_grep "$b: 2 ranks, backend $b, global batch 64" "2 rank\(s\) on 1 node\(s\), backend $b, .*= 64 global" "$TMP/$b.out"
  expect_grep "$b: replicas bitwise identical after every step" "replicas identical at all $STEPS check" "$TMP/$b.out"
  metrics_losses "$TMP/$b/metrics.jsonl" >"$TMP/$b.losses"
  expect_eq "$b: $STEPS losses recorded" "$STEPS" "$(wc -l <"$TMP/$b.losses")"
done
python3 - "$TMP/nccl.losses" "$TMP/mpi.losses" "$TOL_LOSS" >"$TMP/cmp.txt" 2>&1 <<'PY'
import sys
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b)) if a and len(a) == len(b) else float("inf")
print(f"worst relative loss difference {worst:.3e} over {len(a)} steps; losses nccl {a} mpi {b}")
sys.exit(0 if worst < tol and len(set(b)) > 1 else 1)
PY
st=$?
expect_eq "the same loss at every step (rel < $TOL_LOSS), and the loss changes ($(cut -c1-60 "$TMP/cmp.txt" | head -n 1))" 0 "$st"
last=$(printf 'checkpoints/step-%08d.h5' $STEPS)
expect_ckpt_close "nccl (GPU) vs mpi (CPU) final parameters" "$TMP/mpi/$last" "$TMP/nccl/$last" "$TOL_PARAM"
echo "ckpt_diff: $CKPT_DIFF_OUT"
moved=$("$CNNSCALE_BUILD/tests/ckpt_diff" "$TMP/mpi/checkpoints/step-00000002.h5" "$TMP/mpi/$last" | awk '{print $8}')
python3 -c "import sys; sys.exit(0 if float('${moved:-0}') > 10 * $TOL_PARAM else 1)"
expect_eq "training moved the parameters by more than 10x the tolerance (step 2 -> $STEPS: ${moved:-?})" 0 "$?"
if [ "$_fail" -gt 0 ]; then cat "$TMP/cmp.txt"; for b in nccl mpi; do echo "    --- $b.out"; sed 's/^/    | /' "$TMP/$b.out" | tail -15; done; fi
finish
