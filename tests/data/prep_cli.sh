#!/usr/bin/env bash
# `cnnscale prep` from the command line: IDX and HDF5 input, refusal to overwrite,
# --force, --verify, and every bad input ends with exit 2 and one `cnnscale: error:`
# line naming the file at fault (missing dir/shard, disagreeing dataset.json, labels
# out of range, truncated and bit-flipped shards, empty splits).
# Stopped by a signal while it writes (issue 39): SIGTERM, SIGINT and SIGHUP end it with one error
# line saying what was stopped, status 128 + the signal, its temporary directory removed and
# no output; a second signal before prep reaches its next block of samples ends it at once
# (SIGINT then SIGINT, SIGTERM then SIGINT: killed by the second, OUTPUT.tmp-PID left); what
# a SIGKILL leaves (OUTPUT.tmp-PID) is named by the next prep of that output.
# (prep is held inside its first shards by its stdout: a FIFO whose 64 KiB are full.)
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_fixture_tool"
C="$CNNSCALE"

# run NAME ARGS...: runs cnnscale, keeping stdout/stderr in $TMP/NAME.{out,err}, status in $st
run() { local n=$1; shift; "$C" "$@" >"$TMP/$n.out" 2>"$TMP/$n.err"; st=$?; }
# expect_error NAME REGEX: exit 2 and exactly one error line matching REGEX

# ---- IDX: a small raw (uncompressed) MNIST-style directory made from the real files
mkdir -p "$TMP/idx"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  zcat "/usr/share/datasets/fashion-mnist/$f.gz" >"$TMP/idx/$f"
done
run idx prep --format idx --input "$TMP/idx" --output "$TMP/fm" --shards 3 --test-shards 1 --compress gzip --chunk 128
expect_eq "prep raw IDX exit status" 0 "$st"
expect_grep "prep progress lines" '^prep: train [0-9]+/60000 samples \([0-9]+%\)' "$TMP/idx.out"
expect_grep "prep summary" 'wrote .*: 60000 train \+ 10000 test samples, 10 classes' "$TMP/idx.out"
expect_file "train shard 2 of 3" "$TMP/fm/train-00002-of-00003.h5"
expect_eq "no temporary directory left" "" "$(ls -d "$TMP"/fm.tmp-* 2>/dev/null)"
h5dump -p -H -d /images "$TMP/fm/train-00000-of-00003.h5" >"$TMP/h5dump.txt" 2>&1
expect_grep "fletcher32 filter on /images" 'CHECKSUM FLETCHER32' "$TMP/h5dump.txt"
expect_grep "gzip filter on /images" 'COMPRESSION DEFLATE' "$TMP/h5dump.txt"
expect_grep "chunk of 128 samples" 'CHUNKED \( 128, 1, 28, 28 \)' "$TMP/h5dump.txt"
run verify prep --verify "$TMP/fm"
expect_eq "verify exit status" 0 "$st"
expect_grep "verify summary" 'complete: 60000 train \+ 10000 test samples in 3 \+ 1 shards, 10 classes, all checksums match' "$TMP/verify.out"

run overwrite prep --input "$TMP/idx" --output "$TMP/fm" --shards 2
expect_error overwrite "--output $TMP/fm exists and is not empty; pass --force"
run force prep --input "$TMP/idx" --output "$TMP/fm/" --shards 2 --force
expect_eq "--force replaces the output" 0 "$st"
expect_file "new shard layout" "$TMP/fm/train-00001-of-00002.h5"
expect_eq "old shards gone" "" "$(ls "$TMP"/fm/train-*-of-00003.h5 2>/dev/null)"

rm "$TMP/idx/t10k-labels-idx1-ubyte"
run noidx prep --input "$TMP/idx" --output "$TMP/x1"
expect_error noidx "no IDX labels file for the t10k split in $TMP/idx"
zcat /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz >"$TMP/idx/t10k-labels-idx1-ubyte"
zcat /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz | head -c 5000000 >"$TMP/idx/t10k-images-idx3-ubyte"
run idxtrunc prep --input "$TMP/idx" --output "$TMP/x2"
expect_error idxtrunc "$TMP/idx/t10k-images-idx3-ubyte is truncated: it ends inside the images"
expect_eq "failed prep leaves no output" "" "$(ls -d "$TMP"/x2* 2>/dev/null)"
# A gzip file must end where its header says, with its trailer (CRC-32, length) intact:
# zlib checks it only when a read reaches the end (fuzz_prep_input found both read as good).
FM=/usr/share/datasets/fashion-mnist
rm -f "$TMP/idx/t10k-images-idx3-ubyte" "$TMP/idx/t10k-labels-idx1-ubyte"
cp "$FM/t10k-images-idx3-ubyte.gz" "$TMP/idx/"
head -c $(( $(stat -c %s "$FM/t10k-labels-idx1-ubyte.gz") - 4 )) "$FM/t10k-labels-idx1-ubyte.gz" >"$TMP/idx/t10k-labels-idx1-ubyte.gz"
run gztrailer prep --input "$TMP/idx" --output "$TMP/x2g"
expect_error gztrailer "$TMP/idx/t10k-labels-idx1-ubyte.gz is damaged \\(.*unexpected end of file\\) after its 10000 labels; download it again"
{ zcat "$FM/t10k-labels-idx1-ubyte.gz"; printf 'x'; } | gzip >"$TMP/idx/t10k-labels-idx1-ubyte.gz"
run gzlonger prep --input "$TMP/idx" --output "$TMP/x2g"
expect_error gzlonger "$TMP/idx/t10k-labels-idx1-ubyte.gz is longer than its header declares \\(10000 labels\\)"
expect_eq "failed preps leave no output" "" "$(ls -d "$TMP"/x2g* 2>/dev/null)"
# Header sizes beyond any image (once cast to int they turned negative, and two negatives
# made a positive sample size; four sizes near 2^32 overflowed the file-size check:
# fuzz_prep_input). Big-endian: magic 0x00000803, then N, H, W.
mkdir -p "$TMP/idxbig"
printf '\x00\x00\x08\x03\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff\xff\xff' >"$TMP/idxbig/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x01\x03' >"$TMP/idxbig/train-labels-idx1-ubyte"
cp "$TMP/idxbig/train-images-idx3-ubyte" "$TMP/idxbig/t10k-images-idx3-ubyte"
cp "$TMP/idxbig/train-labels-idx1-ubyte" "$TMP/idxbig/t10k-labels-idx1-ubyte"
run idxbig prep --input "$TMP/idxbig" --output "$TMP/x2h"
expect_error idxbig "train-images-idx3-ubyte declares images of 4294967295x4294967295: a size of 4294967295 is no image"
printf '\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\xff\xff\x00\x00\xff\xff' >"$TMP/idxbig/train-images-idx3-ubyte.gz.raw"
gzip -c "$TMP/idxbig/train-images-idx3-ubyte.gz.raw" >"$TMP/idxbig/train-images-idx3-ubyte.gz"
rm "$TMP/idxbig/train-images-idx3-ubyte" "$TMP/idxbig/train-images-idx3-ubyte.gz.raw"
run idxhuge prep --input "$TMP/idxbig" --output "$TMP/x2h"
expect_error idxhuge "train-images-idx3-ubyte.gz declares images of 1x65535x65535 \\(4095 MiB each\\); IDX holds small images"

# ---- HDF5 input: a small fixture, 3 + 2 shards
"$TOOL" write "$TMP/fx.h5" 500 120 10
run h5 prep --format hdf5 --input "$TMP/fx.h5" --images /x --labels /y --test-images /tx --test-labels /ty \
  --output "$TMP/good" --shards 3 --test-shards 2 --chunk 16
expect_eq "prep hdf5 exit status" 0 "$st"
run h5verify prep --verify "$TMP/good"
expect_eq "verify hdf5 data set" 0 "$st"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['splits']['train']['samples'], [s['samples'] for s in j['splits']['train']['shards']], j['classes'])" \
  "$TMP/good/dataset.json" >"$TMP/json.txt"
expect_eq "dataset.json counts" "500 [166, 167, 167] 10" "$(cat "$TMP/json.txt")"

run baddataset prep --format hdf5 --input "$TMP/fx.h5" --images /nope --labels /y --output "$TMP/x3"
expect_error baddataset "$TMP/fx.h5 has no dataset '/nope' \(--images\)"
"$TOOL" write "$TMP/badlab.h5" 100 0 10 42
run badlabel prep --format hdf5 --input "$TMP/badlab.h5" --images /x --labels /y --output "$TMP/x4" --classes 10
expect_error badlabel "label 13 of train sample 42 is not below --classes 10"
"$TOOL" write "$TMP/empty.h5" 0 0 10
run emptyin prep --format hdf5 --input "$TMP/empty.h5" --images /x --labels /y --output "$TMP/x5"
expect_error emptyin "the train input $TMP/empty.h5:/x \+ /y holds no samples"

# ---- damaged data sets (copies of the good one)
copy_good() { rm -rf "$TMP/$1"; cp -r "$TMP/good" "$TMP/$1"; }
run nodir prep --verify "$TMP/does-not-exist"
expect_error nodir "data directory $TMP/does-not-exist does not exist"

copy_good b1; rm "$TMP/b1/train-00001-of-00003.h5"
run missing prep --verify "$TMP/b1"
expect_error missing "shard $TMP/b1/train-00001-of-00003.h5 listed in .* does not exist"

copy_good b2; python3 - "$TMP/b2/dataset.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); s = j["splits"]["train"]
s["shards"][1]["samples"] += 1; s["shards"][2]["first_index"] += 1; s["samples"] += 1
json.dump(j, open(sys.argv[1], "w"))
PY
run counts prep --verify "$TMP/b2"
expect_error counts "shard $TMP/b2/train-00001-of-00003.h5 holds 167 images but $TMP/b2/dataset.json says 168"

copy_good b3; python3 - "$TMP/b3/dataset.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["sample_shape"] = [1, 8, 9]; json.dump(j, open(sys.argv[1], "w"))
PY
run shape prep --verify "$TMP/b3"
expect_error shape "shard $TMP/b3/train-00000-of-00003.h5: /images samples are 1x8x8 but .* says 1x8x9"

copy_good b4; python3 - "$TMP/b4/dataset.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["splits"]["train"]["samples"] = 7; json.dump(j, open(sys.argv[1], "w"))
PY
run sum prep --verify "$TMP/b4"
expect_error sum "$TMP/b4/dataset.json: split 'train' says 7 samples but its shards add up to 500"

copy_good b5; "$TOOL" set-label "$TMP/b5/test-00001-of-00002.h5" 3 10
run range prep --verify "$TMP/b5"
expect_error range "shard $TMP/b5/test-00001-of-00002.h5: label 10 of sample 3 .* is outside \[0, 10\)"

copy_good b6; f6="$TMP/b6/train-00002-of-00003.h5"; truncate -s $(( $(stat -c %s "$f6") * 6 / 10 )) "$f6"
run trunc prep --verify "$TMP/b6"
expect_error trunc "shard $TMP/b6/train-00002-of-00003.h5 cannot be opened as HDF5 \(.*truncated"

copy_good b7; off=$("$TOOL" chunk-offset "$TMP/b7/train-00001-of-00003.h5" /images 3)
python3 - "$TMP/b7/train-00001-of-00003.h5" "$off" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2]) + 20
with open(p, "r+b") as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0x01]))
PY
run flip prep --verify "$TMP/b7"
expect_error flip "shard $TMP/b7/train-00001-of-00003.h5 is damaged: reading images 48..63 failed \(.*[Cc]hecksum"

copy_good b8; python3 - "$TMP/b8/dataset.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["splits"]["train"] = {"samples": 0, "shards": []}; json.dump(j, open(sys.argv[1], "w"))
PY
run empty prep --verify "$TMP/b8"
expect_error empty "split 'train' of $TMP/b8 is empty"

# Implausible normalization (issue 48 item 12: accepted by --verify, and train then blamed --lr).
norm_case() {  # NAME FIELD VALUE EXPECTED
  copy_good "$1"; python3 - "$TMP/$1/dataset.json" "$2" "$3" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["normalization"][sys.argv[2]][0] = float(sys.argv[3]); json.dump(j, open(sys.argv[1], "w"))
PY
  run "$1" prep --verify "$TMP/$1"
  expect_error "$1" "$4"
  run "$1-train" train --data "$TMP/$1" --max-steps 1 --run-dir "$TMP/$1-run"
  expect_error "$1-train" "$4"
}
norm_case nmean mean 1e308 "$TMP/nmean/dataset.json: normalization.mean\\[0\\] is 1e\\+308, but pixels are normalised as x/255 in \\[0, 1\\], so a mean must be in \\[0, 1\\]"
norm_case nstd std 1e-30 "$TMP/nstd/dataset.json: normalization.std\\[0\\] is 1e-30, but a std of pixels x/255 in \\[0, 1\\] must be in \\[0.001, 1\\]"

copy_good b9; echo '{"format": "cnnscale-dataset", ' >"$TMP/b9/dataset.json"
run json prep --verify "$TMP/b9"
expect_error json "$TMP/b9/dataset.json is not valid JSON"

mkdir -p "$TMP/half.tmp-1"
run half prep --verify "$TMP/half"
expect_error half "data directory $TMP/half does not exist"

run badfmt prep --format csv --input "$TMP/idx" --output "$TMP/x6"
expect_error badfmt "--format csv is not supported; use idx, hdf5, cifar10, cifar100 or imagefolder"

# ---- stopped while writing. prep's first progress line (after the first train shard) waits
# on a full pipe, so the signal always comes while the temporary directory exists and
# before the output can be complete: no timing decides the outcome.
mkdir -p "$TMP/sigidx"
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$TMP/sigidx/"
mkfifo "$TMP/pipe"
exec 3<>"$TMP/pipe"
held_prep() {  # NAME OUTPUT: starts prep held by the full pipe, waits for OUTPUT.tmp-PID; $pid
  head -c 65536 /dev/zero >&3
  set -m  # job control: the job keeps SIGINT (a script's background job would ignore it)
  "$C" prep --format idx --input "$TMP/sigidx" --output "$2" >"$TMP/pipe" 2>"$TMP/$1.err" &
  pid=$!
  set +m
  for _ in $(seq 1 600); do
    [ -d "$2.tmp-$pid" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  bad "$1: prep made no $2.tmp-$pid in 60 s"
}
release_prep() {  # NAME: empties the pipe, waits for prep; $st
  head -c 65536 <&3 >/dev/null
  wait "$pid"
  st=$?
  cat <&3 >/dev/null & drained=$!  # the lines prep printed after the filler, if any
  sleep 0.2; kill "$drained" 2>/dev/null; wait "$drained" 2>/dev/null
}
for sig in TERM INT HUP; do  # HUP: a closed terminal or ssh session (issue 48 item 15)
  held_prep "sig$sig" "$TMP/s$sig"
  kill -"$sig" "$pid"
  release_prep "sig$sig"
  expect_eq "SIG$sig during prep: status 128 + the signal" "$((128 + $(kill -l "$sig")))" "$st"
  expect_grep "SIG$sig during prep: what was stopped" \
    "^cnnscale: error: prep stopped by SIG$sig while writing train shard [0-9]+ of 8 \([0-9]+ of 60000 train samples written\): nothing was written to $TMP/s$sig \(the partial $TMP/s$sig.tmp-$pid was removed\); run the same prep again" \
    "$TMP/sig$sig.err"
  expect_eq "SIG$sig during prep: one error line" 1 "$(grep -c '^cnnscale: error:' "$TMP/sig$sig.err")"
  expect_eq "SIG$sig during prep: no output, no temporary directory" "" "$(ls -d "$TMP/s$sig"* 2>/dev/null)"
done

# ---- two preps of one --output (issue 48 item 11: the second to start finished first, then
# the first replaced its output; both said "wrote"). While one holds OUTPUT.prep-lock the
# other is refused at once, naming the holder, with --force too; the first then finishes.
held_prep lock1 "$TMP/locked"
for force in "" --force; do
  run "lock2$force" prep --format idx --input "$TMP/sigidx" --output "$TMP/locked" $force
  expect_error "lock2$force" "another \`cnnscale prep\` is writing --output $TMP/locked \(pid and host: $pid [^)]*\); wait for it to finish, or choose another --output"
done
release_prep lock1
expect_eq "the held prep then finishes" 0 "$st"
expect_file "... with its data set" "$TMP/locked/dataset.json"
expect_eq "... and no lock left beside it" "" "$(ls -d "$TMP/locked.prep-lock" 2>/dev/null)"
ln -s /nonexistent/target "$TMP/linked.prep-lock"
run locklink prep --format idx --input "$TMP/sigidx" --output "$TMP/linked"
expect_error locklink "cannot create the lock $TMP/linked.prep-lock beside --output: .*a link or another user's file there is refused"
# A second signal 1 s or more after the first, while prep is still held (it reaches no next
# block while the pipe is full), ends it at once, the default way — a second Ctrl-C used to
# wait for that block (review of issue 39) — leaving OUTPUT.tmp-PID as a SIGKILL does. One
# within the second is the same stop delivered twice (GNU timeout signals the child and then
# its group): prep stays held and then cleans up as for one (once, any second signal killed
# it: `timeout 1.2 cnnscale prep` sometimes left OUTPUT.tmp-PID and no message). Each second
# signal is sent once the first has been taken (no longer pending in /proc/PID/status), so
# the two cannot merge into one.
pending() {  # PID SIG: SIG sent to process PID and not yet taken
  local hex
  hex=$(awk '/^ShdPnd:/ {print $2}' "/proc/$1/status" 2>/dev/null)
  [ -n "$hex" ] && (((0x$hex >> ($(kill -l "$2") - 1)) & 1))
}
ended() { [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }  # a zombie until waited for
for pair in "INT INT" "TERM INT"; do
  read -r first second <<<"$pair"
  held_prep "two$first" "$TMP/t$first"
  kill -"$first" "$pid"
  for _ in $(seq 1 600); do pending "$pid" "$first" || break; sleep 0.1; done
  sleep 1.2
  kill -"$second" "$pid"
  for _ in $(seq 1 600); do ended "$pid" && break; sleep 0.1; done
  expect_eq "SIG$first then SIG$second while prep is held: it ends at once" yes "$(ended "$pid" && echo yes)"
  release_prep "two$first"
  expect_eq "... killed by SIG$second" "$((128 + $(kill -l "$second")))" "$st"
  expect_eq "... no error line" 0 "$(grep -c '^cnnscale: error:' "$TMP/two$first.err")"
  expect_eq "... OUTPUT.tmp-PID left" "$TMP/t$first.tmp-$pid" "$(ls -d "$TMP/t$first"* 2>/dev/null | grep -v "\.prep-lock$")"
done
for pair in "TERM TERM" "INT TERM"; do  # within the second: one stop
  read -r first second <<<"$pair"
  # The time from sending the first signal to seeing the second taken bounds the time
  # between prep's two handlers from above: under 1 s the pair is "within a second" for
  # prep too. On a loaded machine (ctest -j) this test's own polling can take longer; such
  # a try proves nothing and is made again (at most 5 tries).
  for try in 1 2 3 4 5; do
    held_prep "dup$first$second" "$TMP/d$first"
    t0=$(date +%s%N)
    kill -"$first" "$pid"
    for _ in $(seq 1 600); do pending "$pid" "$first" || break; sleep 0.01; done
    kill -"$second" "$pid"
    for _ in $(seq 1 600); do pending "$pid" "$second" || break; sleep 0.01; done
    gap_ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$gap_ms" -lt 1000 ] && break
    echo "note: SIG$first then SIG$second took up to $gap_ms ms to be taken here (loaded machine): try $try again"
    release_prep "dup$first$second"
    rm -rf "$TMP/d$first"*
  done
  sleep 0.3
  expect_eq "SIG$first then SIG$second within a second: prep is still held (one stop)" no \
    "$(ended "$pid" && echo yes || echo no)"
  release_prep "dup$first$second"
  expect_eq "... status 128 + the first signal" "$((128 + $(kill -l "$first")))" "$st"
  expect_grep "... the stop is said once, naming the first" "^cnnscale: error: prep stopped by SIG$first while writing" \
    "$TMP/dup$first$second.err"
  expect_eq "... no output, no temporary directory" "" "$(ls -d "$TMP/d$first"* 2>/dev/null)"
done
held_prep kill "$TMP/sk"
kill -KILL "$pid"
release_prep kill
expect_eq "SIGKILL during prep: killed" 137 "$st"
killed=$pid
expect_eq "SIGKILL leaves OUTPUT.tmp-PID" "$TMP/sk.tmp-$killed" "$(ls -d "$TMP/sk"* 2>/dev/null | grep -v "\.prep-lock$")"
run after prep --format idx --input "$TMP/sigidx" --output "$TMP/sk" --shards 2 --test-shards 1
expect_eq "the next prep of that output: status" 0 "$st"
expect_grep "the next prep names the leftover" \
  "^cnnscale: warning: $TMP/sk.tmp-$killed is the partial output of a prep that did not finish \(no process $killed runs on this host\): it is not a data set; remove it \(rm -r $TMP/sk.tmp-$killed\)" \
  "$TMP/after.err"
expect_eq "the killed prep's lock (unlocked) is taken over and removed by the next" "" \
  "$(ls -d "$TMP/sk.prep-lock" 2>/dev/null)"
exec 3<&-
finish
