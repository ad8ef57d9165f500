#!/usr/bin/env bash
# gpu-precision.sh — the GPU model's step rate under fp32 (--tf32 off), TF32 (the
# default) and bf16 (--precision bf16: bf16 NHWC convolutions, docs/gpu.md), side by
# side on one GPU, for the first session that has one: what the bf16 conversions cost
# against what the bf16 tensor cores give, and how far TF32 is from fp32.
#
#   bench/gpu-precision.sh [--reps 3] [--steps 60] [--configs resnet20,resnet50] [--out DIR]
#
# One rank, --backend nccl, synthetic data (no input cost), SGD momentum, no evaluation.
# resnet20: CIFAR-shaped 3×32×32, batch 256; resnet50: 3×224×224, 1000 classes, batch 64.
# Rounds alternate the three precisions (A B C A B C …) so that a change in the GPU's
# clocks or another tenant falls on all alike; each run's images/s is run.json's median
# over its timed steps; the table gives the median over rounds and the ratios to fp32.
# Needs build/bin/cnnscale built with CUDA and a usable device (`cnnscale env` says why not).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
CNNSCALE=${CNNSCALE:-$ROOT/build/bin/cnnscale}
MPIEXEC=${MPIEXEC:-mpiexec}
REPS=3 STEPS=60 CONFIGS=resnet20,resnet50 OUT=""
while [ $# -gt 0 ]; do
  case $1 in
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "gpu-precision.sh: error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -x "$CNNSCALE" ] || { echo "gpu-precision.sh: error: $CNNSCALE not built (cmake --build build)" >&2; exit 1; }
nvidia-smi -L >/dev/null 2>&1 || { echo "gpu-precision.sh: error: no GPU (nvidia-smi -L fails); run it on a GPU node" >&2; exit 1; }
OUT=${OUT:-/var/tmp/cnnscale-gpu-precision.$$}
mkdir -p "$OUT"
: >"$OUT/results.jsonl"
{ echo "load before: $(uptime)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv; } |
  tee "$OUT/machine.txt"
for cfg in ${CONFIGS//,/ }; do
  case $cfg in
    resnet20) ARGS=(--model resnet20 --image-size 32 --channels 3 --classes 10 --batch-size 256) ;;
    resnet50) ARGS=(--model resnet50 --image-size 224 --channels 3 --classes 1000 --batch-size 64) ;;
    *) echo "gpu-precision.sh: error: unknown config $cfg (resnet20, resnet50)" >&2; exit 2 ;;
  esac
  for rep in $(seq 1 "$REPS"); do
    for prec in fp32 tf32 bf16; do
      case $prec in
        fp32) P=(--precision fp32 --tf32 off) ;;
        tf32) P=(--precision fp32 --tf32 on) ;;
        bf16) P=(--precision bf16) ;;
      esac
      dir=$OUT/$cfg.$prec.$rep
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$MPIEXEC" -n 1 --bind-to none "$CNNSCALE" train \
        --synthetic --backend nccl "${ARGS[@]}" "${P[@]}" --optimizer sgd --lr 0.01 --momentum 0.9 \
        --max-steps "$STEPS" --no-eval --no-tensorboard --log-every 20 --run-dir "$dir" >"$dir.log" 2>&1 ||
        { echo "gpu-precision.sh: error: $cfg $prec failed; see $dir.log:" >&2; tail -5 "$dir.log" >&2; exit 1; }
      python3 - "$cfg" "$prec" "$dir/run.json" >>"$OUT/results.jsonl" <<'PY'
import json, sys
j = json.load(open(sys.argv[3]))
ips = j.get("images_per_s")
ips = ips.get("median") if isinstance(ips, dict) else ips
print(json.dumps({"config": sys.argv[1], "precision": sys.argv[2], "images_per_s": ips}))
PY
      echo "$cfg $prec round $rep: $(tail -n 1 "$OUT/results.jsonl")"
    done
  done
done
echo "load after: $(uptime)" | tee -a "$OUT/machine.txt"
python3 - "$OUT/results.jsonl" <<'PY' | tee "$OUT/table.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| model | fp32 img/s | TF32 img/s | bf16 img/s | TF32/fp32 | bf16/fp32 | bf16/TF32 |")
print("|---|---|---|---|---|---|---|")
for cfg in dict.fromkeys(r["config"] for r in rows):
    m = {p: statistics.median(r["images_per_s"] for r in rows if r["config"] == cfg and r["precision"] == p)
         for p in ("fp32", "tf32", "bf16")}
    print(f"| {cfg} | {m['fp32']:.0f} | {m['tf32']:.0f} | {m['bf16']:.0f} | {m['tf32']/m['fp32']:.2f}x | "
          f"{m['bf16']/m['fp32']:.2f}x | {m['bf16']/m['tf32']:.2f}x |")
PY
echo "results in $OUT"
