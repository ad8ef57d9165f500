#!/usr/bin/env bash
# DDP invariants, end to end through `cnnscale train`:
#  (1) after every step all ranks hold bitwise-identical parameters (--check-replicas 1);
#  (2) W ranks with per-rank batch B/W reach the parameters of 1 rank with batch B
#      (relative difference < 1e-5 in fp32), W = 2 and 4, mnist_cnn with dropout.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
DIFF="$CNNSCALE_BUILD/tests/ckpt_diff"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
STEPS=6
for W in 1 2 4; do
  timeout 600 $M -n $W "$CNNSCALE" train --synthetic --model mnist_cnn --batch-size $((64 / W)) --max-steps $STEPS \
    --lr 0.05 --momentum 0.9 --weight-decay 1e-4 --seed 7 --check-replicas 1 --log-every 1 --run-dir "$TMP/w$W" \
    >"$TMP/w$W.out" 2>&1
  expect_eq "train on $W rank(s) exit status" 0 "$?"
  expect_file "final checkpoint of $W rank(s)" "$TMP/w$W/checkpoints/step-0000000$STEPS.h5"
done
for W in 2 4; do
  expect_grep "$W ranks: replicas identical after every step" "replicas identical at all $STEPS check" "$TMP/w$W.out"
  "$DIFF" "$TMP/w1/checkpoints/step-0000000$STEPS.h5" "$TMP/w$W/checkpoints/step-0000000$STEPS.h5" >"$TMP/d$W.txt" 2>&1
  expect_eq "ckpt_diff 1 vs $W exit status" 0 "$?"
  rel=$(awk '{print $8}' "$TMP/d$W.txt")
  python3 -c "import sys; sys.exit(0 if float('$rel') < 1e-5 else 1)"
  expect_eq "1 rank x 64 == $W ranks x $((64 / W)) (rel diff $rel < 1e-5)" 0 "$?"
  python3 -c "import sys; sys.exit(0 if float('$(awk '{print $6}' "$TMP/d$W.txt")') > 0 or float('$rel') == 0 else 1)"
done
# The parameters did move (the comparison is not of two untouched initialisations).
timeout 120 "$CNNSCALE" train --synthetic --model mnist_cnn --batch-size 64 --max-steps 1 --lr 0.05 --seed 7 \
  --run-dir "$TMP/one" >"$TMP/one.out" 2>&1
"$DIFF" "$TMP/one/checkpoints/step-00000001.h5" "$TMP/w1/checkpoints/step-0000000$STEPS.h5" >"$TMP/moved.txt" 2>&1
expect_grep "training changes the parameters" 'identical 0' "$TMP/moved.txt"
finish
