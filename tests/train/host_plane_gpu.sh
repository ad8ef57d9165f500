#!/usr/bin/env bash
# host_plane_gpu.sh — GPU ranks over the host data plane on ONE GPU (issue 38 item 2):
# `--device cuda --backend mpi` with 2 ranks sharing the GPU (each its own CUDA context
# and copy stream; gradients staged through pinned host memory, summed by MPI) trains as
# the single-rank GPU run and the CPU trainer do. mnist_cnn (dropout, no batch norm) and
# resnet20 (batch norm), SGD with momentum, synthetic data, global batch B = 32, N = 6
# steps, checkpoints every K = 3, --tf32 off (full fp32) and --cudnn-benchmark off
# (cuDNN's heuristic algorithm choice: the same every run) in every run:
#   hp   2 ranks × 16 over the host plane, --check-replicas 1;
#   g1   1 rank × 32 on the GPU (--backend nccl, one rank);
#   cpu  2 ranks × 16, the CPU trainer on MPI (--device cpu --backend mpi).
# Checks:
#  - hp's replicas bitwise equal after every step; its start-up says backend mpi, 32
#    global, and that 2 ranks share one GPU over the host plane (rank 0's line from
#    comm/world.cpp); run.json (rank 0's record of the run) says backend mpi, device
#    cuda:0, world size 2. (Every rank trains the GPU model or none: the communicator
#    decides for all, and bitwise-equal replicas need both.)
#  - mnist_cnn: hp vs g1, the same global batch (dropout masks come from the sample
#    ids, so DDP's semantics are exact): every step's loss within relative 1e-5, the
#    final parameters within ckpt_diff's max relative norm 1e-5 (fp32 summation order
#    only: cuDNN may choose other algorithms for 16 images than for 32, and the sum
#    of two half-batch gradients is not the whole batch's in the same order).
#  - resnet20's batch norm normalises with each rank's own 16 images, so 2 × 16 is not
#    1 × 32: hp is compared with cpu instead (the same per-rank statistics). Both
#    models: hp vs cpu every step's loss within relative 1e-3 and final parameters within
#    2e-3 (the GPU-vs-CPU bounds of nccl_vs_mpi_gpu.sh: cuDNN/cuBLAS vs oneDNN summation
#    order), and training moved the parameters by more than 10× that (step K to N).
#  - hp's step-K checkpoint resumes (copied into a fresh run directory, --resume auto)
#    on 1 GPU rank × 32 and on the CPU (2 ranks × 16, --device cpu) and trains on to N:
#    each says where it resumed, the CPU continuation ends within the GPU-vs-CPU bounds
#    of hp's step N; on 1 GPU rank mnist_cnn ends within 1e-5 of hp's step N (another
#    world size, the same global batch: docs/checkpoints.md), resnet20 (other batch-norm
#    populations) trains on with finite losses and moves its parameters.
#  - --sync-bn over the 2 GPU ranks (our batch norm, CNNSCALE_GPU_BN=own, bf16; its sums on
#    the host): resnet20 2 × 16 vs 1 GPU rank × 32 with the same batch norm, every loss
#    within relative 3e-2 (bf16: per-layer rounding, and cuDNN's algorithms for 16 and 32
#    images differ) and the running statistics within 3e-2; --sync-bn with cuDNN's batch
#    norm is refused naming CNNSCALE_GPU_BN=own.
# With several GPUs visible the runs are kept to the first one (CUDA_VISIBLE_DEVICES).
# SKIP (77) without a CUDA device. NOT YET RUN ON A GPU.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_gpus 1 "the host data plane's ranks share one GPU"
first=${CUDA_VISIBLE_DEVICES:-0}
export CUDA_VISIBLE_DEVICES=${first%%,*}
echo "note: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES: every run on one GPU"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
N=6 K=3 B=32 TOL_SAME=1e-5 TOL_LOSS=1e-3 TOL_PARAM=2e-3
LAST=$(printf 'checkpoints/step-%08d.h5' $N) KTH=$(printf 'checkpoints/step-%08d.h5' $K)

run() {  # NAME NP PLANE(hp|g1|cpu) extra args...: trains into $TMP/NAME, output in $TMP/NAME.out
  local name=$1 np=$2 plane=$3; shift 3
  local args=()
  case $plane in
    hp) args=(--device cuda --backend mpi --check-replicas 1) ;;
    g1) args=(--backend nccl) ;;
    cpu) args=(--device cpu --backend mpi --check-replicas 1) ;;
  esac
  timeout 300 $M -n "$np" "$CNNSCALE" train "${COMMON[@]}" "${args[@]}" --batch-size $((B / np)) \
    --run-dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>&1
  expect_eq "$name: exit status" 0 "$?"
  metrics_losses "$TMP/$name/metrics.jsonl" >"$TMP/$name.losses" 2>/dev/null
}
# cmp_losses LABEL A B TOL: every step A logged is in B too, each loss within relative TOL
# of B's, all finite (A's step count is checked by the caller).
cmp_losses() {
  python3 - "$TMP/$2.losses" "$TMP/$3.losses" "$4" >"$TMP/cmp.$2.$3" 2>&1 <<'PY'
import math, sys
a = dict((int(s), float(v)) for s, v in (l.split() for l in open(sys.argv[1])))
b = dict((int(s), float(v)) for s, v in (l.split() for l in open(sys.argv[2])))
tol = float(sys.argv[3])
ok = bool(a) and set(a) <= set(b) and all(math.isfinite(v) for v in list(a.values()) + list(b.values()))
worst = max(abs(a[s] - b[s]) / abs(b[s]) for s in a) if ok else float("inf")
print(f"worst relative loss difference {worst:.3e} over steps {sorted(a)}; {sorted(a.items())} vs {sorted(b.items())}")
sys.exit(0 if ok and worst < tol else 1)
PY
  expect_eq "$1 ($(cut -c1-60 "$TMP/cmp.$2.$3" | head -n 1))" 0 "$?"
}

for m in mnist_cnn resnet20; do
  COMMON=(--synthetic --synthetic-samples 512 --model "$m" --seed 11 --optimizer sgd --lr 0.05 --momentum 0.9
    --weight-decay 1e-4 --tf32 off --cudnn-benchmark off --no-eval --no-tensorboard --log-every 1)
  run "$m.hp" 2 hp --max-steps $N --checkpoint-every $K --keep-checkpoints 100
  expect_grep "$m.hp: 2 ranks, backend mpi, global batch $B" \
    "2 rank\(s\) on 1 node\(s\), backend mpi, .*= $B global" "$TMP/$m.hp.out"
  expect_grep "$m.hp: rank 0 says the 2 ranks share one GPU over the host plane" \
    'GPU ranks over the host data plane \(mpi\): .*up to 2 ranks share one GPU' "$TMP/$m.hp.out"
  expect_grep "$m.hp: replicas bitwise identical after every step" "replicas identical at all $N check" "$TMP/$m.hp.out"
  expect_grep "$m.hp: run.json backend mpi" '"backend": *"mpi"' "$TMP/$m.hp/run.json"
  expect_grep "$m.hp: run.json device cuda:0" '"device": *"cuda:0' "$TMP/$m.hp/run.json"
  expect_grep "$m.hp: run.json world size 2" '"world_size": *2' "$TMP/$m.hp/run.json"
  expect_eq "$m.hp: $N losses recorded" "$N" "$(wc -l <"$TMP/$m.hp.losses")"

  run "$m.cpu" 2 cpu --max-steps $N --checkpoint-every $K --keep-checkpoints 100
  expect_grep "$m.cpu: run.json device cpu" '"device": *"cpu"' "$TMP/$m.cpu/run.json"
  cmp_losses "$m: host plane vs CPU on MPI, every loss within $TOL_LOSS" "$m.hp" "$m.cpu" $TOL_LOSS
  expect_ckpt_close "$m: host plane vs CPU on MPI, final parameters" "$TMP/$m.cpu/$LAST" "$TMP/$m.hp/$LAST" $TOL_PARAM
  echo "ckpt_diff cpu hp: $CKPT_DIFF_OUT"
  moved=$("$CNNSCALE_BUILD/tests/ckpt_diff" "$TMP/$m.hp/$KTH" "$TMP/$m.hp/$LAST" | awk '{print $8}')
  python3 -c "import sys; sys.exit(0 if float('${moved:-0}') > 10 * $TOL_PARAM else 1)"
  expect_eq "$m: training moved the parameters by more than 10x the tolerance (step $K -> $N: ${moved:-?})" 0 "$?"

  if [ "$m" = mnist_cnn ]; then
    run "$m.g1" 1 g1 --max-steps $N --checkpoint-every $K --keep-checkpoints 100
    expect_grep "$m.g1: 1 rank, backend nccl" "1 rank\(s\) on 1 node\(s\), backend nccl, .*= $B global" "$TMP/$m.g1.out"
    expect_grep "$m.g1: run.json device cuda:0" '"device": *"cuda:0' "$TMP/$m.g1/run.json"
    cmp_losses "$m: 2 ranks x $((B / 2)) over the host plane vs 1 GPU rank x $B, every loss within $TOL_SAME" \
      "$m.hp" "$m.g1" $TOL_SAME
    expect_ckpt_close "$m: 2 x $((B / 2)) host plane vs 1 x $B GPU, final parameters" "$TMP/$m.g1/$LAST" \
      "$TMP/$m.hp/$LAST" $TOL_SAME
    echo "ckpt_diff g1 hp: $CKPT_DIFF_OUT"
  fi

  # hp's step-K checkpoint, resumed on 1 GPU rank and on the CPU.
  for r in g1 cpu; do
    np=2; [ $r = g1 ] && np=1
    name=$m.resume-$r
    mkdir -p "$TMP/$name/checkpoints" && cp "$TMP/$m.hp/$KTH" "$TMP/$name/checkpoints/"
    run "$name" $np $r --max-steps $N --resume auto
    expect_grep "$name: resumed at step $K" "resumed from .*step-0*$K.h5 at step $K" "$TMP/$name.out"
    expect_file "$name: step $N checkpoint" "$TMP/$name/$LAST"
    expect_eq "$name: steps $((K + 1))..$N recorded" "$(seq $((K + 1)) $N | tr '\n' ' ')" \
      "$(awk '{printf "%s ", $1}' "$TMP/$name.losses")"
  done
  cmp_losses "$m: resumed on the CPU vs the host-plane run, steps $((K + 1))..$N within $TOL_LOSS" \
    "$m.resume-cpu" "$m.hp" $TOL_LOSS
  expect_ckpt_close "$m: resumed on the CPU vs the host-plane run, final parameters" "$TMP/$m.hp/$LAST" \
    "$TMP/$m.resume-cpu/$LAST" $TOL_PARAM
  if [ "$m" = mnist_cnn ]; then
    cmp_losses "$m: resumed on 1 GPU rank vs the host-plane run, steps $((K + 1))..$N within $TOL_SAME" \
      "$m.resume-g1" "$m.hp" $TOL_SAME
    expect_ckpt_close "$m: resumed on 1 GPU rank vs the host-plane run, final parameters" "$TMP/$m.hp/$LAST" \
      "$TMP/$m.resume-g1/$LAST" $TOL_SAME
  else
    cmp_losses "$m: resumed on 1 GPU rank: finite losses near the host-plane run's (within 0.5)" \
      "$m.resume-g1" "$m.hp" 0.5
    "$CNNSCALE_BUILD/tests/ckpt_diff" "$TMP/$m.hp/$KTH" "$TMP/$m.resume-g1/$LAST" >"$TMP/$m.g1moved" 2>&1
    expect_grep "$m: resumed on 1 GPU rank: the parameters moved from step $K" 'identical 0' "$TMP/$m.g1moved"
  fi
done
# --sync-bn over GPU ranks (issue 38): statistics of the global batch.
COMMON=(--synthetic --synthetic-samples 512 --model resnet20 --seed 11 --optimizer sgd --lr 0.05 --momentum 0.9
  --weight-decay 1e-4 --precision bf16 --cudnn-benchmark off --no-eval --no-tensorboard --log-every 1)
timeout 300 $M -n 2 "$CNNSCALE" train "${COMMON[@]}" --device cuda --backend mpi --batch-size 16 --max-steps 1 \
  --sync-bn --run-dir "$TMP/sync.refused" >"$TMP/sync.refused.out" 2>&1
expect_eq "--sync-bn with cuDNN's batch norm: status 2" 2 "$?"
expect_grep "--sync-bn with cuDNN's batch norm: names CNNSCALE_GPU_BN=own" \
  "cnnscale: error: --sync-bn: .*CNNSCALE_GPU_BN=own" "$TMP/sync.refused.out"
export CNNSCALE_GPU_BN=own
run sync.hp 2 hp --max-steps $N --checkpoint-every $N --sync-bn
run sync.g1 1 g1 --max-steps $N --checkpoint-every $N
unset CNNSCALE_GPU_BN
expect_grep "sync.hp: run.json gpu bn own" '"bn": *"own"' "$TMP/sync.hp/run.json"
expect_grep "sync.hp: replicas bitwise identical" "replicas identical at all $N check" "$TMP/sync.hp.out"
cmp_losses "--sync-bn: 2 GPU ranks x 16 vs 1 GPU rank x 32, every loss within 3e-2" sync.hp sync.g1 3e-2
expect_ckpt_close "--sync-bn: 2 x 16 vs 1 x 32, parameters and running statistics" "$TMP/sync.g1/$LAST" \
  "$TMP/sync.hp/$LAST" 3e-2
echo "ckpt_diff sync g1 hp: $CKPT_DIFF_OUT"
if [ "$_fail" -gt 0 ]; then
  cat "$TMP"/cmp.* 2>/dev/null
  for f in "$TMP"/*.out; do echo "    --- $f"; tail -8 "$f" | sed 's/^/    | /'; done
fi
finish
