#!/usr/bin/env bash
# A bad label in one rank's data (a real data set, not the CNNSCALE_INJECT_ERROR hook)
# ends a 2-rank CPU job (MPI backend) in seconds with its message: bad_label_lib.sh.
# The GPU form is bad_label_gpu.sh.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
source "$CNNSCALE_SOURCE/tests/train/bad_label_lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
TRAIN_ARGS=(--backend mpi --model "conv(8,3,1,1) relu flatten linear(10)" --batch-size 16 --log-every 1 --no-eval
  --no-tensorboard --collective-timeout 60)
BACKEND_RE='2 rank\(s\) on 1 node\(s\), backend mpi' LIMIT_S=30
bad_label_main
finish
