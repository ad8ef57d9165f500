#!/usr/bin/env bash
# loss_options.sh — --loss, --class-weights and --ignore-index through `cnnscale train`:
#  (1) exact data parallelism where the mean's denominator depends on the labels: with
#      class weights and an ignore index, 2 ranks × 32 reach the parameters of 1 rank × 64
#      (rel < 1e-5) and log the same loss (the ranks sum the batch's weights before the
#      step; each rank's own sum would make them differ);
#  (2) the weights change training (the run differs from the plain cross-entropy one) and
#      run.json records the task and the loss;
#  (3) mistakes end with one `cnnscale: error:` line and exit 2 before any step: a loss for
#      float targets on class labels, weights of the wrong count, an ignore index that is not
#      a class, an unknown loss, weights that are not numbers.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
DIFF="$CNNSCALE_BUILD/tests/ckpt_diff"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
STEPS=4
W10=0.5,1,2,1,0.25,3,1,1,0.5,2
common=(--synthetic --model mnist_cnn --max-steps $STEPS --lr 0.05 --momentum 0.9 --seed 7 --log-every 1)
for W in 1 2; do
  timeout 600 $M -n $W "$CNNSCALE" train "${common[@]}" --batch-size $((64 / W)) --class-weights $W10 \
    --ignore-index 3 --run-dir "$TMP/w$W" >"$TMP/w$W.out" 2>&1
  expect_eq "weighted, ignore index: train on $W rank(s) exit status" 0 "$?"
done
"$DIFF" "$TMP/w1/checkpoints/step-0000000$STEPS.h5" "$TMP/w2/checkpoints/step-0000000$STEPS.h5" >"$TMP/d.txt" 2>&1
rel=$(awk '{print $8}' "$TMP/d.txt")
python3 -c "import sys; sys.exit(0 if float('$rel') < 1e-5 else 1)"
expect_eq "1 rank x 64 == 2 ranks x 32 with class weights and an ignore index (rel diff $rel < 1e-5)" 0 "$?"
loss() { grep -o '"loss":[0-9.e+-]*' "$1/metrics.jsonl" | tail -1 | cut -d: -f2; }
python3 -c "import sys; a, b = float('$(loss "$TMP/w1")'), float('$(loss "$TMP/w2")'); sys.exit(0 if abs(a - b) <= 1e-5 * abs(a) else 1)"
expect_eq "the same logged loss on 1 and 2 ranks ($(loss "$TMP/w1") vs $(loss "$TMP/w2"))" 0 "$?"
python3 - "$TMP/w2/run.json" >"$TMP/runjson.txt" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
want = {"kind": "classification", "loss": "cross-entropy (class weights 0.5,1,2,1,0.25,3,1,1,0.5,2; ignore index 3)",
        "outputs": 10}
print("ok run.json's task" if j["task"] == want else f"FAIL run.json's task {j['task']} != {want}")
print("ok run.json's test_metrics empty (synthetic data: no evaluation)" if j["test_metrics"] == {}
      else f"FAIL test_metrics {j['test_metrics']}")
PYEOF
report_lines "$TMP/runjson.txt"

timeout 300 "$CNNSCALE" train "${common[@]}" --batch-size 64 --run-dir "$TMP/plain" >"$TMP/plain.out" 2>&1
expect_eq "plain cross-entropy run exit status" 0 "$?"
"$DIFF" "$TMP/plain/checkpoints/step-0000000$STEPS.h5" "$TMP/w1/checkpoints/step-0000000$STEPS.h5" >"$TMP/p.txt" 2>&1
python3 -c "import sys; sys.exit(0 if float('$(awk '{print $8}' "$TMP/p.txt")') > 1e-3 else 1)"
expect_eq "class weights change the training (rel diff to the plain run $(awk '{print $8}' "$TMP/p.txt") > 1e-3)" 0 "$?"

bad() {  # NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  timeout 120 "$CNNSCALE" train "${common[@]}" --batch-size 8 "$@" >"$TMP/bad.out" 2>&1
  local rc=$?
  expect_eq "$name: exit status 2" 2 "$rc"
  expect_grep "$name: says why" "cnnscale: error: .*$pattern" "$TMP/bad.out"
  expect_eq "$name: one error line" 1 "$(grep -c 'cnnscale: error:' "$TMP/bad.out")"
}
bad "--loss mse on class labels" "--loss mse needs float targets per sample, but this data set holds class labels" --loss mse
bad "--loss bce-with-logits on class labels" "needs float targets" --loss bce-with-logits
bad "unknown loss" "--loss 'hinge' is not a loss cnnscale knows; choose one of cross-entropy, mse" --loss hinge
bad "3 weights for 10 classes" "--class-weights lists 3 weights but the model has 10 classes" --class-weights 1,2,3
bad "weights not numbers" "'x' is not a weight" --class-weights 1,x
bad "ignore index not a class" "--ignore-index 10 is not a class of this data set" --ignore-index 10
finish
