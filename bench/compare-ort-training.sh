#!/usr/bin/env bash
# compare-ort-training.sh — cnnscale vs ONNX Runtime training on the same ONNX file, side by
# side in one run (issue 49 item 6). The file: scripts/export-onnx.py torchvision:MODEL
# (training mode, fixed size, 1000 classes). ONNX Runtime: its training API
# (onnxruntime-training-cpu 1.19.2 from PyPI, the newest with CPU wheels for this Python, in
# its own venv, /var/cache/cnnscale/ort-training-venv; bench/ort_training.py): generate_artifacts
# adds cross-entropy, the gradient graph and SGD, then Module/Optimizer train on one fixed
# random batch. cnnscale: `cnnscale train --synthetic --model FILE.onnx` (one fixed random
# batch too), SGD without momentum at lr 0.01 as ORT's. Both on one core (taskset -c 1),
# one thread, the same batch and steps; images/s = batch / median step time after warm-up;
# peak RSS from /usr/bin/time. Rounds alternate ORT, cnnscale.
# Usage: bench/compare-ort-training.sh [--model resnet50] [--image-size 224] [--batch 16]
#          [--steps 12] [--rounds 1] [--build DIR] [--out DIR]
# Results: $OUT/results.jsonl, $OUT/table.txt.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD="$ROOT/build"
MODEL=resnet50
IMAGE=224
BATCH=16
STEPS=12
ROUNDS=1
OUT=""
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --image-size) IMAGE=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "compare-ort-training.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-/var/tmp/cmp-ort-$MODEL}
mkdir -p "$OUT"
: >"$OUT/results.jsonl"
CNNSCALE="$BUILD/bin/cnnscale"
[ -x "$CNNSCALE" ] || { echo "compare-ort-training.sh: error: $CNNSCALE not built" >&2; exit 1; }
VENV=${CNNSCALE_ORT_TRAINING_VENV:-/var/cache/cnnscale/ort-training-venv}
if ! "$VENV/bin/python" -c "import onnxruntime, onnx; assert onnxruntime.__version__ == '1.19.2'" 2>/dev/null; then
  echo "compare-ort-training.sh: installing onnxruntime-training-cpu 1.19.2 into $VENV (PyPI)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check onnxruntime-training-cpu==1.19.2 onnx==1.16.2 "numpy<2"
fi
F="$OUT/$MODEL.onnx"
[ -f "$F" ] || /usr/bin/python3 "$ROOT/scripts/export-onnx.py" "torchvision:$MODEL" "$F" --classes 1000 \
  --input-shape "3,$IMAGE,$IMAGE" --fixed-size
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/machine.txt"
for ((r = 1; r <= ROUNDS; r++)); do
  OMP_NUM_THREADS=1 /usr/bin/time -f %M -o "$OUT/ort.rss.$r" taskset -c 1 "$VENV/bin/python" "$HERE/ort_training.py" \
    "$F" --batch "$BATCH" --steps "$STEPS" --threads 1 --out "$OUT/ort.$r.json" >"$OUT/ort.$r.log" 2>&1 ||
    { echo "compare-ort-training.sh: error: ONNX Runtime training failed (see $OUT/ort.$r.log)" >&2; exit 1; }
  rm -rf "$OUT/cnnscale-$r"
  OMP_NUM_THREADS=1 /usr/bin/time -f %M -o "$OUT/cnnscale.rss.$r" taskset -c 1 "$CNNSCALE" train --synthetic \
    --model "$F" --image-size "$IMAGE" --channels 3 --classes 1000 --batch-size "$BATCH" --max-steps "$STEPS" \
    --threads 1 --lr 0.01 --momentum 0 --run-dir "$OUT/cnnscale-$r" >"$OUT/cnnscale.$r.log" 2>&1 ||
    { echo "compare-ort-training.sh: error: cnnscale failed (see $OUT/cnnscale.$r.log)" >&2; exit 1; }
  python3 - "$OUT" "$r" <<'EOF' >>"$OUT/results.jsonl"
import json, sys
out, r = sys.argv[1], sys.argv[2]
o = json.load(open(f"{out}/ort.{r}.json"))
c = json.load(open(f"{out}/cnnscale-{r}/run.json"))
rss = lambda f: int(open(f).read().split()[-1]) / 1024
print(json.dumps({"round": int(r), "ort_images_per_s": o["images_per_s"], "ort_rss_mib": rss(f"{out}/ort.rss.{r}"),
                  "ort_loss": [o["first_loss"], o["last_loss"]], "cnnscale_images_per_s": c["images_per_s"],
                  "cnnscale_rss_mib": rss(f"{out}/cnnscale.rss.{r}"),
                  "ratio": c["images_per_s"] / o["images_per_s"]}))
EOF
done
python3 - "$OUT" "$MODEL" "$IMAGE" "$BATCH" "$STEPS" <<'EOF' | tee "$OUT/table.txt"
import json, statistics, sys
out, model, image, batch, steps = sys.argv[1:6]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl")]
med = lambda k: statistics.median(r[k] for r in rows)
print(f"{model} {image}x{image}, batch {batch}, {steps} steps, 1 core, 1 thread, {len(rows)} round(s), fp32, SGD")
print(f"  ONNX Runtime training 1.19.2: {med('ort_images_per_s'):.2f} images/s, peak RSS {med('ort_rss_mib'):.0f} MiB")
print(f"  cnnscale (--model FILE.onnx): {med('cnnscale_images_per_s'):.2f} images/s, peak RSS {med('cnnscale_rss_mib'):.0f} MiB")
print(f"  cnnscale / ONNX Runtime: {med('ratio'):.2f}x (rounds: {', '.join('%.2f' % r['ratio'] for r in rows)})")
EOF
