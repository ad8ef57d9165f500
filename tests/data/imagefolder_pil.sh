#!/usr/bin/env bash
# imagefolder_pil.sh — `prep --format imagefolder` against torchvision/PIL themselves:
# an ImageFolder tree with RGB, grey, CMYK and progressive JPEGs (one named .JPG),
# palette+transparency, RGBA, LA and 1-bit PNGs, nested folders and a skipped .txt
# (tests/data/make_imagefolder.py) is prepped with --resize 24 --center-crop 24 (and,
# separately, --center-crop 40 on small images: zero padding); every sample's bytes and
# label equal torchvision ImageFolder(root, Compose([Resize(24), CenterCrop(24)])) with
# PIL's convert("RGB"), class names in ImageFolder order, train/ + val/ layout;
# --val-fraction splits the set; bad inputs name the file. SKIP (77) without torchvision.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
C="$CNNSCALE"
require_python "torchvision, PIL" "python3-torchvision"
"$PY" "$CNNSCALE_SOURCE/tests/data/make_imagefolder.py" "$TMP" 24 "$TMP/exp" >"$TMP/make.out" 2>&1
expect_eq "make_imagefolder.py exit status" 0 "$?"
expect_grep "torchvision's class order" '^classes C_up a_cls b_cls samples 12$' "$TMP/make.out"

# dump SHARD OUT: raw /images (uint8 N×C×H×W) and /labels (int32 LE) of one shard
dump() {
  h5dump -d /images -b LE -o "$2.images" "$1" >/dev/null && h5dump -d /labels -b LE -o "$2.labels" "$1" >/dev/null
}
# compare NAME EXPECTED.bin SIZE DUMP: every sample equal (HWC → CHW), in order
compare() {
  "$PY" - "$2" "$3" "$4" >"$TMP/$1.cmp" 2>&1 <<'PYEOF'
import struct, sys
exp, S, dump = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rec = 1 + S * S * 3
e = open(exp, "rb").read()
imgs, labs = open(dump + ".images", "rb").read(), open(dump + ".labels", "rb").read()
n = len(e) // rec
bad = []
for i in range(n):
    r = e[i * rec:(i + 1) * rec]
    chw = bytes(r[1 + 3 * p + c] for c in range(3) for p in range(S * S))
    if imgs[i * S * S * 3:(i + 1) * S * S * 3] != chw or struct.unpack_from("<i", labs, 4 * i)[0] != r[0]:
        bad.append(i)
print("samples", n, "stored", len(labs) // 4, "differ", bad)
PYEOF
}

run prep "$C" prep --format imagefolder --input "$TMP/img" --resize 24 --center-crop 24 --output "$TMP/ds" \
  --shards 1 --test-shards 1 --threads 2
expect_eq "prep imagefolder exit status" 0 "$st"
expect_grep "prep summary" "12 train \+ 12 test samples, 3 classes" "$TMP/prep.out"
"$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['class_names'], j['sample_shape'], j['source']['layout'])" \
  "$TMP/ds/dataset.json" >"$TMP/json.txt"
expect_eq "dataset.json: class names, shape, layout" "['C_up', 'a_cls', 'b_cls'] [3, 24, 24] train/val" "$(cat "$TMP/json.txt")"
dump "$TMP/ds/train-00000-of-00001.h5" "$TMP/tr"
compare train "$TMP/exp.train.bin" 24 "$TMP/tr"
expect_grep "train split equals torchvision Resize(24)+CenterCrop(24) byte for byte" '^samples 12 stored 12 differ \[\]$' "$TMP/train.cmp"
dump "$TMP/ds/test-00000-of-00001.h5" "$TMP/te"
compare test "$TMP/exp.test.bin" 24 "$TMP/te"
expect_grep "val split equals torchvision byte for byte" '^samples 12 stored 12 differ \[\]$' "$TMP/test.cmp"

run pad "$C" prep --format imagefolder --input "$TMP/pad" --center-crop 40 --output "$TMP/dspad" --shards 1
expect_eq "prep --center-crop 40 (padding) exit status" 0 "$st"
dump "$TMP/dspad/train-00000-of-00001.h5" "$TMP/pd"
compare pad "$TMP/exp.pad.bin" 40 "$TMP/pd"
expect_grep "CenterCrop(40) of smaller images (zero padding) equals torchvision" '^samples 12 stored 12 differ \[\]$' "$TMP/pad.cmp"

# --val-fraction on ROOT/<class>/…: 3 of 12 held out; together the splits are the set
run split "$C" prep --format imagefolder --input "$TMP/img/train" --resize 24 --center-crop 24 --val-fraction 0.25 \
  --seed 4 --output "$TMP/dssplit" --shards 1 --test-shards 1
expect_eq "prep --val-fraction exit status" 0 "$st"
expect_grep "--val-fraction 0.25 of 12" "9 train \+ 3 test samples, 3 classes" "$TMP/split.out"
dump "$TMP/dssplit/train-00000-of-00001.h5" "$TMP/sa"
dump "$TMP/dssplit/test-00000-of-00001.h5" "$TMP/sb"
"$PY" - "$TMP/exp.train.bin" "$TMP/sa" "$TMP/sb" >"$TMP/split.cmp" 2>&1 <<'PYEOF'
import sys
S = 24
rec = 1 + S * S * 3
e = open(sys.argv[1], "rb").read()
want = [bytes(e[i * rec + 1 + 3 * p + c] for c in range(3) for p in range(S * S)) for i in range(len(e) // rec)]
got = []
for d in sys.argv[2:]:
    b = open(d + ".images", "rb").read()
    got += [b[i:i + S * S * 3] for i in range(0, len(b), S * S * 3)]
idx = [want.index(g) for g in got]
print("union", sorted(idx) == list(range(12)), "train in order", idx[:9] == sorted(idx[:9]), "val in order", idx[9:] == sorted(idx[9:]))
PYEOF
expect_eq "train + val = the ImageFolder set, each in ImageFolder order" "union True train in order True val in order True" "$(cat "$TMP/split.cmp")"

# ---- bad inputs
run nocrop "$C" prep --format imagefolder --input "$TMP/img" --output "$TMP/x1"
expect_error nocrop "$TMP/img/train/.* is [0-9]+x[0-9]+ after --resize/--center-crop but $TMP/img/train/C_up/noise_rgb.png is 48x30; every sample needs one shape: pass --center-crop S"
cp -r "$TMP/img" "$TMP/bmp"
"$PY" -c "from PIL import Image; Image.new('RGB', (8, 8)).save('$TMP/bmp/train/b_cls/x.bmp')"
run bmp "$C" prep --format imagefolder --input "$TMP/bmp" --resize 24 --center-crop 24 --output "$TMP/x2"
expect_error bmp "$TMP/bmp/train/b_cls/x.bmp is an image type torchvision's ImageFolder lists but cnnscale prep does not decode"
rm "$TMP/bmp/train/b_cls/x.bmp"
head -c 600 "$TMP/img/train/a_cls/img0.jpg" >"$TMP/bmp/train/a_cls/img0.jpg"
run trunc "$C" prep --format imagefolder --input "$TMP/bmp" --resize 24 --center-crop 24 --output "$TMP/x3"
expect_error trunc "$TMP/bmp/train/a_cls/img0.jpg is not a readable JPEG \(.*\); replace or remove the file"
expect_eq "failed prep leaves no output" "" "$(ls -d "$TMP"/x3* 2>/dev/null)"
cp "$TMP/img/train/a_cls/img0.jpg" "$TMP/bmp/train/a_cls/img0.jpg"
mv "$TMP/bmp/val/b_cls" "$TMP/bmp/val/B_cls"
run classes "$C" prep --format imagefolder --input "$TMP/bmp" --resize 24 --center-crop 24 --output "$TMP/x4"
expect_error classes "the class folders of $TMP/bmp/val \(3\) differ from those of $TMP/bmp/train \(3\): class 0 is 'B_cls' in val/ and 'C_up' in train/"
run valfrac "$C" prep --format imagefolder --input "$TMP/img" --val-fraction 0.1 --output "$TMP/x5"
expect_error valfrac "$TMP/img has its own val/ folder; drop --val-fraction"
run notif "$C" prep --format idx --input "$TMP/img" --resize 32 --output "$TMP/x6"
expect_error notif "--resize, --center-crop, --val-fraction and --store belong to --format imagefolder"
finish
