#!/usr/bin/env bash
# bad_label_gpu.sh — a bad label in one rank's data (a real data set, not the
# CNNSCALE_INJECT_ERROR hook) ends a 2-rank GPU job in seconds with its message (issue
# 18, "Tests that must exist"; issue 38): bad_label_lib.sh. The failing rank stops while
# its peer waits in the parameter broadcast. Which plane (tests/lib.sh gpu_plane):
#  - 2+ GPUs: NCCL; the peer waits on the device, so this needs the NCCL abort on the
#    error path (ncclCommAbort, not the collective ncclCommDestroy);
#  - 1 GPU: the host data plane (--device cuda --backend mpi, both ranks on that GPU):
#    the broadcast is an MPI one on pinned host memory, and main()'s MPI_Abort ends the
#    peer, as in the CPU form bad_label.sh.
# SKIP (77) without a CUDA device.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
source "$CNNSCALE_SOURCE/tests/train/bad_label_lib.sh"
gpu_plane
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
TRAIN_ARGS=("${GPU_BACKEND_ARGS[@]}" --model "conv(8,3,1,1) relu flatten linear(10)" --batch-size 16 --log-every 1
  --no-eval --no-tensorboard --collective-timeout 60)
BACKEND_RE="2 rank\\(s\\) on 1 node\\(s\\), backend $GPU_BACKEND" LIMIT_S=45
bad_label_main
[ "$GPU_PLANE" = host ] && expect_grep "host plane: rank 0 says the GPU ranks go over it" \
  'GPU ranks over the host data plane \(mpi\)' "$TMP/ok.out"
finish
