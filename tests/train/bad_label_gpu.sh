#!/usr/bin/env bash
# A bad label in one rank's data (a real data set, not the CNNSCALE_INJECT_ERROR hook)
# ends a 2-GPU NCCL job in seconds with its message (issue 18, "Tests that must
# exist"): bad_label_lib.sh. The failing rank stops while its peer waits in the NCCL
# parameter broadcast, so this needs the NCCL abort on the error path (ncclCommAbort,
# not the collective ncclCommDestroy). SKIP (77) with fewer than 2 GPUs: NCCL refuses
# two ranks on one GPU. The CPU form is bad_label.sh.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
source "$CNNSCALE_SOURCE/tests/train/bad_label_lib.sh"
require_gpus 2 "NCCL does not allow two ranks on one GPU"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
TRAIN_ARGS=(--backend nccl --model "conv(8,3,1,1) relu flatten linear(10)" --batch-size 16 --log-every 1 --no-eval
  --no-tensorboard --collective-timeout 60)
BACKEND_RE='2 rank\(s\) on 1 node\(s\), backend nccl' LIMIT_S=45
bad_label_main
finish
