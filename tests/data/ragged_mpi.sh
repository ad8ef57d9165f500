#!/usr/bin/env bash
# ragged_mpi.sh — variable-size (ragged) image data under mpirun: 21 PNGs of 21 sizes
# (grey and RGB, some above the cap) prepped with --store original-max 40, then
# `--augment rrc16,hflip` with a small dropout-free model:
#  - 1 rank × 16 ≡ 2 ranks × 8 after 4 steps (relative parameter difference < 1e-5, the
#    bound of ddp_equivalence.sh; the batches are bitwise equal, test_ragged checks that)
#    and 2 ranks with --data-threads 2 ≡ 2 ranks with 1, bitwise;
#  - the replicas stay identical (--check-replicas), and evaluation (Resize(18),
#    CenterCrop(16)) covers the 8 val images once across the 2 ranks.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_imagefolder_tool"
DIFF="$CNNSCALE_BUILD/tests/ckpt_diff"
M=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none)
C="$CNNSCALE"
R="$TMP/root"
for c in a b c; do mkdir -p "$R/train/$c" "$R/val/$c"; done
i=0
for w in 18 25 31 40 47 56 70; do
  for h in 22 35 44; do
    i=$((i + 1))
    cls=$(echo a b c | cut -d' ' -f$((i % 3 + 1)))
    "$TOOL" png "$R/train/$cls/$i.png" "$w" "$h" $((i % 2 * 2 + 1)) "$i"
  done
done
for k in 1 2 3 4 5 6 7 8; do
  cls=$(echo a b c | cut -d' ' -f$((k % 3 + 1)))
  "$TOOL" png "$R/val/$cls/v$k.png" $((20 + 7 * k)) $((60 - 4 * k)) 3 "$((100 + k))"
done
"$C" prep --format imagefolder --input "$R" --output "$TMP/ds" --store original-max 40 --shards 3 --test-shards 2 \
  >"$TMP/prep.out" 2>&1
expect_eq "prep --store original-max 40 exit status" 0 "$?"
expect_grep "21 train + 8 val images" "21 train \+ 8 test samples, 3 classes" "$TMP/prep.out"
SMALL="conv(8,3,1,1) relu maxpool(2) conv(8,3,1,1) relu flatten linear(3)"
train() {  # NAME RANKS BATCH [extra...]
  local n=$1 r=$2 b=$3
  shift 3
  timeout 300 "${M[@]}" -n "$r" "$C" train --data "$TMP/ds" --model "$SMALL" --batch-size "$b" --max-steps 4 \
    --augment rrc16,hflip --lr 0.02 --momentum 0.9 --seed 3 --check-replicas 1 --run-dir "$TMP/$n" "$@" \
    >"$TMP/$n.out" 2>&1
  expect_eq "$n: train exit status" 0 "$?"
}
train one 1 16
train two 2 8
train two3 2 8 --data-threads 2
CK=checkpoints/step-00000004.h5
"$DIFF" "$TMP/one/$CK" "$TMP/two/$CK" >"$TMP/d12.txt" 2>&1
rel=$(awk '{print $8}' "$TMP/d12.txt")
python3 -c "import sys; sys.exit(0 if float('${rel:-1}') < 1e-5 else 1)"
expect_eq "ragged rrc16,hflip: 1 rank x 16 == 2 ranks x 8 (rel diff ${rel:-none} < 1e-5)" 0 "$?"
"$DIFF" "$TMP/two/$CK" "$TMP/two3/$CK" >"$TMP/dt.txt" 2>&1
expect_grep "2 ranks: --data-threads 2 == 1, bitwise" 'identical 1' "$TMP/dt.txt"
expect_grep "2 ranks: replicas identical" "replicas identical at all 4 check" "$TMP/two.out"
expect_grep "evaluation: the 8 val images once across 2 ranks" '^epoch 1 test accuracy .*\(8 samples\)$' "$TMP/two.out"
finish
