#!/usr/bin/env bash
# data_compare.sh — cnnscale's image input path against PyTorch's, side by side on the
# same JPEGs, the same transforms and the same core count (docs/performance.md, "Image
# data path"):
#   bench/data_compare.sh [BUILD_DIR] [THREADS] [COUNT] [STEPS]   (defaults: build 2 400 30)
# 1. COUNT photo-like JPEGs, 256–500 px sides (build/bin/data_bench make-jpegs);
# 2. decode images/s: cnnscale's decode_image (libjpeg-turbo) vs PIL convert("RGB");
#    cnnscale prep --store original-max 500 end to end (decode + HDF5 write) images/s;
# 3. training data path samples/s, batch 64, one rank with --data-threads THREADS
#    (reader thread + THREADS−1 workers, prepped data in memory: --cache memory) vs
#    DataLoader(num_workers=THREADS) for rrc224,hflip (ImageFolder decoding JPEGs, and
#    PIL images held in memory) and crop32pad4,hflip (32×32 uint8 in memory, as CIFAR10);
# 4. `cnnscale data-bench --augment rrc224,hflip` on the shards (no cache: the reader
#    threads read the files) against ImageFolder, images/s and images per CPU-second.
# Needs /usr/bin/python3 with torch + torchvision for the PyTorch column.
set -eu
BUILD=${1:-build}
T=${2:-2}
N=${3:-400}
STEPS=${4:-30}
W=$(mktemp -d /tmp/cnnscale-databench.XXXXXX)
trap 'rm -rf "$W"' EXIT
DB="$BUILD/bin/data_bench"
C="$BUILD/bin/cnnscale"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); threads $T, $N JPEGs, $STEPS batches of 64"
"$DB" make-jpegs "$W/jpegs" "$N" 7
declare -A ours theirs
ours[decode1]=$("$DB" decode "$W/jpegs" 1 | sed -n 's/.*: \([0-9]*\) images\/s,.*/\1/p')
ours[decode]=$("$DB" decode "$W/jpegs" "$T" | sed -n 's/.*: \([0-9]*\) images\/s,.*/\1/p')
t0=$(date +%s.%N)
"$C" prep --format imagefolder --input "$W/jpegs" --store original-max 500 --threads "$T" --shards 2 \
  --output "$W/ragged" >/dev/null
ours[prep]=$(python3 -c "print(round($N / ($(date +%s.%N) - $t0)))")
"$C" prep --format imagefolder --input "$W/jpegs" --resize 32 --center-crop 32 --threads "$T" --shards 2 \
  --output "$W/c32" >/dev/null
ours[rrc]=$("$DB" train "$W/ragged" rrc224,hflip "$T" 64 "$STEPS" | sed -n 's/.*: \([0-9]*\) samples\/s/\1/p')
# The training reader as `cnnscale data-bench` drives it, read from the shards (no cache).
"$C" data-bench --data "$W/ragged" --augment rrc224,hflip --data-threads "$T" --batches "$STEPS" \
  --json "$W/db.json" >/dev/null
read -r ours[bench] ours[bench_cpu] < <(python3 -c "import json; j=json.load(open('$W/db.json')); print(round(j['images_per_s']), round(j['images_per_cpu_s']))")
ours[crop]=$("$DB" train "$W/c32" crop32pad4,hflip "$T" 64 "$((STEPS * 10))" | sed -n 's/.*: \([0-9]*\) samples\/s/\1/p')
if /usr/bin/python3 -c 'import torchvision' 2>/dev/null; then
  /usr/bin/python3 "$(dirname "$0")/data_compare_torch.py" "$W/jpegs" "$T" 64 "$STEPS" >"$W/torch.txt"
  while read -r _ k v _; do theirs[$k]=$v; done < <(grep '^RESULT' "$W/torch.txt")
  /usr/bin/python3 "$(dirname "$0")/data_compare_torch.py" "$W/jpegs" 1 64 5 decode-only | grep '^RESULT decode' >"$W/torch1.txt"
  theirs[decode1]=$(awk '{print $3}' "$W/torch1.txt")
fi
ratio() { if [ -n "${2:-}" ]; then python3 -c "print(f'{$1 / $2:.2f}x')"; else echo "n/a"; fi; }
printf '%-58s %12s %12s %8s\n' "measurement ($T thread(s) unless said)" cnnscale PyTorch ratio
row() { printf '%-58s %12s %12s %8s\n' "$1" "$2" "${3:-n/a}" "$(ratio "$2" "${3:-}")"; }
row "JPEG decode, 1 thread, images/s (PIL convert RGB)" "${ours[decode1]}" "${theirs[decode1]:-}"
row "JPEG decode, images/s" "${ours[decode]}" "${theirs[decode]:-}"
row "prep --store original-max 500 (decode+write), images/s" "${ours[prep]}" ""
row "rrc224,hflip samples/s vs ImageFolder (JPEG decode/sample)" "${ours[rrc]}" "${theirs[rrc_folder]:-}"
row "rrc224,hflip samples/s vs PIL images in memory" "${ours[rrc]}" "${theirs[rrc_memory]:-}"
row "data-bench rrc224,hflip (shards, no cache) vs ImageFolder" "${ours[bench]}" "${theirs[rrc_folder]:-}"
row "  the same, samples per CPU-second" "${ours[bench_cpu]}" "${theirs[rrc_folder_cpu]:-}"
row "crop32pad4,hflip samples/s vs uint8 32x32 in memory" "${ours[crop]}" "${theirs[crop32]:-}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
