#!/usr/bin/env bash
# hostile_shards_cli.sh — shards edited as an attacker would (issue 48 items 5, 6 and 7), on
# PNGs written by cnnscale_imagefolder_tool, prepped, then edited with h5py (every
# checksum made consistent), so that only the readers' own checks can tell:
#  - shards not bound to their data set (item 6): a byte copy of shard 0 in place of shard
#    1, shard 1 of another data set of the same photos, shape, labels and chunking (other
#    pixels: --resize 40), one file listed twice in dataset.json, a hard link of shard 0 as
#    shard 1: `train`, `data-bench` and `prep --verify` refuse each at open, naming the shard
#    and the cause (the copy: which shard it copies); prep's recorded digests equal
#    shard_tamper.py's own computation of them; dataset.json without digests (an older
#    prep's) still verifies and trains, with a warning that says to re-run prep;
#  - a shifted /chunk_addresses in file order: row c set to chunk c+1's offset and
#    checksum (its index kept), the last row pointing at a copy of the last chunk appended
#    to the file — rows in order, checksums valid, once trained on as every chunk's images
#    under the previous chunk's labels. `train`, `data-bench` and `prep --verify` refuse it
#    when the shard is opened, naming the shard and row 0 with the list's offset and
#    HDF5's, for fixed-size (--chunk 2) and --store original-max shards; the same with only
#    the tail shifted (rows from 3 on), where row 0 is right and the last row is not;
#  - the intact sets still train, and prep's lists anchor (row 0 and the last row are
#    HDF5's offsets, the rows back to back);
#  - two stored JPEGs of different sizes swapped in a --store jpeg shard (/offsets moved
#    with them, /shapes kept, checksums recomputed): `train --jpeg-decode exact` and
#    `fast` (three seeds), `data-bench` refuse it with exit 2 naming the shard, the sample
#    and the header's size against the recorded one; `prep --verify` names it too; swapped
#    in the test split, the evaluation at the epoch's end refuses it the same way. The swap
#    changes the shard's digest, so it is refused at open first; with dataset.json's
#    digests rewritten too (shard_tamper.rebind), the per-sample checks above refuse it.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_python "h5py, numpy" "python3-h5py python3-numpy"
C="$CNNSCALE"
R="$TMP/photos"
photo_folder "$R"
SHARD=train-00000-of-00001.h5
PREP=(prep --format imagefolder --input "$R" --shards 1 --val-fraction 0.2 --test-shards 1)
run fxprep "$C" "${PREP[@]}" --output "$TMP/fx" --resize 32 --center-crop 32 --chunk 2
expect_eq "prep --chunk 2 (fixed size) exit status" 0 "$st"
run omprep "$C" "${PREP[@]}" --output "$TMP/om" --store original-max 64
expect_eq "prep --store original-max 64 exit status" 0 "$st"
TRAIN=(train --model "flatten linear(3)" --augment rrc32,hflip --batch-size 8 --max-steps 3 --log-every 1
  --no-tensorboard --no-eval --lr 0.01)

# 6. Shards bound to their data set: two train shards of 12 samples each.
P2=(prep --format imagefolder --input "$R" --shards 2 --val-fraction 0.2 --test-shards 1 --center-crop 32)
run b2prep "$C" "${P2[@]}" --output "$TMP/b2" --resize 32
expect_eq "prep --shards 2 exit status" 0 "$st"
run o2prep "$C" "${P2[@]}" --output "$TMP/o2" --resize 40
expect_eq "prep of another data set (--resize 40) exit status" 0 "$st"
S0=train-00000-of-00002.h5
S1=train-00001-of-00002.h5
expect_eq "prep's recorded digests are shard_tamper.py's own computation of them" "same" "$("$PY" - "$TMP/b2" <<'PY'
import json, os, sys
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/data")
from shard_tamper import shard_digest
d = sys.argv[1]
j = json.load(open(d + "/dataset.json"))
shards = [sh for s in j["splits"].values() for sh in s["shards"]]
ok = len(shards) == 3 and all(sh["digest"] == shard_digest(os.path.join(d, sh["file"])) for sh in shards)
print("same" if ok else "differ: %r" % [(sh["file"], sh.get("digest")) for sh in shards])
PY
)"
run b2verify "$C" prep --verify "$TMP/b2"
expect_eq "intact: prep --verify exit status" 0 "$st"
expect_grep "intact: verify says every shard is the one dataset.json records" \
  'all checksums match, every shard the one dataset.json records$' "$TMP/b2verify.out"
# refused NAME DIR REGEX: train, data-bench and prep --verify on DIR each end with REGEX.
refused() {
  run "$1-train" "$C" "${TRAIN[@]}" --seed 4 --data "$2" --run-dir "$TMP/r-$1"
  expect_error "$1-train" "$3"
  run "$1-bench" "$C" data-bench --data "$2" --augment rrc32 --batch-size 8 --batches 3
  expect_error "$1-bench" "$3"
  run "$1-verify" "$C" prep --verify "$2"
  expect_error "$1-verify" "$3"
}
cp -r "$TMP/b2" "$TMP/cp" && cp "$TMP/cp/$S0" "$TMP/cp/$S1"
refused copy "$TMP/cp" "shard $TMP/cp/$S1 is not the shard $TMP/cp/dataset.json lists: its digest is sha256:[0-9a-f]{16}… but dataset.json records sha256:[0-9a-f]{16}… \(it is a copy of train shard $S0\); copy the whole directory again from where it was made, or re-create it with \`cnnscale prep\`"
cp -r "$TMP/b2" "$TMP/ot" && cp "$TMP/o2/$S1" "$TMP/ot/$S1"
refused other "$TMP/ot" "shard $TMP/ot/$S1 is not the shard $TMP/ot/dataset.json lists: its digest is sha256:[0-9a-f]{16}… but dataset.json records sha256:[0-9a-f]{16}… \(a file of another prep run or another data set was put in its place\)"
cp -r "$TMP/b2" "$TMP/tw"
"$PY" - "$TMP/tw/dataset.json" "$S0" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); sh = j["splits"]["train"]["shards"]
sh[1]["file"], sh[1]["digest"] = sys.argv[2], sh[0]["digest"]
json.dump(j, open(sys.argv[1], "w"))
PY
refused twice "$TMP/tw" "$TMP/tw/dataset.json lists one file twice: train shard $S0 and train shard $S0; every shard must be a file of its own — re-create it with \`cnnscale prep\`"
cp -r "$TMP/b2" "$TMP/hl" && ln -f "$TMP/hl/$S0" "$TMP/hl/$S1"
refused link "$TMP/hl" "$TMP/hl/dataset.json lists one file twice: train shard $S0 and train shard $S1 are the same file \(a link\)"
# An older prep's data set (no digests): verified and trained, with the warning.
cp -r "$TMP/b2" "$TMP/ub"
"$PY" - "$TMP/ub/dataset.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for s in j["splits"].values():
    for sh in s["shards"]: del sh["digest"]
json.dump(j, open(sys.argv[1], "w"))
PY
UBW="cnnscale: warning: $TMP/ub/dataset.json records no digest for 3 shard\(s\) \(an older cnnscale prep's data set\): a shard file swapped in goes undetected; re-run \`cnnscale prep\` to bind the shards to their data set"
run ubverify "$C" prep --verify "$TMP/ub"
expect_eq "no digests: prep --verify exit status" 0 "$st"
expect_grep "no digests: verify warns" "$UBW" "$TMP/ubverify.err"
expect_grep "no digests: verify does not claim the binding" 'all checksums match$' "$TMP/ubverify.out"
run ubtrain "$C" "${TRAIN[@]}" --seed 4 --data "$TMP/ub" --run-dir "$TMP/r-ub"
expect_eq "no digests: train exit status" 0 "$st"
expect_grep "no digests: train warns" "$UBW" "$TMP/ubtrain.err"

# prep's lists: row 0 and the last row are HDF5's offsets, every row right after the chunk before.
for set in fx om; do
  expect_eq "$set: the list is anchored and back to back" "ok" "$("$PY" - "$TMP/$set/$SHARD" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    im, t = f["images"], f["chunk_addresses"][...]
    info = [im.id.get_chunk_info_by_coord((c * im.chunks[0],) + (0,) * (im.ndim - 1)) for c in range(len(t))]
    good = len(t) > 3 and all(int(t[c, 0]) == i.byte_offset for c, i in enumerate(info)) and \
        all(info[c].byte_offset == info[c - 1].byte_offset + info[c - 1].size for c in range(1, len(t)))
print("ok" if good else "no: %d rows" % len(t))
PY
)"
done

# shift DIR FROM: rows FROM.. of the train shard's list moved up by one chunk (offset and
# checksum; indices kept), the last row pointing at a copy of the last chunk appended to
# the file. Prints HDF5's offset of chunk FROM.
shift_list() {
  "$PY" - "$1/$SHARD" "$2" <<'PY'
import os, sys, h5py
path, first = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "r+") as f:
    t = f["chunk_addresses"]; rows = t[...]; n = len(rows)
    last = f["images"].id.get_chunk_info(n - 1)
    rows[first:n - 1, :2] = rows[first + 1:n, :2]
    t[...] = rows
with open(path, "rb") as raw:
    raw.seek(last.byte_offset); copy = raw.read(last.size)
size = os.path.getsize(path)
with h5py.File(path, "r+") as f:  # the copy's offset: the end of the file as HDF5 leaves it
    t = f["chunk_addresses"]; row = t[n - 1]; row[0] = size; t[n - 1] = row
assert os.path.getsize(path) == size, "h5py moved the end of the file"
with open(path, "ab") as raw:
    raw.write(copy)
with h5py.File(path, "r") as f:
    t = f["chunk_addresses"][...]
    assert all(t[c, 0] < t[c + 1, 0] for c in range(n - 1)) and (t[:, 2] == range(n)).all()
    print(f["images"].id.get_chunk_info(first).byte_offset)
PY
}
for set in fx om; do
  run "${set}good" "$C" "${TRAIN[@]}" --seed 4 --data "$TMP/$set" --run-dir "$TMP/r-${set}good"
  expect_eq "$set: train on the intact set: exit status" 0 "$st"
  for from in 0 3; do
    D="$TMP/$set-shift$from"
    cp -r "$TMP/$set" "$D"
    off=$(shift_list "$D" "$from")
    expect_grep "$set: shifted from row $from: HDF5's offset of chunk $from" "^[0-9]+$" <(echo "$off")
    # Row 0 is checked first: its offset (shifted) or, when only the tail moved, the last row's.
    if [ "$from" = 0 ]; then
      WHY="row 0 says file offset [0-9]+, HDF5 says $off: the list was edited or damaged"
    else
      WHY="row [0-9]+ says file offset [0-9]+, HDF5 says [0-9]+: the list was edited or damaged"
    fi
    MSG="shard $D/$SHARD has a /chunk_addresses list that does not match its chunks \($WHY\): re-create the data set with \`cnnscale prep\`"
    run "$set$from-train" "$C" "${TRAIN[@]}" --seed 4 --data "$D" --run-dir "$TMP/r-$set$from"
    expect_error "$set$from-train" "$MSG"
    run "$set$from-bench" "$C" data-bench --data "$D" --augment rrc32 --batch-size 8 --batches 3
    expect_error "$set$from-bench" "$MSG"
    run "$set$from-verify" "$C" prep --verify "$D"
    expect_error "$set$from-verify" "$MSG"
  done
done

# 7. Two stored JPEGs of different sizes swapped, /offsets moved with them, /shapes kept.
run pjprep "$C" "${PREP[@]}" --output "$TMP/pj" --store jpeg 64
expect_eq "prep --store jpeg 64 exit status" 0 "$st"
run pjgood "$C" "${TRAIN[@]}" --seed 4 --data "$TMP/pj" --run-dir "$TMP/r-pjgood"
expect_eq "--store jpeg: train on the intact set: exit status" 0 "$st"
# swap_jpegs SHARD: the first two adjacent samples of different sizes swapped (their bytes,
# /offsets with them; /shapes and labels kept; every checksum recomputed). Prints
# "A WxH(header of A now) WxH(recorded for A) B".
swap_jpegs() {
  "$PY" - "$1" <<'PY'
import os, sys, h5py, numpy as np
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/data")
from shard_tamper import refresh_chunk_checksums
path = sys.argv[1]
with h5py.File(path, "r+") as f:
    o, sh, im = f["offsets"][...], f["shapes"][...], f["images"]
    a = next(i for i in range(len(sh) - 1) if (sh[i, 1:] != sh[i + 1, 1:]).any())
    b = a + 1
    ja, jb = im[o[a]:o[a + 1]], im[o[b]:o[b + 1]]
    im[o[a]:o[b + 1]] = np.concatenate([jb, ja])  # HDF5 rewrites the chunks' Fletcher32
    o[b] = o[a] + len(jb); f["offsets"][...] = o
    f.flush()
    refresh_chunk_checksums(f, path)
    # sample a now holds b's JPEG (b's size), recorded as a's size; and the reverse
    print(a, "%dx%d" % (sh[b, 2], sh[b, 1]), "%dx%d" % (sh[a, 2], sh[a, 1]), b)
PY
}
cp -r "$TMP/pj" "$TMP/sw"
SIZES=$(swap_jpegs "$TMP/sw/$SHARD")
# The swap changed the shard's digest: refused at open, before any sample is read.
run swdigest "$C" prep --verify "$TMP/sw"
expect_error swdigest "shard $TMP/sw/$SHARD is not the shard $TMP/sw/dataset.json lists: its digest is"
rebind() { "$PY" -c 'import os, sys; sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/data")
from shard_tamper import rebind; rebind(sys.argv[1])' "$1"; }
rebind "$TMP/sw"  # and dataset.json rewritten to match: the samples' own checks remain
read -r A HA RA B <<<"$SIZES"
expect_grep "two samples of different sizes swapped (sample $A: a ${HA:-?} JPEG recorded ${RA:-?})" \
  "^[0-9]+ [0-9]+x[0-9]+ [0-9]+x[0-9]+ [0-9]+$" <(echo "$SIZES")
# Either sample may be met first: sample A holds a HA JPEG recorded RA, sample B the reverse.
SWMSG="shard $TMP/sw/$SHARD: sample ($A \(train sample $A\): a stored JPEG of $TMP/sw is a $HA JPEG by its header but its /shapes entry says $RA|$B \(train sample $B\): a stored JPEG of $TMP/sw is a $RA JPEG by its header but its /shapes entry says $HA); the shard is damaged — copy it again or re-create the data set with \`cnnscale prep\`"
for mode in exact fast; do
  for seed in 1 2 3; do  # each run reads all 24 train samples (3 batches of 8)
    run "sw$mode$seed" "$C" "${TRAIN[@]}" --data "$TMP/sw" --jpeg-decode "$mode" --seed "$seed" \
      --run-dir "$TMP/r-sw$mode$seed"
    expect_error "sw$mode$seed" "$SWMSG"
  done
done
run swbench "$C" data-bench --data "$TMP/sw" --augment rrc32,hflip --batch-size 8 --batches 3
expect_error swbench "$SWMSG"
run swverify "$C" prep --verify "$TMP/sw"
expect_error swverify "shard $TMP/sw/$SHARD: sample ($A|$B) \(train sample ($A|$B)\) is a [0-9]+x[0-9]+ JPEG but its /shapes entry says"
# The same in the test split: evaluation (at the epoch's end) decodes whole, and refuses it.
cp -r "$TMP/pj" "$TMP/swt"
TSHARD=test-00000-of-00001.h5
read -r A HA RA B <<<"$(swap_jpegs "$TMP/swt/$TSHARD")"
rebind "$TMP/swt"
run swteval "$C" train --model "flatten linear(3)" --augment rrc32,hflip --batch-size 8 --max-steps 3 \
  --no-tensorboard --seed 1 --data "$TMP/swt" --run-dir "$TMP/r-swteval"
expect_error swteval "shard $TMP/swt/$TSHARD: sample ($A \(test sample $A\): a stored JPEG of $TMP/swt is a $HA JPEG by its header but its /shapes entry says $RA|$B \(test sample $B\): a stored JPEG of $TMP/swt is a $RA JPEG by its header but its /shapes entry says $HA); the shard is damaged"
finish
