#!/usr/bin/env bash
# overlap_stress_gpu.sh — overlap stress on 2 GPU ranks (issue 18; issue 38): resnet20 +
# AdamW, see overlap_lib.sh for the claim (2 ranks: a0 + a1 is commutative, so bucketing
# and timing cannot change a bit) and the three runs: one huge bucket vs ~1 KiB buckets
# with rank 1 (then rank 0) sleeping in every gradient-ready callback, which delays the
# launch of the rest of its backward while sums of earlier buckets are in flight. Which
# plane (tests/lib.sh gpu_plane):
#  - 2+ GPUs: NCCL, the sums on NCCL's stream;
#  - 1 GPU: the host data plane (--device cuda --backend mpi, both ranks on that GPU):
#    each bucket copied to pinned host memory on the copy stream as it is ready, summed
#    by MPI in the reducer's wait, copied back; the claim is the same (MPI's a0 + a1).
# --tf32 off (full fp32). The runs must also be deterministic apart from the bucketing
# (resume_gpu checks two identical straight runs: if that fails, so does this).
# SKIP (77) without a CUDA device. The CPU form is overlap_stress.sh.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
source "$CNNSCALE_SOURCE/tests/train/overlap_lib.sh"
gpu_plane
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
TRAIN_ARGS=(--synthetic "${GPU_BACKEND_ARGS[@]}" --tf32 off --model resnet20 --image-size 32 --channels 3 --classes 10
  --batch-size 32 --seed 5 --optimizer adamw --lr 1e-3 --weight-decay 1e-4 --no-eval --collective-timeout 120)
# Timed algorithm choices could differ between the runs: fix them where the option exists.
if "$CNNSCALE" train --help 2>/dev/null | grep -q -- '--cudnn-benchmark'; then TRAIN_ARGS+=(--cudnn-benchmark off); fi
MIN_BUCKETS=16 STEPS=8 DELAY_MS=3 OVERLAP_LATE0_ENV=""
overlap_main
for f in ref late1 late0; do
  expect_grep "$f: backend $GPU_BACKEND" "2 rank\(s\) on 1 node\(s\), backend $GPU_BACKEND" "$TMP/$f.out"
  [ "$GPU_PLANE" = host ] && expect_grep "$f: the GPU model over the host data plane" \
    'GPU ranks over the host data plane \(mpi\)' "$TMP/$f.out"
  [ "$GPU_PLANE" = host ] && expect_grep "$f: run.json device cuda" '"device": *"cuda:' "$TMP/$f/run.json"
done
finish
