#!/usr/bin/env bash
# data_bench_cli.sh — `cnnscale data-bench` (issue 27 item 1) on a small JPEG ImageFolder
# prepped with --store original-max 64 and read with --augment rrc32,hflip:
#  1. one rank: the summary lines, and --json with images = batches × batch, positive rates,
#     bytes read per image > 0 and the delivered image's bytes (3·32·32); where the time
#     goes: read, checksum, augment and normalise timed, no HDF5 lock wait (direct reads);
#  2. two ranks under mpiexec: world_size 2 and twice the images;
#  3. --cache memory with a warm-up of one epoch: the timed batches read (almost) nothing from
#     files — under 5 % of the uncached bytes per image;
#  4. a training run on that data that waits for input says so (progress line, warning,
#     run.json data_wait_share); a compute-bound one waits far less;
#  5. errors: no --data, a missing directory, --batches 0, --json at a FIFO on 2 ranks — exit 2,
#     one `cnnscale: error:` line;
#  6. `cnnscale report --data-bench` on that run: the reader's rate per rank from the JSON,
#     the run's consumption, the cores per rank; a file that is not data-bench's is refused.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
PY=""  # a python with PIL (Debian's python3-pil; a pyenv shim first on PATH may lack it)
for p in python3 /usr/bin/python3; do "$p" -c 'import PIL' 2>/dev/null && { PY=$p; break; }; done
if [ -z "$PY" ]; then echo "SKIP: no python3 with PIL (Debian: apt-get install python3-pil)"; exit 77; fi
"$PY" - "$TMP/jpegs" <<'PY'
import os, random, sys
from PIL import Image
root, rng = sys.argv[1], random.Random(5)
for i in range(80):
    d = os.path.join(root, "train", "c%d" % (i % 4))
    os.makedirs(d, exist_ok=True)
    w, h = rng.randint(48, 96), rng.randint(48, 96)
    img = Image.new("RGB", (w, h))
    img.putdata([((x * 7 + i) % 256, (y * 5) % 256, (x * y + i) % 256) for y in range(h) for x in range(w)])
    img.save(os.path.join(d, "%03d.jpg" % i), quality=90)
PY
"$CNNSCALE" prep --format imagefolder --input "$TMP/jpegs" --output "$TMP/prep" --store original-max 64 \
  --val-fraction 0.1 >"$TMP/prep.out" 2>&1
expect_eq "prep exit status" 0 "$?"
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
ARGS=(--data "$TMP/prep" --augment rrc32,hflip --batch-size 8)

# 1. One rank.
"$CNNSCALE" data-bench "${ARGS[@]}" --batches 6 --warmup 2 --json "$TMP/one.json" >"$TMP/one.out" 2>&1
expect_eq "one rank: exit status" 0 "$?"
expect_grep "one rank: the header" "^cnnscale data-bench: $TMP/prep, 1 rank\(s\) on 1 node\(s\), 1 thread\(s\) per rank, batch 8 per rank, --augment rrc32,hflip, --cache none$" "$TMP/one.out"
expect_grep "one rank: the rates" "^48 images in [0-9.]+ s: [0-9]+ images/s \([0-9]+ per rank\), [0-9]+ images per CPU-second$" "$TMP/one.out"
expect_grep "one rank: the bytes" "^read [0-9.]+ MB/s from files, [0-9.]+ KB per image = [0-9.]+ bytes read per delivered image byte \(3072 B\)$" "$TMP/one.out"
expect_eq "one rank: json images = 6 batches x 8" 48 "$(field "$TMP/one.json" images)"
expect_eq "one rank: json image bytes 3x32x32" 3072 "$(field "$TMP/one.json" image_bytes)"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["images_per_s"] > 0 and j["images_per_cpu_s"] > 0 and j["bytes_read_per_image"] > 0 and j["world_size"] == 1 else 1)' "$TMP/one.json"
expect_eq "one rank: positive rates and bytes" 0 "$?"
expect_grep "one rank: where the time goes" \
  "^per image: read [0-9.]+ us \(wall\), HDF5 lock wait [0-9.]+ us \(wall\); CPU: checksum [0-9.]+ us, decode [0-9.]+ us, augment [0-9.]+ us, normalise [0-9.]+ us, of [0-9.]+ us for the whole process$" "$TMP/one.out"
# Uncached, the workers read the shards themselves (no HDF5 lock) and verify each chunk:
# every stage has time, the lock none; the stages fit in the process's CPU time (the read
# on the wall clock aside).
python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["stages_us_per_image"]
print(s)
ok = all(s[k] > 0 for k in ("read", "checksum", "augment", "normalize")) and s["hdf5_lock_wait"] == 0
sys.exit(0 if ok and s["checksum"] + s["augment"] + s["normalize"] <= s["process_cpu"] * 1.05 else 1)' "$TMP/one.json" >"$TMP/stages.txt" 2>&1
st=$?
expect_eq "one rank: stages read, checksum, augment, normalise timed, no lock wait ($(cat "$TMP/stages.txt"))" 0 "$st"

# 2. Two ranks.
timeout 300 $M -n 2 "$CNNSCALE" data-bench "${ARGS[@]}" --batches 4 --json "$TMP/two.json" >"$TMP/two.out" 2>&1
expect_eq "two ranks: exit status" 0 "$?"
expect_eq "two ranks: world size" 2 "$(field "$TMP/two.json" world_size)"
expect_eq "two ranks: json images = 2 ranks x 4 batches x 8" 64 "$(field "$TMP/two.json" images)"
expect_eq "two ranks: one summary (rank 0)" 1 "$(grep -c '^cnnscale data-bench:' "$TMP/two.out")"

# 3. A memory cache filled by a warm-up of one epoch (72 train samples / 8 = 9 batches).
"$CNNSCALE" data-bench "${ARGS[@]}" --cache memory --warmup 9 --batches 18 --json "$TMP/cached.json" \
  >"$TMP/cached.out" 2>&1
expect_eq "cached: exit status" 0 "$?"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["bytes_read_per_image"]; b=json.load(open(sys.argv[2]))["bytes_read_per_image"]; print(a, b); sys.exit(0 if a < 0.05 * b else 1)' \
  "$TMP/cached.json" "$TMP/one.json" >"$TMP/cached.cmp" 2>&1
st=$?
expect_eq "cached: the timed batches read under 5 % of the uncached bytes ($(cat "$TMP/cached.cmp"))" 0 "$st"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["stages_us_per_image"]; sys.exit(0 if s["checksum"] == 0 else 1)' "$TMP/cached.json"
expect_eq "cached: nothing checksummed in the timed batches (HDF5 checked the cache once, at fill)" 0 "$?"

# 4. What data-bench is for: a training run on the same data that waits for input says so
#    (issue 27 item 6): in its progress lines, a warning naming the knobs and data-bench, and
#    run.json data_wait_share (> 0.05); a compute-bound run (synthetic mnist_cnn) does not.
"$CNNSCALE" train --data "$TMP/prep" --augment rrc32,hflip --model "flatten linear(4)" --batch-size 8 \
  --max-steps 12 --log-every 4 --no-tensorboard --run-dir "$TMP/ib" >"$TMP/ib.out" 2>&1
expect_eq "input-bound run: exit status" 0 "$?"
expect_grep "input-bound run: the progress line says so" "^epoch 1/[0-9]+ step 4/12 .* input-bound [0-9]+% ETA" "$TMP/ib.out"
expect_grep "input-bound run: the warning names the knobs and data-bench" \
  "^cnnscale: warning: input-bound: the training loop waited for input [0-9]+% of each step .*--data-threads \(now 1\).*cnnscale data-bench --data $TMP/prep --augment rrc32,hflip" "$TMP/ib.out"
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["data_wait_share"] > 0.05 else 1)' "$TMP/ib/run.json"
expect_eq "input-bound run: run.json data_wait_share > 0.05" 0 "$?"
# The share is a timing: on a loaded machine the compute-bound run waits for its synthetic
# batches too, so it is compared with the input-bound run's, not with a fixed bar.
"$CNNSCALE" train --synthetic --model mnist_cnn --batch-size 32 --max-steps 12 --log-every 4 --run-dir "$TMP/cb" \
  --no-tensorboard >"$TMP/cb.out" 2>&1
expect_eq "compute-bound run: exit status" 0 "$?"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["data_wait_share"]; b=json.load(open(sys.argv[2]))["data_wait_share"]; print(a, b); sys.exit(0 if a < b / 2 else 1)' \
  "$TMP/cb/run.json" "$TMP/ib/run.json" >"$TMP/cb.cmp" 2>&1
st=$?
expect_eq "compute-bound run: input wait share under half the input-bound run's ($(cat "$TMP/cb.cmp"))" 0 "$st"

# 6. `cnnscale report --data-bench`: the reader's measured rate beside what the run consumed,
#    the number taken from data-bench's own JSON, and the cores per rank input takes.
"$CNNSCALE" report "$TMP/ib" --data-bench "$TMP/one.json" --output "$TMP/rep" >"$TMP/rep.out" 2>&1
expect_eq "report --data-bench: exit status" 0 "$?"
per_rank=$(python3 -c '
import json, math, sys
j = json.load(open(sys.argv[1])); v = j["images_per_s"] / j["world_size"]
print("%.*f" % (max(0, 3 - math.floor(math.log10(v))), v))  # 4 significant digits, as the report writes' "$TMP/one.json")
expect_grep "report --data-bench: the reader's rate per rank, from the JSON ($per_rank)" \
  "Input \($TMP/one.json: .cnnscale data-bench. on $TMP/prep, --augment rrc32,hflip, --data-threads 1, --cache none, 1 rank\(s\) per node\): the reader delivers $per_rank images/s per rank\. These runs consume up to [0-9.]+ per rank \(at 1 ranks\)" \
  "$TMP/rep/report.md"
expect_grep "report --data-bench: cores per rank for input" "images/s per rank take [0-9.]+ core\(s\) per rank for input alone" "$TMP/rep/report.md"
expect_eq "report --data-bench: the run and data-bench agree (data, --augment, --data-threads)" 0 \
  "$(grep -c 'The run in' "$TMP/rep/report.md")"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["data_threads"] = 4; json.dump(j, open(sys.argv[2], "w"))' \
  "$TMP/one.json" "$TMP/four.json"
"$CNNSCALE" report "$TMP/ib" --data-bench "$TMP/four.json" --output "$TMP/rep4" >"$TMP/rep4.out" 2>&1
expect_grep "report --data-bench: a run of another --data-threads is named" \
  "The run in $TMP/ib used --data-threads 1 \(data-bench: 4\): the reader's rate below is another configuration's" \
  "$TMP/rep4/report.md"
"$CNNSCALE" report "$TMP/ib" --data-bench "$TMP/ib/run.json" --output "$TMP/rep2" >"$TMP/rep2.out" 2>&1
expect_eq "report --data-bench with a run.json: exit status" 2 "$?"
expect_grep "report --data-bench with a run.json: named" \
  "^cnnscale: error: $TMP/ib/run.json: not a data-bench result .*cnnscale data-bench --json FILE" "$TMP/rep2.out"

# 5. Errors.
"$CNNSCALE" data-bench --batch-size 8 >"$TMP/e1" 2>&1
expect_eq "no --data: exit status" 2 "$?"
expect_grep "no --data: named" "^cnnscale: error: data-bench: --data DIR is required" "$TMP/e1"
"$CNNSCALE" data-bench --data "$TMP/nowhere" >"$TMP/e2" 2>&1
expect_eq "missing directory: exit status" 2 "$?"
expect_grep "missing directory: named" "^cnnscale: error: .*$TMP/nowhere" "$TMP/e2"
"$CNNSCALE" data-bench "${ARGS[@]}" --batches 0 >"$TMP/e3" 2>&1
expect_eq "--batches 0: exit status" 2 "$?"
expect_grep "--batches 0: named" "^cnnscale: error: --batches must be at least 1" "$TMP/e3"
# --json at a FIFO on 2 ranks (issue 39; tests/cli/output_files.sh has every kind of path):
# refused before the benchmark on every rank, said once; the FIFO stays (it became a file).
mkfifo "$TMP/fifo.json"
timeout 120 $M -n 2 "$CNNSCALE" data-bench "${ARGS[@]}" --batches 2 --json "$TMP/fifo.json" >"$TMP/e4" 2>&1
expect_eq "--json FIFO, 2 ranks: exit status" 2 "$?"
expect_eq "--json FIFO, 2 ranks: said once" 1 "$(grep -c "^cnnscale: error: cannot write --json '$TMP/fifo.json': it is a FIFO" "$TMP/e4")"
expect_eq "--json FIFO, 2 ranks: nothing measured" 0 "$(grep -c 'images/s' "$TMP/e4")"
expect_eq "--json FIFO, 2 ranks: the FIFO stays" "fifo" "$(stat -c %F "$TMP/fifo.json")"
finish
