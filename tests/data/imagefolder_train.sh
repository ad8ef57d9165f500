#!/usr/bin/env bash
# imagefolder_train.sh — an image folder end to end: 6000 train + 1000 val real
# Fashion-MNIST images written as 8-bit greyscale PNG files by cnnscale_imagefolder_tool
# (libpng, no Python), ROOT/train/<class>/ and ROOT/val/<class>/, prepped with
# `--format imagefolder --threads 2` (the PNG grey → RGB decode path: 3×28×28 samples
# with three equal channels), then 1 epoch on 2 ranks (mpirun) with
# --augment crop28pad2,hflip; the test accuracy on the 1000 val images must reach 0.60.
# Measured (mpirun -n 2, batch 32 per rank, lr 0.05, momentum 0.9, seeds 1..5):
# 0.746, 0.736, 0.778, 0.741, 0.775 (chance 0.1); floor 0.60 leaves ~0.13 margin below
# the worst seed. About 10 s on the 2-core development machine.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
SRC=/usr/share/datasets/fashion-mnist
[ -r "$SRC/train-images-idx3-ubyte.gz" ] || { echo "SKIP: $SRC not installed (dataset-fashion-mnist)"; exit 77; }
TOOL="$CNNSCALE_BUILD/tests/cnnscale_imagefolder_tool"
M=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none)
C="$CNNSCALE"
SEED=${IMAGEFOLDER_TRAIN_SEED:-1}
FLOOR=0.60
SMALL="conv(16,3,1,1) relu maxpool(2) conv(32,3,1,1) relu maxpool(2) flatten linear(10)"

"$TOOL" fashion "$SRC" "$TMP/root" 6000 1000
expect_eq "imagefolder_tool wrote the PNG tree" 0 "$?"
expect_eq "10 class folders in train/" 10 "$(ls "$TMP/root/train" | wc -l)"
expect_eq "7000 PNG files" 7000 "$(find "$TMP/root" -name '*.png' | wc -l)"

"$C" prep --format imagefolder --input "$TMP/root" --output "$TMP/ds" --threads 2 --shards 4 --test-shards 2 \
  >"$TMP/prep.out" 2>&1
expect_eq "prep --format imagefolder exit status" 0 "$?"
expect_grep "prep summary" "wrote $TMP/ds: 6000 train \+ 1000 test samples, 10 classes" "$TMP/prep.out"
python3 - "$TMP/ds/dataset.json" >"$TMP/json.txt" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
m = j["normalization"]["mean"]
print(j["sample_shape"], j["class_names"][0], j["class_names"][9], j["source"]["layout"], m[0] == m[1] == m[2])
PY
expect_eq "dataset.json: grey PNGs became 3x28x28 with equal channels, class names, train/val layout" \
  "[3, 28, 28] 0_t-shirt_top 9_ankle_boot train/val True" "$(cat "$TMP/json.txt")"
"$C" prep --verify "$TMP/ds" >"$TMP/verify.out" 2>&1
expect_eq "prep --verify exit status" 0 "$?"

timeout 600 "${M[@]}" -n 2 "$C" train --data "$TMP/ds" --model "$SMALL" --epochs 1 --batch-size 32 \
  --augment crop28pad2,hflip --lr 0.05 --momentum 0.9 --seed "$SEED" --log-every 50 >"$TMP/train.out" 2>&1
expect_eq "1 epoch on 2 ranks with --augment crop28pad2,hflip: exit status" 0 "$?"
acc=$(sed -n 's/^epoch 1 test accuracy \([0-9.]*\) .*(1000 samples)$/\1/p' "$TMP/train.out")
echo "seed $SEED: test accuracy ${acc:-none}"
python3 -c "import sys; sys.exit(0 if float('${acc:-0}') >= $FLOOR else 1)"
expect_eq "test accuracy ${acc:-none} >= $FLOOR after 1 epoch on 2 ranks" 0 "$?"
[ "$_fail" -eq 0 ] || tail -20 "$TMP/train.out"
finish
