#!/usr/bin/env bash
# nan_guard.sh — a NaN inside the network always stops the run (or skips the step, per
# --on-nan) on the CPU, as in PyTorch (issue 28 item 2). oneDNN's ReLU (alone or fused
# into a conv) and max-pool turn a NaN into 0 or step over it, and our dropout used to
# select 0 for a dropped NaN: the loss stayed finite and the run trained on.
# The test hook CNNSCALE_TEST_NAN=STEP:NODE writes a NaN into node NODE's output (-1: the
# input images) at step STEP and says on stderr whether that tensor is "covered": one
# that cannot hold a NaN its inputs did not (a batch-norm's output, whose statistics
# and γ, β are checked; a ReLU's or max-pool's output; an add/flatten/dropout of such
# tensors; docs/checkpoints.md "Non-finite loss: NaN and Inf"). For every node of mnist_cnn (fp32, bf16),
# resnet20 (fp32) and resnet18 (bf16):
#  1. every NaN written into a tensor that is not covered stops the run at that step
#     ("the training loss is not finite at step 1"), and each model has such tensors;
#     a NaN written into a layer's parameter gradients (STEP:gNODE) stops it before the
#     update, naming the layer;
#  2. on 2 ranks, a NaN on rank 1 only stops both ranks at that step (the step
#     agreement), rank 0 naming the step;
#  3. with --on-nan skip-step the step is skipped with a warning (naming the layer on
#     the rank that saw it), its progress line and metrics.jsonl line show no loss, and
#     the run finishes (once, a logged interval of skipped steps read 0/0 as a NaN loss
#     and stopped the run).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"

sweep() {  # MODEL NODES LABEL TRAIN_ARGS...
  local model=$1 nodes=$2 label=$3 k out covered=0 open=0 missed="" ops=""
  shift 3
  for ((k = -1; k < nodes; k++)); do
    out=$(CNNSCALE_TEST_NAN=0:$k timeout 120 "$CNNSCALE" train --synthetic --model "$model" --batch-size 4 \
      --max-steps 2 --seed 3 "$@" 2>&1)
    if ! grep -q "^CNNSCALE_TEST_NAN: a NaN written into" <<<"$out"; then
      missed="$missed $k(no-injection)"
      continue
    fi
    if grep -q "(covered: " <<<"$out"; then
      covered=$((covered + 1))
      ops="$ops $(sed -nE 's/^CNNSCALE_TEST_NAN: .*\(([a-z]+)\) at step .*/\1/p' <<<"$out")"
      continue
    fi
    open=$((open + 1))
    grep -q "^cnnscale: error: the training loss is not finite at step 1 " <<<"$out" || missed="$missed $k"
  done
  expect_eq "$label: every NaN in a tensor that is not covered stops the run at its step ($open such tensors)" "" "$missed"
  expect_ne "$label: some tensors are not covered" 0 "$open"
  expect_eq "$label: only batch-norm, ReLU, max-pool, fused conv+ReLU and add/flatten/dropout of them are covered" "" \
    "$(tr ' ' '\n' <<<"$ops" | grep -vE '^(bn|relu|maxpool|conv|add|flatten|dropout)?$' | sort -u | tr '\n' ' ')"
  echo "$label: $covered covered, $open not"
}
# bf16 sweeps where cnnscale runs bf16; elsewhere (no AVX512-BF16 or AMX) it refuses
# --precision bf16 before a step, so no NaN can be injected: that refusal is checked.
bf16_sweep() {  # as sweep, for --precision bf16
  if bf16_runs native; then
    sweep "$@" --precision bf16
  else
    expect_bf16_refused "$3 (no native bf16 here)" "$TMP/refused-$1" "$CNNSCALE" train --synthetic --model "$1" \
      --batch-size 4 --max-steps 2 --seed 3 "${@:4}" --precision bf16 --run-dir "$TMP/refused-$1"
  fi
}
sweep mnist_cnn 11 "mnist_cnn fp32"
bf16_sweep mnist_cnn 11 "mnist_cnn bf16"
sweep resnet20 73 "resnet20 fp32" --image-size 32 --channels 3
bf16_sweep resnet18 69 "resnet18 bf16" --image-size 32 --channels 3

# 1b. A NaN born in backward (STEP:gNODE: into a layer's parameter gradients after its
#     backward): the step stops before the update, naming the layer.
for k in 0 7 10; do
  CNNSCALE_TEST_NAN=2:g$k timeout 120 "$CNNSCALE" train --synthetic --model mnist_cnn --batch-size 8 --max-steps 4 \
    >"$TMP/grad$k.out" 2>&1
  expect_eq "gradient NaN in layer $k: exit status 2" 2 "$?"
  expect_grep "gradient NaN in layer $k: stops at step 3 naming it" \
    "^cnnscale: error: the training loss is not finite at step 3 .*the parameter gradients of layer $k \((conv|linear)\) \(born in backward\)" \
    "$TMP/grad$k.out"
done

# 2. Two ranks, the NaN on rank 1 only (mnist_cnn's first linear layer, before its ReLU).
cat >"$TMP/rank1_nan.sh" <<SH
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && export CNNSCALE_TEST_NAN=3:7
exec "$CNNSCALE" "\$@"
SH
chmod +x "$TMP/rank1_nan.sh"
timeout 300 $M -n 2 "$TMP/rank1_nan.sh" train --synthetic --model mnist_cnn --batch-size 16 --max-steps 8 \
  --log-every 1 --run-dir "$TMP/stop" >"$TMP/stop.out" 2>&1
expect_eq "2 ranks, NaN on rank 1: exit status 2" 2 "$?"
expect_grep "2 ranks: rank 0 names the step" "^cnnscale: error: the training loss is not finite at step 4 " "$TMP/stop.out"
expect_eq "2 ranks: no step after 3 was logged" "" "$(grep -E 'step [5-8]/8' "$TMP/stop.out")"

# 3. --on-nan skip-step: the step is skipped, the run goes on.
timeout 300 $M -n 2 "$TMP/rank1_nan.sh" train --synthetic --model mnist_cnn --batch-size 16 --max-steps 8 \
  --log-every 1 --on-nan skip-step --run-dir "$TMP/skip" >"$TMP/skip.out" 2>&1
expect_eq "--on-nan skip-step: exit status 0" 0 "$?"
expect_grep "--on-nan skip-step: rank 0 says the step was skipped" "non-finite loss at step 4: update skipped" "$TMP/skip.out"
expect_grep "--on-nan skip-step: the skipped step's line shows no loss" "step 4/8 loss - \(skipped\)" "$TMP/skip.out"
expect_grep "--on-nan skip-step: the run goes on to the end" "step 8/8 loss [0-9]" "$TMP/skip.out"
expect_grep "--on-nan skip-step: run.json counts it" '"skipped_steps": 1' "$TMP/skip/run.json"
expect_grep "--on-nan skip-step: metrics.jsonl marks the step" '"loss":null.*"skipped":true' "$TMP/skip/metrics.jsonl"
# One rank: the warning names where the NaN was.
CNNSCALE_TEST_NAN=3:7 timeout 300 "$CNNSCALE" train --synthetic --model mnist_cnn --batch-size 16 --max-steps 6 \
  --on-nan skip-step >"$TMP/skip1.out" 2>&1
expect_eq "1 rank, --on-nan skip-step: exit status 0" 0 "$?"
expect_grep "1 rank: the warning names the layer" \
  "non-finite loss at step 4 \(a NaN in the input of layer 8 \(relu\), the output of layer 7 \(linear\)\): update skipped" \
  "$TMP/skip1.out"
finish
