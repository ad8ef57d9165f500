#!/usr/bin/env bash
# imagefolder_cli.sh — the image-folder options through the command line, on PNG files
# written by cnnscale_imagefolder_tool (no Python needed for the data):
#  - --store original-max 40: dataset.json says ragged / max_side 40, per-sample shapes
#    are kept (longer side capped to 40), --verify passes, `train --augment rrc16,hflip`
#    runs an epoch and evaluates, with the same losses for --data-threads 1 and 3;
#    configs/imagefolder.ini (rrc224,hflip) runs a step;
#    crop/hflip-first lists, no --augment and --data-threads 0 are refused;
#  - bad --store values and --store with another format are refused naming the fix;
#  - decompression bombs: a PNG (IHDR) and a real JPEG (SOF0 patched) claiming 20000×20000
#    and 30000×20000 pixels are refused from the header (under a 2 GB address-space
#    limit), naming the file and --max-image-pixels; the limit is exact (100×100 passes
#    at 10000, fails at 9999) and belongs to --format imagefolder.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_imagefolder_tool"
C="$CNNSCALE"
R="$TMP/root"
mkdir -p "$R"/train/{cat,dog} "$R"/val/{cat,dog}
i=0
for wh in "50 30" "30 50" "64 64" "20 90" "40 40" "17 23" "80 61" "33 33"; do
  set -- $wh
  i=$((i + 1))
  "$TOOL" png "$R/train/cat/$i.png" "$1" "$2" 3 "$i"
  "$TOOL" png "$R/train/dog/$i.png" "$2" "$1" 1 "$((i + 40))"
  [ $i -le 2 ] && "$TOOL" png "$R/val/cat/$i.png" "$1" "$2" 3 "$((i + 80))" && "$TOOL" png "$R/val/dog/$i.png" "$1" "$2" 1 "$((i + 90))"
done

run help "$C" prep --help
expect_grep "prep --help lists imagefolder" '^  imagefolder +torchvision ImageFolder layout' "$TMP/help.out"
expect_grep "prep --help documents --store" 'original-max S' "$TMP/help.out"
run prep "$C" prep --format imagefolder --input "$R" --output "$TMP/ds" --store original-max 40 --shards 2 --test-shards 1
expect_eq "prep --store original-max 40 exit status" 0 "$st"
expect_grep "prep summary" "16 train \+ 4 test samples, 2 classes" "$TMP/prep.out"
python3 - "$TMP/ds/dataset.json" >"$TMP/json.txt" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(j["sample_layout"], j["max_side"], j["sample_shape"], j["source"]["store"])
PY
expect_eq "dataset.json: ragged, max_side 40" "ragged 40 [3, 40, 40] original-max 40" "$(cat "$TMP/json.txt")"
if command -v h5dump >/dev/null; then
  h5dump -d /shapes "$TMP/ds/train-00000-of-00002.h5" >"$TMP/shapes.txt" 2>&1
  # cat/1 50x30 → 40x24 (int(40*30/50)); cat/4 20x90 → 8x40 (int(40*20/90) = 8); cat/6 17x23 kept
  expect_grep "50x30 stored as 40x24 (H 24, W 40)" '\(0,0\): 3, 24, 40' "$TMP/shapes.txt"
  expect_grep "20x90 stored as 8x40 (H 40, W 8)" '\(3,0\): 3, 40, 8' "$TMP/shapes.txt"
  expect_grep "17x23 kept" '\(5,0\): 3, 23, 17' "$TMP/shapes.txt"
fi
run verify "$C" prep --verify "$TMP/ds"
expect_eq "prep --verify of a ragged data set" 0 "$st"
SMALL="conv(8,3,1,1) relu maxpool(2) flatten linear(2)"
run train "$C" train --data "$TMP/ds" --model "$SMALL" --augment rrc16,hflip --batch-size 4 --epochs 1 --seed 2
expect_eq "train --augment rrc16,hflip on ragged data" 0 "$st"
expect_grep "evaluated on the 4 val images" '^epoch 1 test accuracy .*\(4 samples\)' "$TMP/train.out"
# --data-threads 3: the same losses step by step as --data-threads 1 (draws keyed by sample)
for t in 1 3; do
  run dt$t "$C" train --data "$TMP/ds" --model "$SMALL" --augment rrc16,hflip --batch-size 4 --epochs 2 --seed 2 \
    --log-every 1 --data-threads $t
  expect_eq "train --data-threads $t exit status" 0 "$st"
  sed -n 's/.*\(step [0-9]*\/[0-9]* loss [0-9.]*\).*/\1/p' "$TMP/dt$t.out" >"$TMP/loss$t.txt"
done
expect_eq "8 logged steps" 8 "$(wc -l <"$TMP/loss1.txt")"
expect_eq "--data-threads 3 gives the losses of --data-threads 1" "$(cat "$TMP/loss1.txt")" "$(cat "$TMP/loss3.txt")"
run dt0 "$C" train --data "$TMP/ds" --model "$SMALL" --augment rrc16 --batch-size 4 --epochs 1 --data-threads 0
expect_error dt0 "--data-threads 0 is not a sensible worker count"
# configs/imagefolder.ini (rrc224,hflip, resnet50, --data-threads 2) runs on ragged data
run cfg "$C" train --config "$CNNSCALE_SOURCE/configs/imagefolder.ini" --data "$TMP/ds" --batch-size 2 --max-steps 1 \
  --no-eval
expect_eq "configs/imagefolder.ini runs" 0 "$st"
expect_grep "configs/imagefolder.ini: resnet50" 'model resnet50' "$TMP/cfg.out"
# A size that cannot fit names the input shape it makes, once (issue 26 item 12: it was an
# out-of-memory error for the parameters; since issue 51's fuzzing every step's samples are
# bounded, kMaxAugmentSampleBytes, so it is refused before any model is built), and one
# beyond any CNN input is refused by name (once: "unknown step 'resize114284'", the
# evaluation's derived resize of rrc99999)
run bigrrc "$C" train --data "$TMP/ds" --augment rrc60000 --batch-size 2 --max-steps 1
expect_error bigrrc "--augment rrc60000 makes samples of 3x60000x60000 \(10299 MiB each\), more than the 256 MiB a reader thread holds per sample; give that step a smaller size"
run hugerrc "$C" train --data "$TMP/ds" --augment rrc99999 --batch-size 2 --max-steps 1
expect_error hugerrc "--augment rrc99999: sizes above 65535 are not CNN inputs; give a smaller size"
run trainflip "$C" train --data "$TMP/ds" --model "$SMALL" --augment hflip,rrc16 --batch-size 4 --epochs 1
expect_error trainflip "--augment hflip needs images of one size but this data set stores variable-size images"
run trainnone "$C" train --data "$TMP/ds" --model "$SMALL" --batch-size 4 --epochs 1
expect_error trainnone "leaves the images of this data set at their variable stored sizes"

run nosize "$C" prep --format imagefolder --input "$R" --output "$TMP/x1" --store original-max
expect_error nosize "--store takes 'fixed', 'original-max S' or 'jpeg S'"
run banana "$C" prep --format imagefolder --input "$R" --output "$TMP/x2" --store banana
expect_error banana "--store takes 'fixed', 'original-max S' or 'jpeg S'"
run withresize "$C" prep --format imagefolder --input "$R" --output "$TMP/x3" --store original-max 40 --resize 32
expect_error withresize "does not combine with --resize or --center-crop"
run idx "$C" prep --format idx --input "$R" --output "$TMP/x4" --store original-max 40
expect_error idx "--store belong to --format imagefolder"
run fixed "$C" prep --format imagefolder --input "$R" --output "$TMP/x5" --store fixed
expect_error fixed "is 30x50 after --resize/--center-crop but .* pass --center-crop S .* or --store original-max S"

# ---- one class folder: refused in prep, naming the folder (train would only say "a
# classifier needs at least 2 classes, got 1", without naming the data set: issue 26 item 13)
O="$TMP/oneclass"
mkdir -p "$O/cat"
"$TOOL" png "$O/cat/1.png" 20 20 3 1
"$TOOL" png "$O/cat/2.png" 20 20 3 2
run oneclass "$C" prep --format imagefolder --input "$O" --output "$TMP/x1c" --shards 1
expect_error oneclass "$O has one class folder \('cat'\): a classifier needs at least 2 classes.*give the folder that holds the class folders"
expect_eq "the refused one-class prep leaves no output" "" "$(ls -d "$TMP"/x1c* 2>/dev/null)"
mkdir -p "$O/dog" && "$TOOL" png "$O/dog/1.png" 20 20 3 3
run twoclass "$C" prep --format imagefolder --input "$O" --output "$TMP/x2c" --shards 1 --resize 20
expect_eq "with a second class folder it preps" 0 "$st"

# ---- what the file system can put in the way (issue 26 items 9, 10): a FIFO named like an
# image (it once blocked prep forever), a symbolic link loop, an unreadable class folder:
# each a `cnnscale: error:` naming the path, never an internal error or a hang
F="$TMP/fifo"
mkdir -p "$F/cat" "$F/dog"
"$TOOL" png "$F/cat/1.png" 20 20 3 1
"$TOOL" png "$F/dog/1.png" 20 20 3 2
mkfifo "$F/dog/2.jpg"
run fifo timeout 60 "$C" prep --format imagefolder --input "$F" --output "$TMP/xf" --shards 1 --resize 20
expect_error fifo "$F/dog/2.jpg is not a regular file \(a FIFO, socket, device or dangling link\) though it is named like an image"
rm "$F/dog/2.jpg"
ln -s .. "$F/cat/loop"
run loop timeout 60 "$C" prep --format imagefolder --input "$F" --output "$TMP/xl" --shards 1 --resize 20
expect_error loop "cannot list .*: a symbolic link loop under $F; remove the link that points back up"
rm "$F/cat/loop"
if can_be_nobody; then
  # As nobody, from a copy of cnnscale and a folder it can reach, wherever the checkout
  # lives (under /root, mode 700, the build's own cnnscale was out of its reach: exit 126).
  U=$(nobody_dir)
  CN=$(nobody_copy "$C")
  cp -r "$F" "$U/in"
  mkdir -m 777 "$U/out"
  chmod 000 "$U/in/dog"
  run unreadable as_nobody timeout 60 "$CN" prep --format imagefolder \
    --input "$U/in" --output "$U/out/ds" --shards 1 --resize 20
  expect_error unreadable "cannot list $U/in/dog \(Permission denied\): no permission to read it; fix its permissions"
  chmod 755 "$U/in/dog"
else
  echo "note: cannot run as nobody here (not root, or util-linux without its user switch): the unreadable-folder case is left out"
fi

# ---- a class folder whose name is not UTF-8 (dataset.json holds UTF-8 only): refused up
# front, naming it with its bytes shown, before any decoding (issue 26 item 8)
N="$TMP/names"
mkdir -p "$N/cat" "$N/d$(printf '\xff\xfe')g"
"$TOOL" png "$N/cat/1.png" 20 20 3 1
"$TOOL" png "$N/d$(printf '\xff\xfe')g/1.png" 20 20 3 2
run badname "$C" prep --format imagefolder --input "$N" --output "$TMP/xn" --shards 1 --resize 20
expect_error badname "the class name 'd\\\\xFF\\\\xFEg' of .* is not UTF-8 text \(byte 1\); dataset.json can hold UTF-8 names only: rename the class folder"
expect_eq "the refused prep leaves no output" "" "$(ls -d "$TMP"/xn* 2>/dev/null)"

# ---- decompression-bomb guard: the header alone decides (run under a 2 GB address-space
# limit: decoding the claimed 20000x20000 RGB image would need 1.2 GB of pixels alone)
B="$TMP/bomb"
mkdir -p "$B/a" "$B/b"
"$TOOL" png "$B/a/ok.png" 100 100 3 1
"$TOOL" png "$B/b/ok.png" 100 100 3 2
"$TOOL" bomb-png "$B/b/zz.png" 20000 20000
run bombpng bash -c "ulimit -v 2000000; exec \"$C\" prep --format imagefolder --input \"$B\" --output \"$TMP/x6\" --shards 1"
expect_error bombpng "$B/b/zz.png claims 20000x20000 = 400000000 pixels in its header, more than --max-image-pixels 178956970 .*raise --max-image-pixels"
rm "$B/b/zz.png"
"$TOOL" bomb-jpeg "$B/b/zz.jpg" 30000 20000
run bombjpg bash -c "ulimit -v 2000000; exec \"$C\" prep --format imagefolder --input \"$B\" --output \"$TMP/x7\" --shards 1"
expect_error bombjpg "$B/b/zz.jpg claims 30000x20000 = 600000000 pixels in its header, more than --max-image-pixels"
expect_eq "refused preps leave no output" "" "$(ls -d "$TMP"/x6* "$TMP"/x7* 2>/dev/null)"
rm "$B/b/zz.jpg"
# --max-image-pixels 0 (no header limit): a bomb that cannot fit is named by its header, before
# the decoder allocates (it once ended in an out-of-memory line naming no file: issue 26 item 12)
"$TOOL" bomb-png "$B/b/zz.png" 30000 30000
run bomb0 bash -c "ulimit -v 2000000; exec \"$C\" prep --format imagefolder --input \"$B\" --output \"$TMP/x7b\" --shards 1 --max-image-pixels 0"
expect_error bomb0 "out of memory while decoding $B/b/zz.png \(30000x30000 pixels by its header\): .*else remove the file"
rm "$B/b/zz.png"
# Sizes that cannot fit are named before any decoding: --resize, --center-crop.
run bigresize "$C" prep --format imagefolder --input "$B" --output "$TMP/x7c" --shards 1 --resize 1000000
expect_error bigresize "out of memory while resizing images to --resize 1000000 \(3x1000000x1000000 bytes per image.*lower --resize"
run bigcrop "$C" prep --format imagefolder --input "$B" --output "$TMP/x7d" --shards 1 --center-crop 1000000
expect_error bigcrop "out of memory while cropping images to --center-crop 1000000 .*lower --center-crop"
run lim "$C" prep --format imagefolder --input "$B" --output "$TMP/x8" --shards 1 --max-image-pixels 9999
expect_error lim "$B/a/ok.png claims 100x100 = 10000 pixels in its header, more than --max-image-pixels 9999"
run limok "$C" prep --format imagefolder --input "$B" --output "$TMP/x9" --shards 1 --max-image-pixels 10000
expect_eq "--max-image-pixels 10000 admits 100x100 images" 0 "$st"
run limidx "$C" prep --format idx --input "$B" --output "$TMP/x10" --max-image-pixels 10
expect_error limidx "--max-image-pixels belongs to --format imagefolder"
finish
