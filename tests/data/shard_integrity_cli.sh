#!/usr/bin/env bash
# shard_integrity_cli.sh — shards changed behind prep's back (issue 39 item 5), on PNGs
# written by cnnscale_imagefolder_tool and edited with h5py:
#  - two rows of a train shard's /chunk_addresses swapped, the list's own checksum made
#    right by h5py: `prep --verify` names the list, and `train` and `data-bench` on the
#    --store original-max set refuse it instead of training on the other chunk's bytes;
#    the same with only the offsets and checksums swapped, the rows keeping their indices
#    (prep lists the chunks in file order, so row 2 lists a chunk before row 1's);
#  - a /chunk_addresses that fails its own Fletcher32: --verify names it (reads, which look
#    the chunks up instead, still train exactly as on the intact set);
#  - prep's lists hold HDF5's offsets in file order, each chunk past the end of the one
#    before (what the readers require), for --store original-max, jpeg and fixed shards;
#  - a list as prep wrote it before (two columns, no chunk index): in file order, verify
#    passes and train reads through it (no warning) exactly as on the intact set; with two
#    rows swapped, verify names it and reads ignore it (a warning) and train exactly the same;
#  - dataset.json's sample_layout changed from ragged to jpeg: --verify names the layout;
#  - a stored JPEG (--store jpeg) with 64 bytes flipped, its checksums made consistent:
#    refused at open (the shard's digest no longer is dataset.json's); with dataset.json's
#    digests rewritten too (shard_tamper.rebind), `train --jpeg-decode fast` and `exact`,
#    and --verify, name sample 5.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_python "h5py, numpy" "python3-h5py python3-numpy"
C="$CNNSCALE"
R="$TMP/photos"
photo_folder "$R"
run prep "$C" prep --format imagefolder --input "$R" --output "$TMP/om" --store original-max 64 --shards 1 \
  --val-fraction 0.2 --test-shards 1
expect_eq "prep --store original-max 64 exit status" 0 "$st"
SHARD=train-00000-of-00001.h5
list() {  # DIR PYTHON: runs PYTHON with `t` the train shard's /chunk_addresses (read-write) and numpy as np
  "$PY" -c "
import sys, h5py, numpy as np
with h5py.File(sys.argv[1] + '/$SHARD', 'r+') as f:
    t = f['chunk_addresses']
    $2" "$1"
}
expect_eq "the list has more than 3 chunks and a chunk index column" "1" \
  "$(list "$TMP/om" 'print(int(t.shape[0] > 3 and t.shape[1] == 3 and (t[:, 2] == np.arange(t.shape[0])).all()))')"
in_file_order() {  # NAME DIR: every shard's list is HDF5's chunk offsets, each chunk past the end of the one before
  expect_eq "$1: every list holds HDF5's offsets in file order" "ok" "$("$PY" - "$2" <<'PY'
import glob, sys, h5py
bad, most = [], 0
for p in sorted(glob.glob(sys.argv[1] + "/*.h5")):
    with h5py.File(p, "r") as f:
        im, t = f["images"], f["chunk_addresses"][...]
        info = [im.id.get_chunk_info_by_coord((c * im.chunks[0],) + (0,) * (im.ndim - 1)) for c in range(len(t))]
        most = max(most, len(t))
        if any(int(t[c, 0]) != i.byte_offset for c, i in enumerate(info)) or \
           any(info[c].byte_offset < info[c - 1].byte_offset + info[c - 1].size for c in range(1, len(t))):
            bad.append(p)
print(" ".join(bad) or ("ok" if most > 3 else "at most %d chunks a shard" % most))
PY
)"
}
in_file_order "--store original-max" "$TMP/om"
run fixed "$C" prep --format imagefolder --input "$R" --output "$TMP/fx" --resize 32 --center-crop 32 --chunk 2 \
  --shards 1 --val-fraction 0.2 --test-shards 1
expect_eq "prep --chunk 2 (fixed size) exit status" 0 "$st"
in_file_order "fixed size" "$TMP/fx"
TRAIN=(train --model "flatten linear(3)" --augment rrc32,hflip --batch-size 8 --max-steps 4 --log-every 1 --seed 4
  --no-tensorboard --lr 0.01)
losses() { grep -oE '^epoch [0-9]+/[0-9]+ step [0-9]+/[0-9]+ loss [0-9.]+' "$1"; }
run good "$C" "${TRAIN[@]}" --data "$TMP/om" --run-dir "$TMP/r-good"
expect_eq "train on the intact set: exit status" 0 "$st"
expect_eq "four losses logged" 4 "$(losses "$TMP/good.out" | wc -l)"

# 1. Two rows swapped, as a tool could leave them (the list's own checksum made right).
cp -r "$TMP/om" "$TMP/sw"
list "$TMP/sw" 'a = t[...]; a[[1, 2]] = a[[2, 1]]; t[...] = a'
run swverify "$C" prep --verify "$TMP/sw"
expect_error swverify "shard $TMP/sw/$SHARD has a /chunk_addresses list that does not match its chunks"
run swtrain "$C" "${TRAIN[@]}" --data "$TMP/sw" --run-dir "$TMP/r-sw"
expect_error swtrain "shard $TMP/sw/$SHARD has a /chunk_addresses list that does not match its chunks \(row 1 lists chunk 2"
run swbench "$C" data-bench --data "$TMP/sw" --augment rrc32 --batch-size 8 --batches 3
expect_error swbench "shard $TMP/sw/$SHARD has a /chunk_addresses list that does not match its chunks"
# Offsets and checksums swapped but the indices kept (rows that agree with themselves):
# out of file order, refused by the readers and by --verify.
cp -r "$TMP/om" "$TMP/fg"
list "$TMP/fg" 'a = t[...]; a[[1, 2], :2] = a[[2, 1], :2]; t[...] = a'
FG="shard $TMP/fg/$SHARD has a /chunk_addresses list that does not match its chunks \(row 2 lists file offset [0-9]+, before the end of row 1's chunk at offset [0-9]+, but prep lists the chunks in file order"
run fgverify "$C" prep --verify "$TMP/fg"
expect_error fgverify "$FG"
run fgtrain "$C" "${TRAIN[@]}" --data "$TMP/fg" --run-dir "$TMP/r-fg"
expect_error fgtrain "$FG"
run fgbench "$C" data-bench --data "$TMP/fg" --augment rrc32 --batch-size 8 --batches 3
expect_error fgbench "$FG"

# 2. The list's own chunk damaged (one byte of it flipped in the file).
cp -r "$TMP/om" "$TMP/dl"
"$PY" -c '
import sys, h5py
path = sys.argv[1]
with h5py.File(path, "r") as f:
    info = f["chunk_addresses"].id.get_chunk_info(0)
with open(path, "r+b") as raw:
    raw.seek(info.byte_offset + 20); b = raw.read(1); raw.seek(info.byte_offset + 20); raw.write(bytes([b[0] ^ 0xFF]))' \
  "$TMP/dl/$SHARD"
run dlverify "$C" prep --verify "$TMP/dl"
expect_error dlverify "shard $TMP/dl/$SHARD is damaged: its /chunk_addresses list fails its checksum"
run dltrain "$C" "${TRAIN[@]}" --data "$TMP/dl" --run-dir "$TMP/r-dl"
expect_eq "train with a damaged list (chunks looked up instead): exit status" 0 "$st"
expect_eq "... and the losses of the intact set" "$(losses "$TMP/good.out")" "$(losses "$TMP/dltrain.out")"

# 3. A list of an older prep (offset and checksum, no chunk index): used in file order,
# ignored with two rows swapped.
cp -r "$TMP/om" "$TMP/old"
list "$TMP/old" 'a = t[:, :2]; del f["chunk_addresses"]; f.create_dataset("chunk_addresses", data=a, chunks=a.shape, fletcher32=True)'
expect_eq "the older list has two columns" 2 "$(list "$TMP/old" 'print(t.shape[1])')"
run oldverify "$C" prep --verify "$TMP/old"
expect_eq "--verify with an older list: exit status" 0 "$st"
expect_grep "--verify with an older list: complete" "^verify: $TMP/old is complete" "$TMP/oldverify.out"
run oldtrain "$C" "${TRAIN[@]}" --data "$TMP/old" --run-dir "$TMP/r-old"
expect_eq "train with an older list: exit status" 0 "$st"
expect_eq "... no warning (the list is used)" 0 "$(grep -c chunk_addresses "$TMP/oldtrain.err")"
expect_eq "... and the losses of the intact set" "$(losses "$TMP/good.out")" "$(losses "$TMP/oldtrain.out")"
list "$TMP/old" 'a = t[...]; a[[1, 2]] = a[[2, 1]]; t[...] = a'
run oldswverify "$C" prep --verify "$TMP/old"
expect_error oldswverify "shard $TMP/old/$SHARD is damaged: its /chunk_addresses list is out of file order \(row 2 lists file offset [0-9]+, before the end of row 1's chunk at offset [0-9]+: an older prep's list, without chunk indices, whose rows were reordered\); reads ignore it"
run oldswtrain "$C" "${TRAIN[@]}" --data "$TMP/old" --run-dir "$TMP/r-oldsw"
expect_eq "train with an older list, two rows swapped: exit status" 0 "$st"
expect_grep "... a warning: the list is ignored" "shard $TMP/old/$SHARD has a /chunk_addresses list that is out of file order .*: it is ignored and each chunk looked up" "$TMP/oldswtrain.err"
expect_eq "... and the losses of the intact set" "$(losses "$TMP/good.out")" "$(losses "$TMP/oldswtrain.out")"

# 4. dataset.json's sample_layout changed from ragged to jpeg.
cp -r "$TMP/om" "$TMP/lay"
sed -i 's/"sample_layout": "ragged"/"sample_layout": "jpeg"/' "$TMP/lay/dataset.json"
expect_eq "sample_layout edited" 1 "$(grep -c '"sample_layout": "jpeg"' "$TMP/lay/dataset.json")"
run layverify "$C" prep --verify "$TMP/lay"
expect_error layverify "shard $TMP/lay/$SHARD: sample 0 .*is not a JPEG .* but $TMP/lay/dataset.json says sample_layout jpeg"

# 5. A stored JPEG damaged inside its entropy-coded data, every checksum made consistent.
run pj "$C" prep --format imagefolder --input "$R" --output "$TMP/pj" --store jpeg 64 --shards 1 --test-shards 1 \
  --val-fraction 0.2
expect_eq "prep --store jpeg 64 exit status" 0 "$st"
in_file_order "--store jpeg" "$TMP/pj"
"$PY" - "$TMP/pj/$SHARD" 5 <<'PY'
import os, sys, h5py
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/data")
from shard_tamper import refresh_chunk_checksums
path, s = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "r+") as f:
    o, im = f["offsets"][:], f["images"]
    mid = int(o[s]) + (int(o[s + 1]) - int(o[s])) // 2
    seg = im[mid:mid + 64]; seg ^= 0x5A; im[mid:mid + 64] = seg  # HDF5 rewrites the chunks' Fletcher32
    f.flush()
    refresh_chunk_checksums(f, path)
PY
run pjdigest "$C" prep --verify "$TMP/pj"
expect_error pjdigest "shard $TMP/pj/$SHARD is not the shard $TMP/pj/dataset.json lists: its digest is"
"$PY" -c 'import os, sys; sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/data")
from shard_tamper import rebind; rebind(sys.argv[1])' "$TMP/pj"
for mode in fast exact; do
  for seed in 1 2; do  # two runs of 160 samples (20 epochs of the 24 train samples' 3 batches)
    run "pj$mode$seed" "$C" train --data "$TMP/pj" --model "flatten linear(3)" --augment rrc32,hflip --batch-size 8 \
      --max-steps 20 --seed "$seed" --no-tensorboard --no-eval --jpeg-decode "$mode" --run-dir "$TMP/r-pj$mode$seed"
    expect_error "pj$mode$seed" "shard $TMP/pj/$SHARD: sample 5 \(train sample 5\): a stored JPEG of $TMP/pj is not a readable JPEG \(Corrupt JPEG data"
  done
done
run pjverify "$C" prep --verify "$TMP/pj"
expect_error pjverify "shard $TMP/pj/$SHARD: sample 5 .* is not a readable JPEG \(Corrupt JPEG data"
finish
