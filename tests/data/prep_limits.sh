#!/usr/bin/env bash
# `cnnscale prep` against inputs and disks that lie or run out:
#  - an IDX header claiming 4.29e9 items in a 108-byte file (raw and gzip) is refused
#    naming the file, before anything of that size is allocated (`ulimit -v` 2 GiB
#    turns an allocation into a failure here);
#  - X and X.gz both present: used when they hold the same bytes, refused when not;
#  - a full disk (a 3 MiB tmpfs, root only) gives the OS's reason, not HDF5 internals,
#    and leaves nothing behind;
#  - a disk that fills while a --store jpeg image folder is written (a 20 MiB tmpfs with
#    85 % and 95 % of the data set's size free, and 50 %): the same one error line and exit
#    status 2 — it once went on to a segfault in HDF5's exit handler (exit 139: issue 39).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
SRC=/usr/share/datasets/fashion-mnist
[ -r "$SRC/t10k-labels-idx1-ubyte.gz" ] || { echo "SKIP: $SRC not installed (dataset-fashion-mnist)"; exit 77; }
run() { local n=$1; shift; ( ulimit -v 2000000; "$CNNSCALE" "$@" >"$TMP/$n.out" 2>"$TMP/$n.err" ); st=$?; }
expect_error() {  # RUN LABEL REGEX: status 2 and exactly one error line matching REGEX
  expect_eq "$2: status" 2 "$st"
  expect_grep "$2: message" "^cnnscale: error: .*$3" "$TMP/$1.err"
  expect_eq "$2: one error line" 1 "$(grep -c '^cnnscale: error:' "$TMP/$1.err")"
}
# lying_idx DIR: train labels (108 bytes) and images headers claiming 0xFFFFFFFF items
lying_idx() {
  mkdir -p "$1"
  python3 - "$1" <<'PY'
import struct, sys
d = sys.argv[1]
open(d + "/train-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, 0xFFFFFFFF) + bytes(100))
open(d + "/train-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, 0xFFFFFFFF, 28, 28) + bytes(784))
PY
  cp "$SRC"/t10k-*.gz "$1/"
}

# 1. Raw files: the size check names the file and both sizes.
lying_idx "$TMP/raw"
run raw prep --format idx --input "$TMP/raw" --output "$TMP/raw-out"
expect_error raw "lying raw IDX" "$TMP/raw/train-images-idx3-ubyte is truncated: it ends inside the images \(its header declares 4294967295 images, .* but the file is 800 bytes\)"
# The labels file alone lying (images true): named too.
zcat "$SRC/train-images-idx3-ubyte.gz" >"$TMP/raw/train-images-idx3-ubyte"
run rawl prep --format idx --input "$TMP/raw" --output "$TMP/raw-out"
expect_error rawl "lying raw labels" "$TMP/raw/train-labels-idx1-ubyte is truncated: it ends inside the labels \(its header declares 4294967295 labels, .* but the file is 108 bytes\)"

# 2. Gzip files: the length shows only while reading; the error comes at the real end.
lying_idx "$TMP/gz"
gzip "$TMP/gz/train-labels-idx1-ubyte" "$TMP/gz/train-images-idx3-ubyte"
run gz prep --format idx --input "$TMP/gz" --output "$TMP/gz-out"
expect_error gz "lying gzip IDX" "$TMP/gz/train-labels-idx1-ubyte.gz is truncated or damaged: its header declares 4294967295 labels"
for n in raw rawl gz; do
  if grep -Eq 'bad_alloc|Aborted|out of memory' "$TMP/$n.err"; then bad "$n: no allocation of the claimed size"; else ok "$n: no allocation of the claimed size"; fi
done

# 3. Raw and .gz side by side: the same bytes are fine, different ones are refused.
mkdir -p "$TMP/both"
cp "$SRC"/*.gz "$TMP/both/"
zcat "$SRC/t10k-labels-idx1-ubyte.gz" >"$TMP/both/t10k-labels-idx1-ubyte"
run same prep --format idx --input "$TMP/both" --output "$TMP/both-out"
expect_eq "identical X and X.gz: status" 0 "$st"
printf '\x07' | dd of="$TMP/both/t10k-labels-idx1-ubyte" bs=1 seek=100 conv=notrunc 2>/dev/null
run differ prep --format idx --input "$TMP/both" --output "$TMP/both-out2"
expect_error differ "different X and X.gz" "$TMP/both holds both t10k-labels-idx1-ubyte and t10k-labels-idx1-ubyte.gz, and they differ"

# 4. A full disk, for real: a 3 MiB tmpfs (needs root to mount).
if [ "$(id -u)" != 0 ]; then
  echo "SKIP (part 4): mounting a small tmpfs needs root"
else
  mkdir -p "$TMP/small"
  if mount -t tmpfs -o size=3m tmpfs "$TMP/small" 2>"$TMP/mount.err"; then
    trap 'umount "$TMP/small" 2>/dev/null; rm -rf "$TMP"' EXIT
    run full prep --format idx --input "$SRC" --output "$TMP/small/fm" --shards 2
    expect_error full "disk full" "No space left on device; free space on that file system"
    if grep -q 'bytes actually written\|file descriptor =\|errno =' "$TMP/full.err"; then bad "disk full: no HDF5 internals"; sed 's/^/    | /' "$TMP/full.err"; else ok "disk full: no HDF5 internals"; fi
    expect_eq "disk full: nothing left behind" "" "$(ls -A "$TMP/small")"
    umount "$TMP/small"
  else
    echo "SKIP (part 4): cannot mount tmpfs: $(cat "$TMP/mount.err")"
  fi
fi

# 5. The disk fills in the middle of an image folder's shards (root only). A failed write
# left HDF5 objects open; HDF5 1.10 frees a file whose close fails on the full disk but keeps
# its id, and its exit handler then closed it again: SIGSEGV after the right message.
TOOL="$CNNSCALE_BUILD/tests/cnnscale_imagefolder_tool"
if [ "$(id -u)" != 0 ]; then
  echo "SKIP (part 5): mounting a small tmpfs needs root"
else
  P="$TMP/photos"
  for i in $(seq 0 59); do
    mkdir -p "$P/c$((i % 3))"
    "$TOOL" png "$P/c$((i % 3))/$i.png" $((200 + i)) $((180 + i)) 3 "$i"
  done
  PREP=(prep --format imagefolder --input "$P" --store jpeg 256 --val-fraction 0.2 --shards 2 --test-shards 1)
  run whole "${PREP[@]}" --output "$TMP/whole"
  expect_eq "image folder prep on a roomy disk: status" 0 "$st"
  size=$(du -sb "$TMP/whole" | cut -f1)
  mkdir -p "$TMP/fills"
  if mount -t tmpfs -o size=20m tmpfs "$TMP/fills" 2>"$TMP/mount.err"; then
    trap 'umount "$TMP/fills" 2>/dev/null; rm -rf "$TMP"' EXIT
    for pct in 85 95 50; do
      rm -rf "$TMP/fills"/*
      head -c $((20 * 1024 * 1024 - size * pct / 100)) /dev/zero >"$TMP/fills/filler"
      run "fill$pct" "${PREP[@]}" --output "$TMP/fills/ds"
      expect_error "fill$pct" "disk full with $pct % of the data set's size free" "No space left on device; free space on that file system"
      expect_eq "disk full with $pct % free: only the filler is left" "filler" "$(ls -A "$TMP/fills")"
    done
    umount "$TMP/fills"
  else
    echo "SKIP (part 5): cannot mount tmpfs: $(cat "$TMP/mount.err")"
  fi
fi
finish
