#!/usr/bin/env bash
# resume_gpu.sh — bitwise resume on the GPU (issue 18, "Tests that must exist"; issue 38):
# the CUDA model, resnet20 + AdamW (batch norm buffers) and mnist_cnn + SGD momentum
# (dropout masks from the step-seeded hash), with 1 rank (--backend nccl, 1 GPU) and 2
# ranks: over NCCL on 2 GPUs where they exist, else over the host data plane on the one
# GPU (--device cuda --backend mpi: tests/lib.sh gpu_plane). N = 10 steps, checkpoints
# every 4.
#  - X: 10 steps straight;
#  - R: X's step-4 checkpoint copied into a fresh run directory, --resume auto to 10:
#       bitwise X's step 10 (h5diff of /model and /optimizer);
#  - where algorithm choices are deterministic (no --cudnn-benchmark, or off):
#    X2: X again, bitwise X (the GPU path is deterministic run to run: if this fails,
#        the resume checks cannot pass and the cause is a non-deterministic kernel);
#    Y: 4 steps, stop, --resume auto to 10 in the same run directory: bitwise X.
# With --cudnn-benchmark on (when `cnnscale train --help` lists the option) the timed
# algorithm choice may differ from run to run, so only R is required: its choices come
# from the checkpoint, which must make the continuation bitwise X's.
# The checkpoint's root attribute "tuning" holds the algorithms (one line per distinct
# convolution and direction); run.json records cudnn_benchmark.
# Not vacuous: every run says its backend (nccl; mpi for the host plane, whose runs also
# say they share the GPU over it), R and Y say where they resumed, and the parameters
# moved between step 4 and step 10.
# SKIP (77) without a CUDA device.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
gpu_plane
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
N=10 K=4
LAST=$(printf 'checkpoints/step-%08d.h5' $N) KTH=$(printf 'checkpoints/step-%08d.h5' $K)
settings=(default)
if "$CNNSCALE" train --help 2>/dev/null | grep -q -- '--cudnn-benchmark'; then settings=(on off); fi
nps=(1 2)
train() {  # NAME NP RUNDIR extra args...: 1 rank on NCCL, 2 over gpu_plane's choice
  local name=$1 np=$2 dir=$3; shift 3
  local plane=(--backend nccl) be=nccl
  [ "$np" -ge 2 ] && plane=("${GPU_BACKEND_ARGS[@]}") be=$GPU_BACKEND
  timeout 600 $M -n "$np" "$CNNSCALE" train "${COMMON[@]}" "${plane[@]}" --batch-size $((32 / np)) --run-dir "$dir" \
    "$@" >"$TMP/$name.out" 2>&1
  expect_eq "$name: exit status" 0 "$?"
  expect_grep "$name: backend $be" "$np rank\(s\) on 1 node\(s\), backend $be" "$TMP/$name.out"
  if [ "$np" -ge 2 ] && [ "$GPU_PLANE" = host ]; then
    expect_grep "$name: the GPU model over the host data plane" 'GPU ranks over the host data plane \(mpi\)' \
      "$TMP/$name.out"
  fi
}
for bench in "${settings[@]}"; do
  bopt=(); [ "$bench" != default ] && bopt=(--cudnn-benchmark "$bench")
  for np in "${nps[@]}"; do
    for m in resnet20 mnist_cnn; do
      case $m in
        resnet20) COMMON=(--synthetic --model resnet20 --image-size 32 --channels 3 --classes 10
                          --optimizer adamw --lr 1e-3 --weight-decay 1e-2) ;;
        mnist_cnn) COMMON=(--synthetic --model mnist_cnn --optimizer sgd --lr 0.05 --momentum 0.9
                           --weight-decay 1e-4) ;;
      esac
      COMMON+=(--seed 9 --no-eval --no-tensorboard --log-every 1 "${bopt[@]}")
      c=$m.np$np.$bench
      train "$c.X" "$np" "$TMP/$c.X" --max-steps $N --checkpoint-every $K
      "$CNNSCALE_BUILD/tests/ckpt_diff" "$TMP/$c.X/$KTH" "$TMP/$c.X/$LAST" >"$TMP/$c.moved" 2>&1
      expect_grep "$c: the parameters moved between step $K and $N" 'identical 0' "$TMP/$c.moved"
      if [ "$bench" != default ]; then  # the algorithms travel with the checkpoint; run.json records the option
        h5dump -a /tuning "$TMP/$c.X/$KTH" >"$TMP/$c.tuning" 2>&1
        expect_grep "$c: the checkpoint stores the convolution algorithms (attribute tuning)" \
          "fwd n=$((32 / np)) c=[0-9]+ h=[0-9]+ w=[0-9]+ k=[0-9]+ kernel=[0-9]+ pad=[0-9]+ stride=[0-9]+ math=tf32(nhwc)? algo=[0-9]+( mathtype=[0-9])?" \
          "$TMP/$c.tuning"
        want=false; [ "$bench" = on ] && want=true
        expect_grep "$c: run.json cudnn_benchmark $want" "\"cudnn_benchmark\": *$want" "$TMP/$c.X/run.json"
      fi
      mkdir -p "$TMP/$c.R/checkpoints" && cp "$TMP/$c.X/$KTH" "$TMP/$c.R/checkpoints/"
      train "$c.R" "$np" "$TMP/$c.R" --max-steps $N --resume auto
      expect_grep "$c.R: resumed at step $K" "resumed from .*step-0*$K.h5 at step $K" "$TMP/$c.R.out"
      expect_ckpt_bitwise "$c: X's step-$K checkpoint resumed to $N == X" "$TMP/$c.X/$LAST" "$TMP/$c.R/$LAST"
      if [ "$bench" != on ]; then
        train "$c.X2" "$np" "$TMP/$c.X2" --max-steps $N --checkpoint-every $K
        expect_ckpt_bitwise "$c: two straight runs (deterministic GPU path)" "$TMP/$c.X/$LAST" "$TMP/$c.X2/$LAST"
        train "$c.Y1" "$np" "$TMP/$c.Y" --max-steps $K
        train "$c.Y2" "$np" "$TMP/$c.Y" --max-steps $N --resume auto
        expect_grep "$c.Y: resumed at step $K" "resumed from .*step-0*$K.h5 at step $K" "$TMP/$c.Y2.out"
        expect_ckpt_bitwise "$c: $K steps, stop, --resume auto to $N == $N straight" "$TMP/$c.X/$LAST" "$TMP/$c.Y/$LAST"
      fi
    done
  done
done
if [ "$_fail" -gt 0 ]; then for f in "$TMP"/*.out; do echo "    --- $f"; tail -6 "$f" | sed 's/^/    | /'; done; fi
finish
