#!/usr/bin/env bash
# bf16_gpu.sh — --precision bf16 on the GPU through `cnnscale train` (issue 18, item 6;
# issue 38): resnet20 + AdamW on synthetic 3×32×32 images, 1 rank (--backend nccl) and 2
# ranks (--check-replicas 1): over NCCL on 2 GPUs where they exist, else over the host
# data plane on the one GPU (--device cuda --backend mpi: tests/lib.sh gpu_plane; bf16
# keeps fp32 gradients, so the staged sums are fp32). 10 steps, checkpoints every 4,
# --cudnn-benchmark off (deterministic algorithm choice run to run).
#  - the run says bf16 and its backend (nccl, or mpi over the host plane, which it says it
#    runs); run.json "precision": "bf16", "tf32": false (no
#    fp32 convolution or matmul is left for TF32); the checkpoint's algorithm record
#    has math=bf16 problems;
#  - its first loss is within 2e-2 of the same run in fp32 (--tf32 off; same
#    initialisation and data: bf16's rounding error at one step), and the losses are not
#    bitwise the fp32 run's (bf16 really ran);
#  - two straight runs are bitwise equal (h5diff of /model and /optimizer at step 10);
#    X's step-4 checkpoint resumed to 10 is bitwise X's step 10.
# SKIP (77) without a CUDA device.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
gpu_plane
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
N=10 K=4
LAST=$(printf 'checkpoints/step-%08d.h5' $N) KTH=$(printf 'checkpoints/step-%08d.h5' $K)
nps=(1 2)
train() {  # NAME NP RUNDIR PRECISION extra args...: 1 rank on NCCL, 2 over gpu_plane's choice
  local name=$1 np=$2 dir=$3 prec=$4; shift 4
  local extra=() plane=(--backend nccl) be=nccl
  [ "$np" -ge 2 ] && extra=(--check-replicas 1) plane=("${GPU_BACKEND_ARGS[@]}") be=$GPU_BACKEND
  timeout 600 $M -n "$np" "$CNNSCALE" train --synthetic "${plane[@]}" --model resnet20 --image-size 32 --channels 3 \
    --classes 10 --optimizer adamw --lr 1e-3 --weight-decay 1e-2 --seed 9 --no-eval --no-tensorboard --log-every 1 \
    --cudnn-benchmark off --batch-size $((32 / np)) --precision "$prec" --run-dir "$dir" "${extra[@]}" "$@" \
    >"$TMP/$name.out" 2>&1
  expect_eq "$name: exit status" 0 "$?"
  expect_grep "$name: backend $be" "$np rank\(s\) on 1 node\(s\), backend $be" "$TMP/$name.out"
  [ "$np" -ge 2 ] && expect_grep "$name: replicas bitwise identical" "replicas identical at all" "$TMP/$name.out"
  if [ "$np" -ge 2 ] && [ "$GPU_PLANE" = host ]; then
    expect_grep "$name: the GPU model over the host data plane" 'GPU ranks over the host data plane \(mpi\)' \
      "$TMP/$name.out"
  fi
}
for np in "${nps[@]}"; do
  c=np$np
  train "$c.X" "$np" "$TMP/$c.X" bf16 --max-steps $N --checkpoint-every $K
  expect_grep "$c: run.json precision bf16" '"precision": *"bf16"' "$TMP/$c.X/run.json"
  expect_grep "$c: run.json tf32 false under bf16" '"tf32": *false' "$TMP/$c.X/run.json"
  h5dump -a /tuning "$TMP/$c.X/$KTH" >"$TMP/$c.tuning" 2>&1
  expect_grep "$c: the checkpoint records bf16 convolution algorithms" \
    "fwd n=$((32 / np)) c=[0-9]+ h=[0-9]+ w=[0-9]+ k=[0-9]+ kernel=[0-9]+ pad=[0-9]+ stride=[0-9]+ math=bf16 algo=[0-9]+" \
    "$TMP/$c.tuning"
  train "$c.F" "$np" "$TMP/$c.F" fp32 --max-steps $N --tf32 off
  metrics_losses "$TMP/$c.X/metrics.jsonl" >"$TMP/$c.bf16.losses"
  metrics_losses "$TMP/$c.F/metrics.jsonl" >"$TMP/$c.fp32.losses"
  python3 - "$TMP/$c.bf16.losses" "$TMP/$c.fp32.losses" >"$TMP/$c.cmp" 2>&1 <<'PY'
import math, sys
b = [float(l.split()[1]) for l in open(sys.argv[1])]
f = [float(l.split()[1]) for l in open(sys.argv[2])]
print(f"bf16 {b}\nfp32 {f}")
ok = len(b) == len(f) == 10 and all(math.isfinite(x) for x in b)
ok = ok and abs(b[0] - f[0]) <= 2e-2 * abs(f[0]) and b != f
sys.exit(0 if ok else 1)
PY
  expect_eq "$c: 10 finite bf16 losses, the first within 2e-2 of fp32's, not bitwise fp32's ($(head -c 120 "$TMP/$c.cmp" | head -n 1))" 0 "$?"
  train "$c.X2" "$np" "$TMP/$c.X2" bf16 --max-steps $N --checkpoint-every $K
  expect_ckpt_bitwise "$c: two straight bf16 runs" "$TMP/$c.X/$LAST" "$TMP/$c.X2/$LAST"
  mkdir -p "$TMP/$c.R/checkpoints" && cp "$TMP/$c.X/$KTH" "$TMP/$c.R/checkpoints/"
  train "$c.R" "$np" "$TMP/$c.R" bf16 --max-steps $N --resume auto
  expect_grep "$c.R: resumed at step $K" "resumed from .*step-0*$K.h5 at step $K" "$TMP/$c.R.out"
  expect_ckpt_bitwise "$c: X's step-$K checkpoint resumed to $N == X" "$TMP/$c.X/$LAST" "$TMP/$c.R/$LAST"
done
if [ "$_fail" -gt 0 ]; then
  cat "$TMP"/*.cmp 2>/dev/null
  for f in "$TMP"/*.out; do echo "    --- $f"; tail -6 "$f" | sed 's/^/    | /'; done
fi
finish
