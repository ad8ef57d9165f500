#!/usr/bin/env bash
# Overlap stress on the CPU (issue 18's "delayed backward + many small buckets equals the
# synchronous result bitwise"), 2 ranks, MPI backend: see overlap_lib.sh for the claim
# and the three runs. Rank 1 late with the node-shared-memory sums (the default on one
# node), rank 0 late with MPI allreduces (CNNSCALE_SHM_ALLREDUCE=0). The GPU form is
# overlap_stress_gpu.sh.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
source "$CNNSCALE_SOURCE/tests/train/overlap_lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
TRAIN_ARGS=(--synthetic --backend mpi --image-size 16 --channels 3 --classes 10 --batch-size 16 --seed 5
  --model "conv(8,3,1,1) bn relu conv(16,3,1,1) bn relu maxpool(2) conv(16,3,1,1) relu flatten linear(64) relu dropout(0.3) linear(10)"
  --optimizer sgd --lr 0.05 --momentum 0.9 --weight-decay 1e-4 --no-eval)
MIN_BUCKETS=5 STEPS=6 DELAY_MS=5 OVERLAP_LATE0_ENV="CNNSCALE_SHM_ALLREDUCE=0"
overlap_main
finish
