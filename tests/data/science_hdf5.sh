#!/usr/bin/env bash
# science_hdf5.sh — a user's HDF5 file of float fields with float regression targets
# (tests/data/make_science.py: N×2×16×16 float32 fields a·P_a + b·P_b + noise, targets (a, b))
# through prep and train (issue 50):
#  - prep keeps the values as they are: float32, float16 and int16 shards hold the input's own
#    values, bit for bit; dataset.json records dtype, task "regression", targets 2 and the
#    train split's mean/std per channel as numpy computes them (of log1p(x) with
#    --transform log1p);
#  - the reader feeds (t(x) − mean) / std: one step of `flatten linear(2)` with the whole train
#    split as the batch, then the epoch's evaluation; numpy recomputes the test split's MSE,
#    RMSE and MAE (overall and per target) from the step's checkpoint in float64 (rel 1e-5), for
#    each sample type and the transform;
#  - 1 rank × 32 and 2 ranks × 16 train the same (checkpoints rel < 1e-5, test metrics rel 1e-5),
#    and the test RMSE falls below 0.06 in 4 epochs (targets' std 0.58; ~0.03 here);
#  - run.json: task, loss "mse over 2 targets", test_metrics, test_accuracy null;
#    metrics.jsonl: test_rmse per epoch; `cnnscale report` (Samples/s, each run's test RMSE) and
#    `cnnscale watch` (the run's and each evaluation's RMSE) show it;
#  - multi-label (--task multilabel: 3 labels of 0/1 per sample): bce-with-logits by default, per-label
#    accuracy above 0.85 in 3 epochs;
#  - one `cnnscale: error:` each for: float64 samples, multilabel targets that are not 0/1, targets of the wrong count (also
#    for volumes, N×C×D×H×W: tests/data/volumes_hdf5.sh trains them), --transform log1p on uint8 images, --test-labels with --targets,
#    --classes with --targets, cross-entropy on float targets, --augment on float samples, a
#    model with 3 outputs for 2 targets.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_python "numpy, h5py" "python3-numpy python3-h5py"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
DIFF="$CNNSCALE_BUILD/tests/ckpt_diff"
H5="$TMP/science.h5"
"$PY" "$CNNSCALE_SOURCE/tests/data/make_science.py" "$H5" >"$TMP/make.log" 2>&1
expect_eq "make_science.py" 0 "$?"

prep() {  # prep NAME ARGS...
  local name=$1
  shift
  "$CNNSCALE" prep --format hdf5 --input "$H5" --output "$TMP/$name" --shards 2 --test-shards 1 "$@" \
    >"$TMP/prep-$name.log" 2>&1
}
prep f32 --images /x_train --targets /y_train --test-images /x_test --test-targets /y_test
expect_eq "prep float32 fields with float targets" 0 "$?"
expect_grep "prep says targets" "512 train \\+ 128 test samples, 2 targets" "$TMP/prep-f32.log"
prep f16 --images /x16_train --targets /y_train --test-images /x16_test --test-targets /y_test
expect_eq "prep float16 fields" 0 "$?"
prep i16 --images /xi_train --targets /y_train --test-images /xi_test --test-targets /y_test
expect_eq "prep int16 fields" 0 "$?"
prep log --images /counts_train --targets /y_train --test-images /counts_test --test-targets /y_test --transform log1p
expect_eq "prep float32 counts with --transform log1p" 0 "$?"
# prep --verify reads each sample as stored (it read them as uint8, converted by HDF5, and
# refused every float16/float32/int16 data set as a list mismatch: found by fuzz_shard).
for d in f32 f16 i16; do
  "$CNNSCALE" prep --verify "$TMP/$d" >"$TMP/verify-$d.log" 2>&1
  expect_eq "$d: prep --verify passes" 0 "$?"
  expect_grep "$d: ... all checksums match" 'complete: 512 train \+ 128 test samples in 2 \+ 1 shards, .*all checksums match' \
    "$TMP/verify-$d.log"
done

# One step over the whole train split, then the epoch's evaluation, for each kind.
for d in f32 f16 i16 log; do
  "$CNNSCALE" train --data "$TMP/$d" --model "flatten linear(2)" --batch-size 512 --epochs 1 --lr 0.01 --seed 3 \
    --run-dir "$TMP/one-$d" >"$TMP/one-$d.log" 2>&1
  expect_eq "$d: one step and the evaluation" 0 "$?"
done

"$PY" - "$H5" "$TMP" >"$TMP/check.txt" 2>&1 <<'PYEOF'
import json
import sys

import h5py
import numpy as np

h5, tmp = sys.argv[1:3]
f = h5py.File(h5, "r")


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


for d, name, dtype, transform in (("f32", "x", "float32", None), ("f16", "x16", "float16", None),
                                  ("i16", "xi", "int16", None), ("log", "counts", "float32", "log1p")):
    j = json.load(open(f"{tmp}/{d}/dataset.json"))
    x = f[name + "_train"][...]
    report(f"{d}: dataset.json dtype {j['dtype']}, task {j.get('task')}, targets {j.get('targets')}, no classes",
           j["dtype"] == dtype and j.get("task") == "regression" and j.get("targets") == 2 and "classes" not in j)
    v = x.astype(np.float32)
    if transform:
        v = np.log1p(v)
    v = v.astype(np.float64)
    mean, std = v.mean(axis=(0, 2, 3)), v.std(axis=(0, 2, 3))
    got_m, got_s = np.array(j["normalization"]["mean"]), np.array(j["normalization"]["std"])
    err = max(np.abs(got_m - mean).max() / np.abs(mean).max(), np.abs(got_s - std).max() / std.max())
    report(f"{d}: per-channel mean and std as numpy's{' of log1p(x)' if transform else ''} (rel {err:.1e} <= 1e-9)",
           err <= 1e-9)
    # The shards hold the input's values, bit for bit, in its order.
    stored = np.concatenate([h5py.File(f"{tmp}/{d}/train-0000{i}-of-00002.h5", "r")["images"][...] for i in (0, 1)])
    report(f"{d}: the shards hold the input's {x.dtype} values bit for bit",
           stored.dtype == x.dtype and stored.tobytes() == x.tobytes())
    # What the reader fed: the evaluation of the 1-step checkpoint, recomputed.
    ck = h5py.File(f"{tmp}/one-{d}/checkpoints/step-00000001.h5", "r")["model"]
    W, b = ck["1.weight"][...].astype(np.float64), ck["1.bias"][...].astype(np.float64)  # layer 1: flatten is 0
    xt = f[name + "_test"][...].astype(np.float32)
    if transform:
        xt = np.log1p(xt)
    xn = ((xt - got_m.astype(np.float32)[None, :, None, None]) / got_s.astype(np.float32)[None, :, None, None])
    z = xn.reshape(len(xn), -1).astype(np.float64) @ W.T + b
    dlt = z - f["y_test"][...].astype(np.float64)
    want = {"loss": (dlt ** 2).mean(), "rmse": np.sqrt((dlt ** 2).mean()), "mae": np.abs(dlt).mean()}
    for k in (0, 1):
        want[f"rmse_{k}"] = np.sqrt((dlt[:, k] ** 2).mean())
        want[f"mae_{k}"] = np.abs(dlt[:, k]).mean()
    run = json.load(open(f"{tmp}/one-{d}/run.json"))
    got = run["test_metrics"]
    err = max(abs(got[k] - v) / abs(v) for k, v in want.items())
    report(f"{d}: test MSE, RMSE and MAE (overall, per target) equal numpy's from the checkpoint (rel {err:.1e} <= 1e-5)",
           err <= 1e-5 and set(got) == set(want), str(sorted(got)))
PYEOF
expect_eq "the numpy check ran to its end" 0 "$?"
report_lines "$TMP/check.txt"

# 1 rank and 2 ranks: the same training, and it learns.
SPEC="conv(8,3,1,1) relu flatten linear(2)"
for W in 1 2; do
  timeout 600 $M -n $W "$CNNSCALE" train --data "$TMP/f32" --model "$SPEC" --batch-size $((32 / W)) --epochs 4 \
    --lr 0.01 --momentum 0.9 --seed 7 --run-dir "$TMP/w$W" >"$TMP/w$W.log" 2>&1
  expect_eq "4 epochs on $W rank(s)" 0 "$?"
done
"$DIFF" "$TMP/w1/checkpoints/step-00000064.h5" "$TMP/w2/checkpoints/step-00000064.h5" >"$TMP/d.txt" 2>&1
rel=$(awk '{print $8}' "$TMP/d.txt")
"$PY" -c "import sys; sys.exit(0 if float('$rel') < 1e-5 else 1)"
expect_eq "1 rank x 32 == 2 ranks x 16 (rel diff $rel < 1e-5)" 0 "$?"
"$PY" - "$TMP" >"$TMP/runs.txt" 2>&1 <<'PYEOF'
import json
import sys

tmp = sys.argv[1]
r1, r2 = (json.load(open(f"{tmp}/w{w}/run.json")) for w in (1, 2))


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


m1, m2 = r1["test_metrics"], r2["test_metrics"]
err = max(abs(m1[k] - m2[k]) / abs(m1[k]) for k in m1)
report(f"the same test metrics on 1 and 2 ranks (rel {err:.1e} <= 1e-5)", err <= 1e-5 and set(m1) == set(m2))
report(f"test RMSE {m1['rmse']:.4f} < 0.06 after 4 epochs (targets' std 0.58)", m1["rmse"] < 0.06)
report("run.json: task regression, mse over 2 targets, 2 outputs",
       r2["task"] == {"kind": "regression", "loss": "mse over 2 targets", "outputs": 2}, str(r2["task"]))
report("run.json: test_accuracy null for a regression", r2["test_accuracy"] is None)
evals = [json.loads(line) for line in open(f"{tmp}/w2/metrics.jsonl") if '"eval"' in line]
report(f"metrics.jsonl: test_rmse at each of 4 epochs, falling ({[round(e['test_rmse'], 4) for e in evals]})",
       len(evals) == 4 and evals[-1]["test_rmse"] < evals[0]["test_rmse"] and "test_accuracy" not in evals[0])
PYEOF
expect_eq "the run.json check ran to its end" 0 "$?"
report_lines "$TMP/runs.txt"
expect_grep "the epoch line says rmse" "epoch 4 test rmse 0\\.0[0-9]+ mae" "$TMP/w1.log"
# The report and watch show the regression's metric and count samples, not images.
"$CNNSCALE" report "$TMP/w1" "$TMP/w2" --output "$TMP/report" >"$TMP/report.log" 2>&1
expect_eq "cnnscale report of the two runs" 0 "$?"
expect_grep "report: samples/s, not images/s" "\\| Samples/s \\|" "$TMP/report/report.md"
expect_grep "report: each run's test RMSE" "\\| rmse 0\\.0[0-9]+ \\|" "$TMP/report/report.md"
"$CNNSCALE" watch "$TMP/w2" --once >"$TMP/watch.txt" 2>&1
expect_grep "watch: the finished run's test RMSE" "test rmse 0\\.0[0-9]+" "$TMP/watch.txt"
expect_grep "watch: the evaluations' RMSE and MAE" "eval epoch 4 \\(step 64\\): test rmse 0\\.0[0-9]+, mae 0\\.0[0-9]+, loss" "$TMP/watch.txt"

# Multi-label: 3 labels of 0/1 per sample; bce-with-logits by default, accuracy per label.
prep ml --images /x_train --targets /m_train --test-images /x_test --test-targets /m_test --task multilabel
expect_eq "prep --task multilabel" 0 "$?"
expect_grep "dataset.json: task multilabel" '"task": "multilabel"' "$TMP/ml/dataset.json"
"$CNNSCALE" train --data "$TMP/ml" --model "conv(8,3,1,1) relu flatten linear(3)" --batch-size 32 --epochs 3 --lr 0.01 --momentum 0.9 --seed 7 \
  --run-dir "$TMP/mlrun" >"$TMP/mlrun.log" 2>&1
expect_eq "train the multilabel data set" 0 "$?"
"$PY" - "$TMP/mlrun/run.json" >"$TMP/ml.txt" 2>&1 <<'PYEOF'
import json
import sys

r = json.load(open(sys.argv[1]))
ok = r["task"] == {"kind": "multilabel", "loss": "bce-with-logits over 3 targets", "outputs": 3}
print(("ok" if ok else "FAIL") + f" run.json task {r['task']}")
acc = r["test_metrics"].get("accuracy", 0)
print(("ok" if acc > 0.85 and r["test_accuracy"] == acc else "FAIL") +
      f" per-label test accuracy {acc:.3f} > 0.85 after 3 epochs, also run.json's test_accuracy")
PYEOF
expect_eq "the multilabel check ran" 0 "$?"
report_lines "$TMP/ml.txt"

# Mistakes: one clear error each.
P=("$CNNSCALE" prep --format hdf5 --input "$H5" --output "$TMP/bad")
expect_refused "float64 samples" "holds float values of 8 bytes; prep takes uint8, int16, float16 and float32" \
  "${P[@]}" --images /x64 --targets /y_train
expect_refused "targets of the wrong count" "must hold N or N×K targets for the 512 samples" \
  "${P[@]}" --images /x_train --targets /y_bad
expect_refused "volumes with another count of targets" "must hold N or N×K targets for the 4 samples" \
  "${P[@]}" --images /vol --targets /y_train
expect_refused "log1p of uint8 images" "--transform log1p applies to int16, float16 and float32 samples" \
  "${P[@]}" --images /u8 --targets /y_train --transform log1p
expect_refused "--test-labels with --targets" "--test-labels goes with --labels; with --targets give --test-targets" \
  "${P[@]}" --images /x_train --targets /y_train --test-images /x_test --test-labels /y_test
expect_refused "--task multilabel of other values" "is 0\\.[0-9]+; a multilabel data set's targets are 0 or 1" \
  "${P[@]}" --images /x_train --targets /y_train --task multilabel
expect_refused "--classes with --targets" "--classes goes with class labels" \
  "${P[@]}" --images /x_train --targets /y_train --classes 4
T=("$CNNSCALE" train --data "$TMP/f32" --batch-size 16 --max-steps 1 --model "$SPEC")
expect_refused "cross-entropy on float targets" "--loss cross-entropy needs class labels, but this data set holds 2 float targets" \
  "${T[@]}" --loss cross-entropy
expect_refused "--augment on float samples" "--augment hflip works on uint8 images; .* holds float32 samples" \
  "${T[@]}" --augment hflip
expect_refused "3 outputs for 2 targets" "the model ends in 3 outputs but the data needs 2 per sample" \
  "$CNNSCALE" train --data "$TMP/f32" --batch-size 16 --max-steps 1 --model "flatten linear(3)"
finish
