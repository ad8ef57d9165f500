#!/usr/bin/env bash
# jpeg_store_cli.sh — `prep --store jpeg S` (issue 27 item 4) on a folder of real files made
# with PIL: JPEGs of 40–96 px (kept), two of 150 px and a PNG (re-encoded), a CMYK JPEG:
#  - dataset.json says sample_layout jpeg and store "jpeg 100"; --verify passes, and finds a
#    /chunk_addresses list made stale (an entry pointing at another valid chunk);
#  - every JPEG of at most 100 px is stored byte for byte (h5py reads /images at /offsets);
#    the others are JPEGs whose size (PIL's decode) is the longer side capped to 100 by
#    torchvision's max_size rule; /shapes is PIL's size of every stored JPEG; the shards
#    hold fewer image bytes than the folder;
#  - `train --jpeg-decode exact` on it computes the losses of training on the same files
#    prepped with --store original-max 100, to the last printed digit (the same pixels:
#    PIL's decoder, the same crops), and its evaluations the same accuracy and loss, on a
#    folder whose JPEGs are all kept;
#  - the default fast decode trains too (finite losses), data-bench times its decode;
#  - --jpeg-decode with another word is refused.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
PY=""
for p in python3 /usr/bin/python3; do "$p" -c 'import PIL, h5py, numpy' 2>/dev/null && { PY=$p; break; }; done
if [ -z "$PY" ]; then echo "SKIP: no python3 with PIL, h5py and numpy (Debian: python3-pil python3-h5py)"; exit 77; fi
make_folder() {  # DIR EXTRA(0|1): 24 JPEGs ≤ 96 px; EXTRA adds 2 large JPEGs, a PNG, a CMYK JPEG
  "$PY" - "$1" "$2" <<'PY'
import os, random, sys
from PIL import Image
root, extra, rng = sys.argv[1], sys.argv[2] == "1", random.Random(3)
def img(w, h, i, mode="RGB"):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 7 + i * 3) % 256, (y * 5 + x) % 256, (x * y + i) % 256) for y in range(h) for x in range(w)])
    return im.convert(mode) if mode != "RGB" else im
for i in range(24):
    d = os.path.join(root, "train", "c%d" % (i % 3)); os.makedirs(d, exist_ok=True)
    img(rng.randint(40, 96), rng.randint(40, 96), i).save(os.path.join(d, "%02d.jpg" % i), quality=90)
if extra:
    d = os.path.join(root, "train", "c0")
    img(150, 90, 90).save(os.path.join(d, "big1.jpg"), quality=90)
    img(70, 150, 91).save(os.path.join(d, "big2.jpg"), quality=90)
    img(60, 50, 92).save(os.path.join(d, "p.png"))
    img(64, 48, 93, "CMYK").save(os.path.join(d, "cmyk.jpg"), quality=90)
PY
}
make_folder "$TMP/mixed" 1
"$CNNSCALE" prep --format imagefolder --input "$TMP/mixed" --output "$TMP/pj" --store jpeg 100 --shards 2 >"$TMP/prep.out" 2>&1
expect_eq "prep --store jpeg: exit status" 0 "$?"
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["sample_layout"] == "jpeg" and j["source"]["store"] == "jpeg 100" and j["max_side"] == 100 else 1)' "$TMP/pj/dataset.json"
expect_eq "dataset.json: sample_layout jpeg, store \"jpeg 100\", max_side 100" 0 "$?"
"$CNNSCALE" prep --verify "$TMP/pj" >"$TMP/verify.out" 2>&1
expect_eq "--verify passes" 0 "$?"
# A stale /chunk_addresses (as after h5repack: chunk 1's entry pointing at chunk 2, a valid
# chunk, its checksum and index still chunk 1's) is found by --verify, named as the list's fault.
cp -r "$TMP/pj" "$TMP/stale"
"$PY" -c '
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    t = f["chunk_addresses"]; row = t[2]; row[1:] = t[1][1:]; t[1] = row' "$TMP/stale/train-00000-of-00002.h5"
"$CNNSCALE" prep --verify "$TMP/stale" >"$TMP/stale.out" 2>&1
expect_eq "--verify with a stale chunk list: exit status" 2 "$?"
expect_grep "--verify with a stale chunk list: named" \
  "^cnnscale: error: shard $TMP/stale/train-00000-of-00002.h5 has a /chunk_addresses list that does not match its chunks" "$TMP/stale.out"
"$PY" - "$TMP/mixed" "$TMP/pj" >"$TMP/bytes.out" 2>&1 <<'PY'
import glob, io, json, os, sys
import h5py
from PIL import Image
src, out = sys.argv[1], sys.argv[2]
j = json.load(open(os.path.join(out, "dataset.json")))
files = sorted(glob.glob(os.path.join(src, "train", "*", "*")))  # ImageFolder order: class, then name
stored = []
for sh in j["splits"]["train"]["shards"]:
    with h5py.File(os.path.join(out, sh["file"]), "r") as f:
        o, s, b = f["offsets"][:], f["shapes"][:], f["images"][:]
        stored += [(bytes(b[o[i]:o[i + 1]]), tuple(s[i])) for i in range(len(s))]
assert len(stored) == len(files) == 28, (len(stored), len(files))
kept = reenc = 0
for path, (data, shape) in zip(files, stored):
    im = Image.open(io.BytesIO(data)); im.load()
    assert data[:3] == b"\xff\xd8\xff", path
    assert shape == (3, im.height, im.width), (path, shape, im.size)  # /shapes is PIL's size
    orig = Image.open(path)
    if path.endswith(".jpg") and max(orig.size) <= 100:
        assert data == open(path, "rb").read(), path + " not stored byte for byte"
        kept += 1
    else:
        w, h = orig.size; l, s = max(w, h), min(w, h)
        want = (100, int(100 * s / l)) if w >= h else (int(100 * s / l), 100)
        assert im.size == (want if l > 100 else (w, h)), (path, im.size, want)
        reenc += 1
folder = sum(os.path.getsize(p) for p in files)
images = sum(len(d) for d, _ in stored)
print("kept", kept, "re-encoded", reenc, "stored bytes", images, "folder bytes", folder)
sys.exit(0 if kept == 25 and reenc == 3 and images <= folder else 1)
PY
st=$?
expect_eq "stored bytes: JPEGs <= 100 px byte for byte, the rest capped re-encodes, /shapes PIL's ($(tail -1 "$TMP/bytes.out"))" 0 "$st"

# Exact decoding = the decoded data set (all JPEGs kept: the same pixels).
make_folder "$TMP/small" 0
"$CNNSCALE" prep --format imagefolder --input "$TMP/small" --output "$TMP/sj" --store jpeg 100 --shards 2 \
  --val-fraction 0.25 >/dev/null 2>&1
"$CNNSCALE" prep --format imagefolder --input "$TMP/small" --output "$TMP/sr" --store original-max 100 --shards 2 \
  --val-fraction 0.25 >/dev/null 2>&1
TRAIN=(train --model "flatten linear(3)" --augment rrc32,hflip --batch-size 8 --max-steps 6 --log-every 1 --seed 4
  --no-tensorboard --lr 0.01)
"$CNNSCALE" "${TRAIN[@]}" --data "$TMP/sr" --run-dir "$TMP/rr" >"$TMP/raw.out" 2>&1
expect_eq "train on --store original-max: exit status" 0 "$?"
"$CNNSCALE" "${TRAIN[@]}" --data "$TMP/sj" --jpeg-decode exact --run-dir "$TMP/re" >"$TMP/exact.out" 2>&1
expect_eq "train --jpeg-decode exact: exit status" 0 "$?"
losses() { grep -E '^epoch [0-9]+/[0-9]+ step' "$1" | grep -oE 'loss [0-9.]+'; }
expect_eq "exact JPEG decoding trains exactly as the decoded data set ($(losses "$TMP/raw.out" | tr '\n' ' '))" \
  "$(losses "$TMP/raw.out")" "$(losses "$TMP/exact.out")"
expect_eq "six loss values compared" 6 "$(losses "$TMP/exact.out" | wc -l)"
full_losses() { "$PY" -c 'import json,sys; print(" ".join(repr(json.loads(l)["loss"]) for l in open(sys.argv[1]) if "\"loss\"" in l))' "$1"; }
raw_losses=$(full_losses "$TMP/rr/metrics.jsonl")
expect_eq "... and in metrics.jsonl, every digit ($raw_losses)" "$raw_losses" "$(full_losses "$TMP/re/metrics.jsonl")"
expect_eq "metrics.jsonl: six losses compared" 6 "$(wc -w <<<"$raw_losses")"
evals() { grep -E '^epoch [0-9]+ test accuracy' "$1"; }
expect_eq "evaluation (whole decode, Resize + CenterCrop) as on the decoded data set ($(evals "$TMP/raw.out" | head -1))" \
  "$(evals "$TMP/raw.out")" "$(evals "$TMP/exact.out")"
expect_eq "evaluations compared" 1 "$([ "$(evals "$TMP/raw.out" | wc -l)" -ge 2 ] && echo 1)"
"$CNNSCALE" "${TRAIN[@]}" --data "$TMP/sj" >"$TMP/fast.out" 2>&1
expect_eq "train with the fast decode: exit status" 0 "$?"
expect_eq "fast decode: six finite losses" 6 "$(losses "$TMP/fast.out" | wc -l)"
"$CNNSCALE" data-bench --data "$TMP/pj" --augment rrc32,hflip --batch-size 8 --batches 4 --json "$TMP/db.json" \
  >"$TMP/db.out" 2>&1
expect_eq "data-bench on a jpeg data set: exit status" 0 "$?"
"$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))["stages_us_per_image"]; sys.exit(0 if s["decode"] > 0 else 1)' "$TMP/db.json"
expect_eq "data-bench times the decode" 0 "$?"
"$CNNSCALE" "${TRAIN[@]}" --data "$TMP/sj" --jpeg-decode turbo >"$TMP/bad.out" 2>&1
expect_eq "--jpeg-decode turbo: exit status" 2 "$?"
expect_grep "--jpeg-decode turbo: named" "^cnnscale: error: --jpeg-decode takes fast .* or exact .*, not 'turbo'" "$TMP/bad.out"
finish
