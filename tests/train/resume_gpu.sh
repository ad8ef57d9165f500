#!/usr/bin/env bash
# resume_gpu.sh — bitwise resume on the GPU model with --cudnn-benchmark (issue 18,
# item 6): the convolution algorithms are timed at start-up, and timings vary, so a
# resumed run could pick others than the run it continues; the checkpoint stores them
# (root attribute "tuning") and resume reapplies them. resnet20 (identical convolutions
# share a choice) stopped at step 4 and resumed to step 8 must equal the uninterrupted
# run bitwise, with --cudnn-benchmark on and off; run.json records the option. With 2
# GPUs also 2 ranks (rank 0's choices on both; --check-replicas every step).
# SKIP (77) without a CUDA device.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -lt 1 ]; then
  echo "SKIP: needs a CUDA device (nvidia-smi lists ${gpus:-0})"
  exit 77
fi
DIFF="$CNNSCALE_BUILD/tests/ckpt_diff"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
COMMON="--synthetic --backend nccl --model resnet20 --image-size 16 --channels 3 --classes 10 --lr 0.05 --momentum 0.9
  --seed 5 --no-eval --log-every 1"
ident() { "$DIFF" "$1" "$2" 2>&1 | grep -q 'identical 1'; }

run_pair() {  # run_pair NAME RANKS BATCH EXTRA...: uninterrupted 8 steps; 4 + resume to 8
  local name=$1 n=$2 b=$3
  shift 3
  timeout 300 $M -n "$n" "$CNNSCALE" train $COMMON --batch-size "$b" --max-steps 8 --run-dir "$TMP/$name-ref" "$@" \
    >"$TMP/$name-ref.out" 2>&1
  expect_eq "$name: uninterrupted run exit status" 0 "$?"
  timeout 300 $M -n "$n" "$CNNSCALE" train $COMMON --batch-size "$b" --max-steps 4 --run-dir "$TMP/$name" "$@" \
    >"$TMP/$name-a.out" 2>&1
  expect_eq "$name: first part exit status" 0 "$?"
  timeout 300 $M -n "$n" "$CNNSCALE" train $COMMON --batch-size "$b" --max-steps 8 --run-dir "$TMP/$name" "$@" \
    >"$TMP/$name-b.out" 2>&1
  expect_eq "$name: resumed part exit status" 0 "$?"
  expect_grep "$name: resumed from step 4" "resumed from .*step-00000004.h5 at step 4" "$TMP/$name-b.out"
  # The checkpoint holds the algorithms: one line per distinct convolution and direction.
  h5dump -a /tuning "$TMP/$name/checkpoints/step-00000004.h5" >"$TMP/$name-tuning.txt" 2>&1
  expect_grep "$name: the checkpoint stores the convolution algorithms" "fwd n=$b c=16 h=16 w=16 k=16 kernel=3 pad=1 stride=1 math=tf32 algo=" "$TMP/$name-tuning.txt"
  ident "$TMP/$name-ref/checkpoints/step-00000008.h5" "$TMP/$name/checkpoints/step-00000008.h5"
  expect_eq "$name: stopped at 4 and resumed == uninterrupted, bitwise" 0 "$?"
}

run_pair bench 1 32
expect_grep "run.json: cudnn_benchmark true" '"cudnn_benchmark": *true' "$TMP/bench/run.json"
run_pair heur 1 32 --cudnn-benchmark off
expect_grep "run.json: cudnn_benchmark false" '"cudnn_benchmark": *false' "$TMP/heur/run.json"
if [ "${gpus:-0}" -ge 2 ]; then
  run_pair two 2 16 --check-replicas 1
  expect_grep "2 ranks: replicas identical at every step" 'replicas identical at all 8 check' "$TMP/two-ref.out"
else
  echo "note: one GPU: the 2-rank part (rank 0's choices on every rank) did not run"
fi
finish
