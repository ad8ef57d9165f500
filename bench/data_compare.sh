#!/usr/bin/env bash
# data_compare.sh — cnnscale's image input path against PyTorch's, side by side on the
# same JPEGs, the same transforms and the same core count (docs/performance.md, "Image
# data path"):
#   bench/data_compare.sh [BUILD_DIR] [THREADS] [COUNT] [STEPS] [SIDE]   (defaults: build 2 400 30 500)
# 1. COUNT photo-like JPEGs, 256–500 px sides (build/bin/data_bench make-jpegs);
# 2. decode images/s: cnnscale's decode_image (libjpeg-turbo) vs PIL convert("RGB");
#    cnnscale prep --store original-max 500 end to end (decode + HDF5 write) images/s;
# 3. training data path samples/s, batch 64, one rank with --data-threads THREADS
#    (reader thread + THREADS−1 workers, prepped data in memory: --cache memory) vs
#    DataLoader(num_workers=THREADS) for rrc224,hflip (ImageFolder decoding JPEGs, and
#    PIL images held in memory) and crop32pad4,hflip (32×32 uint8 in memory, as CIFAR10);
# 4. `cnnscale data-bench --augment rrc224,hflip` on the shards (no cache: the reader
#    threads read the files) against ImageFolder, images/s and images per CPU-second;
#    the same on `prep --store jpeg SIDE` (--jpeg-decode fast and exact) and the bytes;
# 5. with Debian's python3-ffcv: FFCV's Loader on .beton files of the same photos (raw
#    and JPEG, max side SIDE), bench/ffcv_compare.py.
# Needs /usr/bin/python3 with torch + torchvision for the PyTorch column.
set -eu
BUILD=${1:-build}
T=${2:-2}
N=${3:-400}
STEPS=${4:-30}
SIDE=${5:-500}  # --store original-max / jpeg S
W=$(mktemp -d /tmp/cnnscale-databench.XXXXXX)
trap 'rm -rf "$W"' EXIT
DB="$BUILD/bin/data_bench"
C="$BUILD/bin/cnnscale"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); threads $T, $N JPEGs, $STEPS batches of 64"
"$DB" make-jpegs "$W/jpegs" "$N" 7
declare -A ours theirs ffcv
ours[decode1]=$("$DB" decode "$W/jpegs" 1 | sed -n 's/.*: \([0-9]*\) images\/s,.*/\1/p')
ours[decode]=$("$DB" decode "$W/jpegs" "$T" | sed -n 's/.*: \([0-9]*\) images\/s,.*/\1/p')
t0=$(date +%s.%N)
"$C" prep --format imagefolder --input "$W/jpegs" --store original-max "$SIDE" --threads "$T" --shards 2 \
  --output "$W/ragged" >/dev/null
ours[prep]=$(python3 -c "print(round($N / ($(date +%s.%N) - $t0)))")
"$C" prep --format imagefolder --input "$W/jpegs" --resize 32 --center-crop 32 --threads "$T" --shards 2 \
  --output "$W/c32" >/dev/null
ours[rrc]=$("$DB" train "$W/ragged" rrc224,hflip "$T" 64 "$STEPS" | sed -n 's/.*: \([0-9]*\) samples\/s/\1/p')
# The training reader as `cnnscale data-bench` drives it, read from the shards (no cache).
"$C" data-bench --data "$W/ragged" --augment rrc224,hflip --data-threads "$T" --batches "$STEPS" \
  --json "$W/db.json" >/dev/null
read -r ours[bench] ours[bench_cpu] < <(python3 -c "import json; j=json.load(open('$W/db.json')); print(round(j['images_per_s']), round(j['images_per_cpu_s']))")
# The same photos kept as JPEG bytes (prep --store jpeg), decoded by the reader: fast and exact.
"$C" prep --format imagefolder --input "$W/jpegs" --store jpeg "$SIDE" --threads "$T" --shards 2 --output "$W/jpeg" >/dev/null
for mode in fast exact; do
  "$C" data-bench --data "$W/jpeg" --augment rrc224,hflip --data-threads "$T" --batches "$STEPS" --jpeg-decode $mode \
    --json "$W/dbj.json" >/dev/null
  read -r ours[jpeg_$mode] ours[jpeg_${mode}_cpu] < <(python3 -c "import json; j=json.load(open('$W/dbj.json')); print(round(j['images_per_s']), round(j['images_per_cpu_s']))")
done
ours[jpeg_bytes]=$(du -sb "$W/jpeg" | cut -f1)
ours[raw_bytes]=$(du -sb "$W/ragged" | cut -f1)
ours[folder_bytes]=$(du -sb "$W/jpegs" | cut -f1)
ours[crop]=$("$DB" train "$W/c32" crop32pad4,hflip "$T" 64 "$((STEPS * 10))" | sed -n 's/.*: \([0-9]*\) samples\/s/\1/p')
if /usr/bin/python3 -c 'import torchvision' 2>/dev/null; then
  /usr/bin/python3 "$(dirname "$0")/data_compare_torch.py" "$W/jpegs" "$T" 64 "$STEPS" >"$W/torch.txt"
  while read -r _ k v _; do theirs[$k]=$v; done < <(grep '^RESULT' "$W/torch.txt")
  /usr/bin/python3 "$(dirname "$0")/data_compare_torch.py" "$W/jpegs" 1 64 5 decode-only | grep '^RESULT decode' >"$W/torch1.txt"
  theirs[decode1]=$(awk '{print $3}' "$W/torch1.txt")
fi
if /usr/bin/python3 -c 'import ffcv' 2>/dev/null; then  # Debian's python3-ffcv
  /usr/bin/python3 "$(dirname "$0")/ffcv_compare.py" "$W/jpegs" "$T" "$STEPS" "$SIDE" >"$W/ffcv.txt" 2>"$W/ffcv.err" ||
    { echo "ffcv_compare.py failed:"; tail -5 "$W/ffcv.err"; }
  while read -r _ k v c _ b; do ffcv[$k]=$v; ffcv[${k}_cpu]=$c; ffcv[${k}_bytes]=$b; done < <(grep '^RESULT' "$W/ffcv.txt")
fi
ratio() { if [ -n "${2:-}" ]; then python3 -c "print(f'{$1 / $2:.2f}x')"; else echo "n/a"; fi; }
printf '%-58s %12s %12s %8s\n' "measurement ($T thread(s) unless said)" cnnscale PyTorch ratio
row() { printf '%-58s %12s %12s %8s\n' "$1" "$2" "${3:-n/a}" "$(ratio "$2" "${3:-}")"; }
row "JPEG decode, 1 thread, images/s (PIL convert RGB)" "${ours[decode1]}" "${theirs[decode1]:-}"
row "JPEG decode, images/s" "${ours[decode]}" "${theirs[decode]:-}"
row "prep --store original-max $SIDE (decode+write), images/s" "${ours[prep]}" ""
row "rrc224,hflip samples/s vs ImageFolder (JPEG decode/sample)" "${ours[rrc]}" "${theirs[rrc_folder]:-}"
row "rrc224,hflip samples/s vs PIL images in memory" "${ours[rrc]}" "${theirs[rrc_memory]:-}"
row "data-bench rrc224,hflip (shards, no cache) vs ImageFolder" "${ours[bench]}" "${theirs[rrc_folder]:-}"
row "  the same, samples per CPU-second" "${ours[bench_cpu]}" "${theirs[rrc_folder_cpu]:-}"
row "crop32pad4,hflip samples/s vs uint8 32x32 in memory" "${ours[crop]}" "${theirs[crop32]:-}"
row "--store jpeg, --jpeg-decode fast vs ImageFolder" "${ours[jpeg_fast]}" "${theirs[rrc_folder]:-}"
row "  the same, samples per CPU-second" "${ours[jpeg_fast_cpu]}" "${theirs[rrc_folder_cpu]:-}"
row "--store jpeg, --jpeg-decode exact per CPU-second" "${ours[jpeg_exact_cpu]}" "${theirs[rrc_folder_cpu]:-}"
echo "bytes: JPEG folder ${ours[folder_bytes]}, --store jpeg $SIDE ${ours[jpeg_bytes]}, --store original-max $SIDE ${ours[raw_bytes]}"
if [ -n "${ffcv[ffcv_raw]:-}" ]; then
  printf '%-58s %12s %12s %8s\n' "measurement vs FFCV (same files, max side $SIDE)" cnnscale FFCV ratio
  frow() { printf '%-58s %12s %12s %8s\n' "$1" "$2" "$3" "$(ratio "$2" "$3")"; }
  frow "raw pixels, rrc224+flip+normalise, images/s" "${ours[bench]}" "${ffcv[ffcv_raw]}"
  frow "raw pixels, images per CPU-second" "${ours[bench_cpu]}" "${ffcv[ffcv_raw_cpu]}"
  frow "JPEG (fast decode), images/s" "${ours[jpeg_fast]}" "${ffcv[ffcv_jpeg]}"
  frow "JPEG (fast decode), images per CPU-second" "${ours[jpeg_fast_cpu]}" "${ffcv[ffcv_jpeg_cpu]}"
  frow "storage bytes, raw (theirs .beton)" "${ours[raw_bytes]}" "${ffcv[ffcv_raw_bytes]}"
  frow "storage bytes, JPEG (theirs .beton)" "${ours[jpeg_bytes]}" "${ffcv[ffcv_jpeg_bytes]}"
else
  echo "FFCV: not installed (Debian: apt-get install python3-ffcv), its rows skipped"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
