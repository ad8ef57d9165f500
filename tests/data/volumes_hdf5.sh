#!/usr/bin/env bash
# volumes_hdf5.sh — a user's HDF5 file of float volumes (N×C×D×H×W) with float regression
# targets, CosmoFlow's kind, through prep, train and the report (issue 50). The data are
# Gaussian random fields whose generating parameters are the targets (tests/data/make_grf.py):
#  - prep keeps the volumes as they are: the shards' /images are N×4×32×32×32 (5-D) holding the
#    input's float32 (and float16) values bit for bit; dataset.json records sample_shape
#    [C, D, H, W], layout NCDHW, task regression, 4 targets, and per-channel mean and std over
#    D·H·W as numpy computes them (of log1p(x) for count volumes under --transform log1p);
#  - the reader feeds (t(x) − mean) / std in C, D, H, W order: one step of `flatten linear(4)`
#    over the whole train split, then the evaluation, recomputed by numpy from the checkpoint
#    (MSE, RMSE, MAE overall and per target, rel 1e-5), for float32, float16 and log1p counts;
#  - 1 rank × 16 and 2 ranks × 8 train cosmoflow(8,2) alike (8 AdamW steps with dropout:
#    checkpoints rel < 1e-5), and in 4 epochs of 1,024 volumes (AdamW, cosine) the test RMSE
#    falls below 0.36 on both (predicting the mean: 0.58; measured 0.29 after 6 epochs), within
#    0.03 of each other;
#  - run.json, metrics.jsonl, `cnnscale report` (Samples/s, each run's test RMSE) and
#    `cnnscale watch` show it;
#  - a class label per volume trains a 3-D classifier (with BatchNorm3d); a single target a model
#    of one output;
#  - --augment flip3d,transpose3d with a label map per volume: the map moves with its volume
#    (a 1×1×1 conv trains as without the moves), 1 rank == 2 ranks, data-bench counts volumes;
#  - one `cnnscale: error:` each for: an image --augment step on volumes, a 2-D built-in model
#    on volumes, cosmoflow on images, cosmoflow on volumes smaller than 32 a side, a layer
#    without a 3-D form in a spec (upsample), transpose3d on images.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_python "numpy, h5py" "python3-numpy python3-h5py"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
GRF="$CNNSCALE_SOURCE/tests/data/make_grf.py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# The learnable set (1,024 + 256 volumes of 4×32³) and three small ones for the exact checks.
"$PY" "$GRF" "$TMP/grf.h5" --n 1024 --test 256 --size 32 --seed 11 >"$TMP/grf.log" 2>&1 &&
  "$PY" "$GRF" "$TMP/small.h5" --n 48 --test 16 --size 16 --seed 3 >>"$TMP/grf.log" 2>&1 &&
  "$PY" "$GRF" "$TMP/half.h5" --n 48 --test 16 --size 16 --seed 4 --dtype float16 >>"$TMP/grf.log" 2>&1 &&
  "$PY" "$GRF" "$TMP/counts.h5" --n 48 --test 16 --size 16 --seed 5 --counts >>"$TMP/grf.log" 2>&1
expect_eq "make_grf.py: the volumes" 0 "$?"
# Beside them, for the refusals: images (a volume's first slice) and a label map per volume.
"$PY" - "$TMP/small.h5" "$TMP/other.h5" >"$TMP/other.log" 2>&1 <<'PYEOF'
import sys

import h5py
import numpy as np

src, out = sys.argv[1:3]
f = h5py.File(src, "r")
with h5py.File(out, "w") as g:
    g["img"] = f["x"][:, :, 0]
    g["y"] = f["y"][...]
    g["x"] = f["x"][...]
    g["maps"] = (f["x"][:, 0] > 0).astype(np.int32)
    g["y1"] = f["y"][:, :1]                              # one target per volume
    g["cls"] = (f["y"][:, 0] > 0).astype(np.int32)       # a class per volume: amplitude above the middle
PYEOF
expect_eq "the images and label maps beside the volumes" 0 "$?"

prep() {  # prep NAME INPUT ARGS...
  local name=$1 input=$2
  shift 2
  "$CNNSCALE" prep --format hdf5 --input "$input" --output "$TMP/$name" --shards 2 --test-shards 1 --images /x \
    --targets /y --test-images /x_test --test-targets /y_test "$@" >"$TMP/prep-$name.log" 2>&1
}
prep vol "$TMP/grf.h5"
expect_eq "prep float32 volumes with float targets" 0 "$?"
expect_grep "prep says targets" "1024 train \\+ 256 test samples, 4 targets" "$TMP/prep-vol.log"
prep f32 "$TMP/small.h5"
expect_eq "prep small float32 volumes" 0 "$?"
prep f16 "$TMP/half.h5"
expect_eq "prep float16 volumes" 0 "$?"
prep log "$TMP/counts.h5" --transform log1p
expect_eq "prep count volumes with --transform log1p" 0 "$?"

# One step over the whole train split, then the epoch's evaluation, for each kind.
for d in f32 f16 log; do
  "$CNNSCALE" train --data "$TMP/$d" --model "flatten linear(4)" --batch-size 48 --epochs 1 --lr 0.01 --seed 3 \
    --run-dir "$TMP/one-$d" >"$TMP/one-$d.log" 2>&1
  expect_eq "$d: one step and the evaluation" 0 "$?"
done

"$PY" - "$TMP" >"$TMP/check.txt" 2>&1 <<'PYEOF'
import json
import sys

import h5py
import numpy as np

tmp = sys.argv[1]


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


for d, src, dtype, transform in (("vol", "grf", "float32", None), ("f32", "small", "float32", None),
                                 ("f16", "half", "float16", None), ("log", "counts", "float32", "log1p")):
    f = h5py.File(f"{tmp}/{src}.h5", "r")
    j = json.load(open(f"{tmp}/{d}/dataset.json"))
    x = f["x"][...]
    shape = list(x.shape[1:])
    report(f"{d}: dataset.json sample_shape {j['sample_shape']} (C, D, H, W), layout {j.get('layout')}, dtype "
           f"{j['dtype']}, task {j.get('task')}, {j.get('targets')} targets",
           j["sample_shape"] == shape and j.get("layout") == "NCDHW" and j["dtype"] == dtype and
           j.get("task") == "regression" and j.get("targets") == 4 and "classes" not in j)
    v = x.astype(np.float32)
    if transform:
        v = np.log1p(v)
    v = v.astype(np.float64)
    mean, std = v.mean(axis=(0, 2, 3, 4)), v.std(axis=(0, 2, 3, 4))
    got_m, got_s = np.array(j["normalization"]["mean"]), np.array(j["normalization"]["std"])
    err = max(np.abs(got_m - mean).max() / np.abs(mean).max(), np.abs(got_s - std).max() / std.max())
    report(f"{d}: per-channel mean and std over D·H·W as numpy's{' of log1p(x)' if transform else ''} "
           f"(rel {err:.1e} <= 1e-9)", err <= 1e-9)
    shards = [h5py.File(f"{tmp}/{d}/train-0000{i}-of-00002.h5", "r")["images"] for i in (0, 1)]
    stored = np.concatenate([s[...] for s in shards])
    report(f"{d}: the shards' /images are N×{'×'.join(map(str, shape))} (5-D) holding the input's {x.dtype} values "
           "bit for bit", all(s.ndim == 5 for s in shards) and stored.dtype == x.dtype and
           stored.tobytes() == x.tobytes())
    if d == "vol":
        continue
    # What the reader fed: the evaluation of the 1-step checkpoint, recomputed.
    ck = h5py.File(f"{tmp}/one-{d}/checkpoints/step-00000001.h5", "r")["model"]
    W, b = ck["1.weight"][...].astype(np.float64), ck["1.bias"][...].astype(np.float64)
    xt = f["x_test"][...].astype(np.float32)
    if transform:
        xt = np.log1p(xt)
    c = (slice(None), slice(None), None, None, None)
    xn = (xt - got_m.astype(np.float32)[c[1:]]) / got_s.astype(np.float32)[c[1:]]
    z = xn.reshape(len(xn), -1).astype(np.float64) @ W.T + b
    dlt = z - f["y_test"][...].astype(np.float64)
    want = {"loss": (dlt ** 2).mean(), "rmse": np.sqrt((dlt ** 2).mean()), "mae": np.abs(dlt).mean()}
    for k in range(4):
        want[f"rmse_{k}"] = np.sqrt((dlt[:, k] ** 2).mean())
        want[f"mae_{k}"] = np.abs(dlt[:, k]).mean()
    got = json.load(open(f"{tmp}/one-{d}/run.json"))["test_metrics"]
    err = max(abs(got[k] - v) / abs(v) for k, v in want.items())
    report(f"{d}: test MSE, RMSE and MAE (overall, per target) equal numpy's from the checkpoint over the volumes in "
           f"C, D, H, W order (rel {err:.1e} <= 1e-5)", err <= 1e-5 and set(got) == set(want), str(sorted(got)))
PYEOF
expect_eq "the numpy check ran to its end" 0 "$?"
report_lines "$TMP/check.txt"

# 1 rank and 2 ranks: the same steps (dropout keyed by the global sample id), then the same
# learning. Two ranks sum a step's gradient in another order; AdamW with this net amplifies that
# rounding (measured when this test was written: 9.9e-7 after 8 steps), so the 4-epoch runs are
# compared by their test RMSE.
OPT=(--optimizer adamw --lr 0.002 --seed 3)
for W in 1 2; do
  timeout 600 $M -n $W "$CNNSCALE" train --data "$TMP/vol" --model "cosmoflow(8,2)" --batch-size $((16 / W)) \
    --max-steps 8 "${OPT[@]}" --run-dir "$TMP/s$W" >"$TMP/s$W.log" 2>&1
  expect_eq "cosmoflow(8,2): 8 steps on $W rank(s)" 0 "$?"
done
expect_ckpt_close "cosmoflow(8,2), step 8: 1 rank x 16 == 2 ranks x 8" "$TMP/s1/checkpoints/step-00000008.h5" \
  "$TMP/s2/checkpoints/step-00000008.h5"
EPOCHS=4
STEPS=$((EPOCHS * 1024 / 16))
for W in 1 2; do
  timeout 900 $M -n $W "$CNNSCALE" train --data "$TMP/vol" --model "cosmoflow(8,2)" --batch-size $((16 / W)) \
    --epochs $EPOCHS --lr-decay cosine "${OPT[@]}" --run-dir "$TMP/w$W" >"$TMP/w$W.log" 2>&1
  expect_eq "cosmoflow(8,2): $EPOCHS epochs on $W rank(s)" 0 "$?"
done
"$PY" - "$TMP" "$EPOCHS" >"$TMP/runs.txt" 2>&1 <<'PYEOF'
import json
import sys

tmp, epochs = sys.argv[1], int(sys.argv[2])
r1, r2 = (json.load(open(f"{tmp}/w{w}/run.json")) for w in (1, 2))


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


m1, m2 = r1["test_metrics"], r2["test_metrics"]
report(f"1 and 2 ranks: test RMSE {m1['rmse']:.4f} and {m2['rmse']:.4f} (within 0.03)",
       abs(m1["rmse"] - m2["rmse"]) <= 0.03 and set(m1) == set(m2))
for w, m in ((1, m1), (2, m2)):
    per = [round(m[f"rmse_{k}"], 3) for k in range(4)]
    report(f"{w} rank(s): test RMSE {m['rmse']:.4f} < 0.36 after {epochs} epochs (predicting the mean: 0.58; per "
           f"target {per})", m["rmse"] < 0.36)
report("run.json: task regression, mse over 4 targets",
       r2["task"] == {"kind": "regression", "loss": "mse over 4 targets", "outputs": 4}, str(r2["task"]))
report("run.json: the model cosmoflow(8,2), test_accuracy null", r2["model"] == "cosmoflow(8,2)" and
       r2["test_accuracy"] is None, str(r2.get("model")))
evals = [json.loads(line) for line in open(f"{tmp}/w2/metrics.jsonl") if '"eval"' in line]
report(f"metrics.jsonl: test_rmse at each of {epochs} epochs, falling ({[round(e['test_rmse'], 4) for e in evals]})",
       len(evals) == epochs and evals[-1]["test_rmse"] < evals[0]["test_rmse"])
PYEOF
expect_eq "the run.json check ran to its end" 0 "$?"
report_lines "$TMP/runs.txt"
expect_grep "the epoch line says rmse" "epoch $EPOCHS test rmse 0\\.[0-9]+ mae" "$TMP/w1.log"
"$CNNSCALE" report "$TMP/w1" "$TMP/w2" --output "$TMP/report" >"$TMP/report.log" 2>&1
expect_eq "cnnscale report of the two runs" 0 "$?"
expect_grep "report: samples/s, not images/s" "\\| Samples/s \\|" "$TMP/report/report.md"
expect_grep "report: each run's test RMSE" "\\| rmse 0\\.[0-9]+ \\|" "$TMP/report/report.md"
"$CNNSCALE" watch "$TMP/w2" --once >"$TMP/watch.txt" 2>&1
expect_grep "watch: the evaluations' RMSE" "eval epoch $EPOCHS \\(step $STEPS\\): test rmse 0\\.[0-9]+, mae 0\\.[0-9]+" \
  "$TMP/watch.txt"

# A class label per volume (3-D classification) and a single regression target.
P=("$CNNSCALE" prep --format hdf5 --input "$TMP/other.h5" --shards 1)
"${P[@]}" --images /x --labels /cls --test-images /x --test-labels /cls --output "$TMP/cls" >"$TMP/prep-cls.log" 2>&1
expect_eq "prep volumes with one class label each" 0 "$?"
"$CNNSCALE" train --data "$TMP/cls" --model "conv(4,3,1,1) bn relu maxpool(2) flatten linear(2)" --batch-size 16 \
  --epochs 1 --lr 0.01 --run-dir "$TMP/cls-run" >"$TMP/cls-run.log" 2>&1
expect_eq "an epoch of a 3-D classifier" 0 "$?"
expect_grep "the 3-D classifier's test accuracy" "epoch 1 test accuracy 0?\\.[0-9]+" "$TMP/cls-run.log"
"${P[@]}" --images /x --targets /y1 --output "$TMP/one-target" >"$TMP/prep-one.log" 2>&1
expect_eq "prep volumes with a single target" 0 "$?"
"$CNNSCALE" train --data "$TMP/one-target" --model "flatten linear(1)" --batch-size 16 --epochs 1 --lr 0.01 \
  --run-dir "$TMP/one-run" >"$TMP/one-run.log" 2>&1
expect_eq "a regression of one target (a model of 1 output)" 0 "$?"
expect_grep "its run.json: mse over 1 target" '"loss": "mse over 1 target' "$TMP/one-run/run.json"

# Mistakes: one clear error each.
T=("$CNNSCALE" train --data "$TMP/f32" --batch-size 8 --max-steps 1)
expect_refused "an image --augment step on volumes" "--augment hflip works on images, but this data set holds volumes \\(4x16x16x16\\); for volumes use flip3d and transpose3d" \
  "${T[@]}" --model "flatten linear(4)" --augment hflip
expect_refused "a 2-D built-in on volumes" "--model resnet18 is a 2-D network, but the data are volumes \\(4x16x16x16\\)" \
  "${T[@]}" --model resnet18
expect_refused "cosmoflow on volumes under 32 a side" "cosmoflow\\(8,2\\) halves its input five times: each side must be at least 32, got 4x16x16x16" \
  "${T[@]}" --model "cosmoflow(8,2)"
expect_refused "upsampling on a volume" "upsampling has no 3-D form in cnnscale yet and its input is a volume" \
  "${T[@]}" --model "conv(4,3,1,1) upsample(2) flatten linear(4)"
"${P[@]}" --images /img --targets /y --output "$TMP/img" >"$TMP/prep-img.log" 2>&1
expect_eq "prep the volumes' first slices as images" 0 "$?"
expect_refused "cosmoflow on images" "cosmoflow is a 3-D network and takes volumes \\(N×C×D×H×W\\), but the data are 4x16x16 images" \
  "$CNNSCALE" train --data "$TMP/img" --batch-size 8 --max-steps 1 --model cosmoflow

# Volume augmentation (--augment flip3d,transpose3d) in the reader, with a label map per volume
# (3-D segmentation; tests/data/segmentation3d_hdf5.sh trains it): a 1×1×1 convolution's loss
# and gradients are sums over the voxels, unchanged when a volume and its map move together —
# so 3 steps with the augmentation give the checkpoint of 3 without (to rounding), which they
# would not if a map moved otherwise than its volume; a 3×3×3 convolution sees the moves (the
# checkpoints differ); and 1 rank × 8 trains as 2 ranks × 4 with the augmentation (the draws
# keyed by the sample, not the rank). data-bench says volumes and times the augmentation.
"${P[@]}" --images /x --labels /maps --output "$TMP/maps" >"$TMP/prep-maps.log" 2>&1
expect_eq "prep volumes with a label map each (N×D×H×W)" 0 "$?"
expect_grep "prep says label maps" "48 train \\+ 0 test samples, 2 classes \\(label maps\\)" "$TMP/prep-maps.log"
A=(train --data "$TMP/maps" --max-steps 3 --lr 0.1 --seed 5)
for aug in none flip3d,transpose3d; do
  for m in "conv(2,1)" "conv(2,3,1,1)"; do
    "$CNNSCALE" "${A[@]}" --batch-size 8 --model "$m" --augment "$aug" --run-dir "$TMP/aug-$aug-${m:7:1}" >"$TMP/aug.log" 2>&1
    expect_eq "3 steps of $m --augment $aug on volumes with label maps" 0 "$?"
  done
done
expect_ckpt_close "conv(2,1), voxels and labels moved together: the unaugmented checkpoint" \
  "$TMP/aug-none-1/checkpoints/step-00000003.h5" "$TMP/aug-flip3d,transpose3d-1/checkpoints/step-00000003.h5"
"$CNNSCALE_BUILD/tests/ckpt_diff" "$TMP/aug-none-3/checkpoints/step-00000003.h5" \
  "$TMP/aug-flip3d,transpose3d-3/checkpoints/step-00000003.h5" >"$TMP/aug-diff.txt" 2>&1
rel=$(awk '{print $8}' "$TMP/aug-diff.txt")
expect_eq "conv(2,3,1,1) sees the moves: its checkpoint differs (rel $rel > 1e-3)" 1 \
  "$(python3 -c "print(int(float('${rel:-0}') > 1e-3))")"
timeout 300 $M -n 2 "$CNNSCALE" "${A[@]}" --batch-size 4 --model "conv(2,3,1,1)" --augment flip3d,transpose3d \
  --run-dir "$TMP/aug-2ranks" >"$TMP/aug-2ranks.log" 2>&1
expect_eq "2 ranks with --augment flip3d,transpose3d" 0 "$?"
expect_ckpt_close "--augment flip3d,transpose3d: 1 rank x 8 == 2 ranks x 4" \
  "$TMP/aug-flip3d,transpose3d-3/checkpoints/step-00000003.h5" "$TMP/aug-2ranks/checkpoints/step-00000003.h5"
"$CNNSCALE" data-bench --data "$TMP/maps" --augment flip3d,transpose3d --batch-size 8 --batches 4 --warmup 1 \
  >"$TMP/bench.txt" 2>&1
expect_eq "data-bench of volumes with --augment flip3d,transpose3d" 0 "$?"
expect_grep "data-bench counts volumes" "^[0-9]+ volumes in [0-9.]+ s: [0-9.]+ volumes/s" "$TMP/bench.txt"
expect_grep "data-bench times the volume augmentation" "^per volume: .* augment [0-9.]*[1-9][0-9.]* us" "$TMP/bench.txt"
expect_refused "a volume --augment step on images" "--augment transpose3d moves the voxels of volumes, but this data set holds images" \
  "$CNNSCALE" train --data "$TMP/img" --batch-size 8 --max-steps 1 --model "flatten linear(4)" --augment transpose3d
finish
