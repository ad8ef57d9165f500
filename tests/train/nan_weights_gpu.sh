#!/usr/bin/env bash
# nan_weights_gpu.sh — issue 39 item 1 on the GPU model (backend nccl, 1 rank): a NaN in
# the weights is never trained on and never checkpointed there either.
#  1. A checkpoint with a NaN in /model/conv1.weight is refused on resume, naming the
#     tensor and the file; nothing in the run directory changes.
#  2. The device optimiser does not check what it writes: a NaN parameter (test hook
#     CNNSCALE_INJECT_NAN_UPDATE, on a device model written into the parameter after the
#     update) must reach the next step's loss (cuDNN's ReLU and pooling propagate NaN),
#     stopping the run there, before that step's update and any checkpoint of it; at a
#     checkpoint step, the checkpoint writer refuses it; with --on-nan skip-step, step 4 is
#     skipped and then the run stops, naming the parameter (skipping cannot undo it).
# fp32 and bf16 (the bf16 activation store). SKIP (77) without a CUDA device.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_gpus 1
require_python "h5py, numpy" "python3-h5py python3-numpy"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
for prec in fp32 bf16; do
  ARGS=(--synthetic --backend nccl --model mnist_cnn --batch-size 32 --seed 5 --precision "$prec" --no-tensorboard)
  dir="$TMP/load-$prec"
  timeout 300 $M -n 1 "$CNNSCALE" train "${ARGS[@]}" --max-steps 4 --checkpoint-every 2 --run-dir "$dir" \
    >"$dir.first" 2>&1
  expect_eq "$prec: the first run finishes" 0 "$?"
  expect_grep "$prec: backend nccl" "backend nccl" "$dir.first"
  "$PY" -c "import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'r+') as f: f['/model/conv1.weight'][...] = np.nan" "$dir/checkpoints/step-00000004.h5"
  before=$(cd "$dir" && md5sum checkpoints/* run.json)
  timeout 300 $M -n 1 "$CNNSCALE" train "${ARGS[@]}" --max-steps 8 --checkpoint-every 2 --run-dir "$dir" \
    >"$dir.out" 2>&1
  expect_eq "$prec: resuming from a NaN checkpoint: exit status 2" 2 "$?"
  expect_grep "$prec: the error names the file and the tensor" \
    "^cnnscale: error: checkpoint '[^']*step-00000004.h5' is not finite: /model/conv1.weight: 288 NaN" "$dir.out"
  expect_eq "$prec: the run directory is untouched" "$before" "$(cd "$dir" && md5sum checkpoints/* run.json)"

  dir="$TMP/update-$prec"
  CNNSCALE_INJECT_NAN_UPDATE=3:conv1.weight timeout 300 $M -n 1 -x CNNSCALE_INJECT_NAN_UPDATE "$CNNSCALE" train \
    "${ARGS[@]}" --max-steps 8 --checkpoint-every 2 --run-dir "$dir" >"$dir.out" 2>&1
  expect_eq "$prec: a NaN parameter after step 3: exit status 2" 2 "$?"
  expect_grep "$prec: the hook ran" "CNNSCALE_INJECT_NAN_UPDATE: a NaN written into parameter conv1.weight" "$dir.out"
  expect_grep "$prec: step 4's loss is NaN and stops the run" \
    "^cnnscale: error: the training loss is not finite at step 4 " "$dir.out"
  expect_eq "$prec: only step 2 is checkpointed" "latest step-00000002.h5 " "$(ls "$dir/checkpoints" | tr '\n' ' ')"

  dir="$TMP/skip-$prec"
  CNNSCALE_INJECT_NAN_UPDATE=3:conv1.weight timeout 300 $M -n 1 -x CNNSCALE_INJECT_NAN_UPDATE "$CNNSCALE" train \
    "${ARGS[@]}" --max-steps 8 --checkpoint-every 2 --on-nan skip-step --run-dir "$dir" >"$dir.out" 2>&1
  expect_eq "$prec: skip-step, a NaN parameter after step 3: exit status 2" 2 "$?"
  expect_grep "$prec: skip-step: step 4 is skipped, then the run stops naming the parameter" \
    "^cnnscale: error: step 4 was skipped \(--on-nan skip-step\), but the model still holds a NaN or Inf \(rank 0: /model/conv1.weight: " \
    "$dir.out"

  dir="$TMP/writer-$prec"
  CNNSCALE_INJECT_NAN_UPDATE=4:conv1.weight timeout 300 $M -n 1 -x CNNSCALE_INJECT_NAN_UPDATE "$CNNSCALE" train \
    "${ARGS[@]}" --max-steps 8 --checkpoint-every 2 --run-dir "$dir" >"$dir.out" 2>&1
  expect_eq "$prec: a NaN parameter at a checkpoint step: exit status 2" 2 "$?"
  expect_grep "$prec: the checkpoint writer refuses it" \
    "^cnnscale: error: not writing checkpoint '[^']*step-00000004.h5': /model/conv1.weight: 1 NaN" "$dir.out"
  expect_eq "$prec: step 4 is not checkpointed" "latest step-00000002.h5 " "$(ls "$dir/checkpoints" | tr '\n' ' ')"
done
finish
