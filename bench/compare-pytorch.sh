#!/usr/bin/env bash
# compare-pytorch.sh — cnnscale vs PyTorch DDP on the same work, side by side in one run.
#
# Both: mnist_cnn (the PyTorch MNIST example network with dropout), Fashion-MNIST in
# memory, SGD momentum 0.9, lr 0.01, batch 64 per rank, one thread per rank, the same
# number of steps, warm-up steps excluded the same way (first min(20, steps/10)),
# images/s = global batch / median over steps of the slowest rank's step time.
# Rounds alternate A/B: for each round, for W in 1 2: PyTorch, cnnscale fp32,
# cnnscale bf16 (and at W=2 a control: two independent 1-rank cnnscale runs at once). Then: bench/roofline (sgemm roof, memcpy), `cnnscale allreduce` on
# 2 ranks, and the table (medians over rounds, min..max in brackets).
#
# --model resnet50|resnet18 (or any other built-in torchvision model: resnet34/101/152,
# resnext*, wide_resnet*, mobilenet_v2/v3, efficientnet_b*, convnext_*, shufflenet_v2_*, vgg*, densenet*, squeezenet*,
# regnet_*, mnasnet*): the guides'
# synthetic benchmark instead:
# `cnnscale train --synthetic --model M --image-size S --channels 3 --classes 1000` against
# torchvision.models.M under PyTorch DDP (bench/pytorch_ddp_resnet.py: one fixed random
# batch per rank, as --use_syn), batch --batch (default 32) per rank, --threads T per rank
# (default 1), fp32 and bf16 (cnnscale --precision bf16 vs torch.autocast("cpu",
# bfloat16); only when the CPU has AVX512-BF16 or AMX), PyTorch in both memory formats
# (contiguous and channels-last; the table takes the faster), 1 and 2 ranks. Default
# --steps 30 there. The roofline uses the model's FLOPs (ResNet-50: 3 × 4.1 GFLOP/image).
# --model unet|unet(D,W): the U-Net on images with label maps (tests/data/make_shapes.py at
# --image-size, prepped, --cache memory) against tests/nn/unet_reference.py's PyTorch U-Net on a
# random batch with random label maps; batch 16 per rank by default; no roofline row.
# --model unet(D,W) --volume: the 3-D U-Net on volumes 1×S×S×S with a label map each
# (tests/data/make_shapes3d.py at --image-size, prepped, --cache memory) against
# unet_reference.py's UNet(dims=3) on a random batch; batch 4 per rank by default; the table
# counts volumes/s.
# --model cosmoflow|cosmoflow(W,K): the MLPerf HPC CosmoFlow regression network on volumes
# --channels×S×S×S (S = --image-size, the cube's side, default 64; --channels default 4) with 4
# float targets: tests/data/make_grf.py's Gaussian random fields (float32, no transform), prepped
# (`prep --format hdf5 --images /x --targets /y`), --cache memory, against bench/pytorch_ddp_resnet.py's
# cosmoflow() on a random batch with random targets (mse); batch 8 per rank by default; the table
# counts volumes/s; no roofline row.
#
# Usage: bench/compare-pytorch.sh [--build DIR] [--rounds N] [--steps N] [--bind core|none]
#                                 [--out DIR] [--accuracy [--with-pytorch]] [--epochs N] [--no-install]
#                                 [--model mnist_cnn|resnet50|resnet18] [--image-size S] [--batch B]
#                                 [--threads T] [--classes K] [--channels C] [--precision both|fp32|bf16] [--volume]
#   --precision  run only that precision's pairs (default both; bf16 needs AVX512-BF16 or AMX)
#   --accuracy   instead of the throughput table: 5-epoch (--epochs) runs on 2 ranks of
#                cnnscale fp32 and bf16 (and, with --with-pytorch, PyTorch fp32), test
#                accuracy of each.
# PyTorch is a bench-only dependency: Debian's python3-torch (installed here with apt
# when missing, as root). Results: $OUT/results.jsonl, $OUT/table.txt.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD="$ROOT/build"
ROUNDS=3
STEPS=""
MODEL=mnist_cnn
IMAGE=""
BATCH=""
THREADS=1
CLASSES=1000
CHANNELS=4
SEG=0
VOL=0
VOLUME=0
BIND=core
OUT=""
ACCURACY=0
EPOCHS=5
INSTALL=1
PRECISION=both
ACC_PYTORCH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --bind) BIND=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --accuracy) ACCURACY=1; shift ;;
    --with-pytorch) ACC_PYTORCH=1; shift ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --model) MODEL=$2; shift 2 ;;
    --image-size) IMAGE=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --classes) CLASSES=$2; shift 2 ;;
    --channels) CHANNELS=$2; shift 2 ;;
    --volume) VOLUME=1; shift ;;
    --precision) PRECISION=$2; shift 2 ;;
    -h|--help) sed -n '2,47p' "$0"; exit 0 ;;
    *) echo "compare-pytorch.sh: error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$BIND" in core|none) ;; *) echo "compare-pytorch.sh: error: --bind core|none" >&2; exit 2 ;; esac
case "$PRECISION" in both|fp32|bf16) ;; *) echo "compare-pytorch.sh: error: --precision both|fp32|bf16" >&2; exit 2 ;; esac
case "$MODEL" in
  mnist_cnn) RESNET=0; STEPS=${STEPS:-200}; BATCH=${BATCH:-64} ;;
  resnet18|resnet34|resnet50|resnet101|resnet152|resnext*|wide_resnet*|mobilenet_v2|mobilenet_v3_large|\
  mobilenet_v3_small|efficientnet_b[0-7]|convnext_tiny|convnext_small|convnext_base|convnext_large|\
  shufflenet_v2_x0_5|shufflenet_v2_x1_0|shufflenet_v2_x1_5|shufflenet_v2_x2_0|vgg11|vgg13|vgg16|vgg19|vgg11_bn|vgg13_bn|\
  vgg16_bn|vgg19_bn|densenet121|densenet161|densenet169|densenet201|squeezenet1_0|squeezenet1_1|\
  regnet_[xy]_*|mnasnet*)
    RESNET=1; STEPS=${STEPS:-30}; BATCH=${BATCH:-32} ;;
  unet|unet\(*\))
    RESNET=1; SEG=1; STEPS=${STEPS:-30}; CLASSES=4
    if [ "$VOLUME" = 1 ]; then BATCH=${BATCH:-4}; IMAGE=${IMAGE:-32}; else BATCH=${BATCH:-16}; fi ;;
  cosmoflow|cosmoflow\(*\))
    RESNET=1; VOL=1; STEPS=${STEPS:-30}; BATCH=${BATCH:-8}; IMAGE=${IMAGE:-64}; CLASSES=4 ;;
  *) echo "compare-pytorch.sh: error: --model mnist_cnn, unet(D,W), cosmoflow(W,K) or a built-in torchvision model (resnet*, resnext*, wide_resnet*, mobilenet_v2, mobilenet_v3_*, efficientnet_b*, convnext_*, shufflenet_v2_*, vgg*, densenet*, squeezenet*, regnet_*, mnasnet*)" >&2; exit 2 ;;
esac
IMAGE=${IMAGE:-224}
if [ "$RESNET" = 1 ] && [ "$ACCURACY" = 1 ]; then
  echo "compare-pytorch.sh: error: --accuracy is for mnist_cnn (synthetic data has no test accuracy)" >&2; exit 2
fi
# bf16 only where the CPU computes it natively (the issue's peer is autocast on AVX512-BF16/AMX).
BF16=0
grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && BF16=1
AMX=0
grep -qw amx_bf16 /proc/cpuinfo && AMX=1
if [ "$PRECISION" = bf16 ] && [ "$BF16" = 0 ]; then
  echo "compare-pytorch.sh: error: --precision bf16: this CPU has neither AVX512-BF16 nor AMX" >&2; exit 2
fi
[ "$PRECISION" = fp32 ] && BF16=0
FP32=1
[ "$PRECISION" = bf16 ] && FP32=0
CNNSCALE="$BUILD/bin/cnnscale"
ROOFLINE="$BUILD/bin/roofline"
for f in "$CNNSCALE" "$ROOFLINE"; do
  [ -x "$f" ] || { echo "compare-pytorch.sh: error: $f not built (cmake --build $BUILD)" >&2; exit 1; }
done
OUT=${OUT:-"$ROOT/out/compare-$(date +%Y%m%d-%H%M%S)"}
mkdir -p "$OUT"
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# ---- PyTorch (bench only) ----
if ! $PY -c "import torch" 2>/dev/null; then
  if [ "$INSTALL" = 1 ]; then
    echo "== installing Debian's python3-torch (bench only)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch >"$OUT/apt.log" 2>&1 ||
      { echo "compare-pytorch.sh: error: apt-get install python3-torch failed (see $OUT/apt.log)" >&2; exit 1; }
  else
    echo "compare-pytorch.sh: error: $PY cannot import torch (install python3-torch)" >&2; exit 1
  fi
fi
TORCH_VERSION=$($PY -c "import torch; print(torch.__version__)")
if [ "$RESNET" = 1 ] && ! $PY -c "import torchvision" 2>/dev/null; then
  echo "compare-pytorch.sh: error: $PY cannot import torchvision (apt-get install python3-torchvision)" >&2; exit 1
fi

# ---- data ----
DATA="$ROOT/out/fashion-mnist-h5"
if [ "$RESNET" = 1 ]; then
  # synthetic on both sides; enough samples that no epoch ends inside the timed steps
  DATA_ARGS=(--synthetic --model "$MODEL" --image-size "$IMAGE" --channels 3 --classes "$CLASSES"
             --synthetic-samples $((BATCH * 2 * (STEPS + 1))))
  PT_SCRIPT="$HERE/pytorch_ddp_resnet.py"
  PT_ARGS=(--model "$MODEL" --image-size "$IMAGE" --classes "$CLASSES")
  if [ "$SEG" = 1 ]; then
    # unet(D,W): tests/nn/make_shapes.py's images with label maps (4 classes) at --image-size,
    # prepped once, read from memory (--cache memory); PyTorch's peer trains on one random
    # batch with random label maps per rank (as for the ResNets).
    SEGDATA="$OUT/shapes-$IMAGE"
    if [ "$VOLUME" = 1 ]; then  # the 3-D U-Net: make_shapes3d.py's 1×S×S×S volumes with label maps
      $PY "$ROOT/tests/data/make_shapes3d.py" "$OUT/shapes-$IMAGE.h5" --size "$IMAGE" --train $((BATCH * 2 * 4)) --test 1
      PT_ARGS+=(--channels 1 --volume)
    else
      $PY "$ROOT/tests/data/make_shapes.py" "$OUT/shapes-$IMAGE.h5" --size "$IMAGE" --train $((BATCH * 2 * 4)) --test 1
    fi
    "$CNNSCALE" prep --format hdf5 --input "$OUT/shapes-$IMAGE.h5" --images /x_train --labels /y_train --shards 2 \
      --output "$SEGDATA" >"$OUT/prep.log"
    DATA_ARGS=(--data "$SEGDATA" --cache memory --model "$MODEL")
  fi
  if [ "$VOL" = 1 ]; then
    # cosmoflow(W,K): tests/data/make_grf.py's volumes CHANNELS×S×S×S with 4 float targets (CLASSES
    # holds the target count), prepped once, read from memory; PyTorch's peer trains on one random
    # batch with random targets per rank.
    VOLDATA="$OUT/grf-$IMAGE"
    $PY "$ROOT/tests/data/make_grf.py" "$OUT/grf-$IMAGE.h5" --n $((BATCH * 2 * 4)) --size "$IMAGE" \
      --channels "$CHANNELS" --targets "$CLASSES"
    "$CNNSCALE" prep --format hdf5 --input "$OUT/grf-$IMAGE.h5" --images /x --targets /y --shards 2 \
      --output "$VOLDATA" >"$OUT/prep.log"
    DATA_ARGS=(--data "$VOLDATA" --cache memory --model "$MODEL")
    PT_ARGS=(--model "$MODEL" --image-size "$IMAGE" --channels "$CHANNELS" --targets "$CLASSES")
  fi
else
  DATA_ARGS=(--data "$DATA" --cache memory --model mnist_cnn)
  PT_SCRIPT="$HERE/pytorch_ddp_mnist.py"
  PT_ARGS=()
fi
if [ "$RESNET" = 0 ] && [ ! -f "$DATA/dataset.json" ]; then
  echo "== cnnscale prep (Fashion-MNIST → $DATA)"
  "$CNNSCALE" prep --format idx --input /usr/share/datasets/fashion-mnist --output "$DATA" --shards 8 --test-shards 2
fi

free_port() { $PY -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }

# PyTorch on W ranks: one process per rank (no torchrun), rank r bound to core r with --bind core.
run_pytorch() {  # W TAG [extra args]
  local W=$1 TAG=$2; shift 2
  local port pids=() r
  port=$(free_port)
  for ((r = 0; r < W; r++)); do
    local pin=()
    [ "$BIND" = core ] && pin=(taskset -c "$((r * THREADS))-$((r * THREADS + THREADS - 1))")
    RANK=$r WORLD_SIZE=$W MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      /usr/bin/time -f %M -o "$OUT/$TAG.rss.$r" "${pin[@]}" $PY "$PT_SCRIPT" \
      --batch-size "$BATCH" --threads "$THREADS" "${PT_ARGS[@]}" "$@" >"$OUT/$TAG.out.$r" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc = 0 ] || { echo "compare-pytorch.sh: error: PyTorch run $TAG failed (see $OUT/$TAG.out.*)" >&2; exit 1; }
  $PY - "$OUT" "$TAG" "$W" <<'EOF' >>"$OUT/results.jsonl"
import json, sys, glob
out, tag, w = sys.argv[1], sys.argv[2], int(sys.argv[3])
j = json.loads([l for l in open(f"{out}/{tag}.out.0") if l.startswith("{")][-1])
rss = [int(open(f).read().split()[-1]) / 1024 for f in glob.glob(f"{out}/{tag}.rss.*")]
print(json.dumps({"impl": "pytorch " + j["torch"], "precision": j.get("precision", "fp32"), "tag": tag, "world": w,
                  "channels_last": j.get("channels_last", False),
                  "images_per_s": j["images_per_s"], "step_ms": j["step_ms"], "peak_rss_mib": max(rss),
                  "test_accuracy": j.get("test_accuracy")}))
EOF
}

# cnnscale on W ranks (mpirun --bind-to $BIND); each rank's peak RSS from /usr/bin/time.
run_cnnscale() {  # W TAG PRECISION [extra args]
  local W=$1 TAG=$2 PREC=$3; shift 3
  rm -rf "$OUT/$TAG"
  mpirun --bind-to "$BIND" -n "$W" bash -c \
    'exec /usr/bin/time -f %M -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$@"' "$OUT/$TAG" \
    "$CNNSCALE" train "${DATA_ARGS[@]}" --batch-size "$BATCH" --threads "$THREADS" \
    --lr 0.01 --momentum 0.9 --precision "$PREC" --run-dir "$OUT/$TAG" "$@" >"$OUT/$TAG.out" 2>&1 ||
    { echo "compare-pytorch.sh: error: cnnscale run $TAG failed (see $OUT/$TAG.out)" >&2; exit 1; }
  $PY - "$OUT" "$TAG" "$W" "$PREC" <<'EOF' >>"$OUT/results.jsonl"
import json, sys, glob
out, tag, w, prec = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
j = json.load(open(f"{out}/{tag}/run.json"))
rss = [int(open(f).read().split()[-1]) / 1024 for f in glob.glob(f"{out}/{tag}.rss.*")]
print(json.dumps({"impl": "cnnscale", "precision": prec, "tag": tag, "world": w,
                  "images_per_s": j["images_per_s"], "step_ms": j["step_ms"]["median"],
                  "breakdown_ms": j["breakdown_ms"], "breakdown_median_ms": j.get("breakdown_median_ms"),
                  "peak_rss_mib": max(rss),
                  "test_accuracy": j.get("test_accuracy")}))
EOF
}

# Control for weak scaling: two independent 1-rank cnnscale runs at once, one per core
# (no communication at all). Their summed images/s is what 2 ranks could reach on this
# machine if DDP cost nothing; 2-rank DDP images/s over it isolates DDP's own overhead
# from the two processes sharing the machine (cache, memory bandwidth, other users).
run_cnnscale_pair() {  # TAG PRECISION [extra args]
  local TAG=$1 PREC=$2; shift 2
  local pids=() r
  for r in 0 1; do
    rm -rf "$OUT/$TAG-$r"
    taskset -c "$((r * THREADS))-$((r * THREADS + THREADS - 1))" mpirun --bind-to none -n 1 "$CNNSCALE" train \
      "${DATA_ARGS[@]}" --batch-size "$BATCH" --threads "$THREADS" --lr 0.01 --momentum 0.9 --precision "$PREC" --run-dir "$OUT/$TAG-$r" "$@" \
      >"$OUT/$TAG-$r.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "compare-pytorch.sh: error: $TAG failed (see $OUT/$TAG-*.out)" >&2; exit 1; }; done
  $PY - "$OUT" "$TAG" "$PREC" <<'EOF2' >>"$OUT/results.jsonl"
import json, sys
out, tag, prec = sys.argv[1:4]
ips = [json.load(open(f"{out}/{tag}-{r}/run.json"))["images_per_s"] for r in (0, 1)]
print(json.dumps({"impl": "cnnscale-independent-pair", "precision": prec, "tag": tag, "world": 2,
                  "images_per_s": sum(ips), "per_process": ips, "peak_rss_mib": 0, "step_ms": 0}))
EOF2
}

{
  echo "machine: $(uname -srm); $(nproc --all) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "torch $TORCH_VERSION; $(mpirun --version 2>&1 | head -1); binding: $BIND"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "model: $MODEL; batch $BATCH/rank; $THREADS thread(s)/rank; $STEPS steps; bf16 compared: $BF16"
} | tee "$OUT/machine.txt"
$PY -c "import json, sys; json.dump(dict(model='$MODEL', batch=$BATCH, threads=$THREADS, steps=$STEPS, image_size=$IMAGE, classes=$CLASSES, bf16=bool($BF16), amx=bool($AMX), seg=bool($SEG), vol=bool($VOL or $VOLUME), channels=$CHANNELS), open(sys.argv[1], 'w'))" "$OUT/meta.json"

if [ "$ACCURACY" = 1 ]; then
  : >"$OUT/results.jsonl"
  echo "== accuracy: $EPOCHS epochs on 2 ranks (global batch 128)"
  run_cnnscale 2 acc-cnnscale-fp32 fp32 --epochs "$EPOCHS"
  run_cnnscale 2 acc-cnnscale-bf16 bf16 --epochs "$EPOCHS"
  [ "$ACC_PYTORCH" = 1 ] && run_pytorch 2 acc-pytorch --epochs "$EPOCHS"
  $PY - "$OUT/results.jsonl" <<'EOF' | tee "$OUT/accuracy.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
acc = {(r["impl"].split()[0], r["precision"]): r["test_accuracy"] for r in rows}
for (impl, prec), a in acc.items():
    print(f"{impl:9s} {prec}: test accuracy {a*100:.2f}%")
d = (acc[("cnnscale", "bf16")] - acc[("cnnscale", "fp32")]) * 100
print(f"cnnscale bf16 - fp32: {d:+.2f} points (target: within 0.5) -> {'met' if abs(d) <= 0.5 else 'MISSED'}")
EOF
  exit 0
fi

: >"$OUT/results.jsonl"
for ((round = 1; round <= ROUNDS; round++)); do
  for W in 1 2; do
    echo "== round $round/$ROUNDS, $W rank(s): PyTorch, cnnscale ($PRECISION)  (load $(cut -d' ' -f1 /proc/loadavg))"
    if [ "$RESNET" = 1 ]; then
      for prec in fp32 bf16; do
        [ "$prec" = bf16 ] && [ "$BF16" = 0 ] && continue
        [ "$prec" = fp32 ] && [ "$FP32" = 0 ] && continue
        run_pytorch "$W" "r$round-pytorch-$prec-w$W" --steps "$STEPS" --precision "$prec"
        run_pytorch "$W" "r$round-pytorch-$prec-cl-w$W" --steps "$STEPS" --precision "$prec" --channels-last
      done
    else
      run_pytorch "$W" "r$round-pytorch-w$W" --steps "$STEPS"
    fi
    [ "$FP32" = 1 ] && run_cnnscale "$W" "r$round-cnnscale-fp32-w$W" fp32 --max-steps "$STEPS"
    if [ "$BF16" = 1 ] || { [ "$RESNET" = 0 ] && [ "$PRECISION" != fp32 ]; }; then
      run_cnnscale "$W" "r$round-cnnscale-bf16-w$W" bf16 --max-steps "$STEPS"
    fi
    [ "$W" = 2 ] && [ "$FP32" = 1 ] && run_cnnscale_pair "r$round-cnnscale-fp32-pair" fp32 --max-steps "$STEPS"
  done
done

echo "== roofline (1 thread)"
ROOF_ARGS=()
# the model's FLOPs; its fwd+bwd timed at a small batch (ResNet-50 at 224 takes seconds per step)
[ "$RESNET" = 1 ] && [ "$SEG" = 0 ] && [ "$VOL" = 0 ] && ROOF_ARGS=(--model "$MODEL" --image-size "$IMAGE" --channels 3 --classes "$CLASSES" --batch 2 --steps 3)
"$ROOFLINE" "${ROOF_ARGS[@]}" --json >"$OUT/roofline.json"
"$ROOFLINE" "${ROOF_ARGS[@]}" >"$OUT/roofline.txt" && cat "$OUT/roofline.txt"
echo "== cnnscale allreduce, 2 ranks"
mpirun --bind-to "$BIND" -n 2 "$CNNSCALE" allreduce -b 1K -e 64M -f 4 --json "$OUT/allreduce.json" | tee "$OUT/allreduce.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

$PY "$HERE/compare_table.py" "$OUT" | tee "$OUT/table.txt"
echo "results in $OUT"
