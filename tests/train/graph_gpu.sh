#!/usr/bin/env bash
# graph_gpu.sh — the training step as CUDA graphs through `cnnscale train`
# (CNNSCALE_GPU_GRAPH=1, nn/cuda/step_graph.hpp; issue 37 item 3): resnet20 in bf16 with
# our batch norm (CNNSCALE_GPU_BN=own: fused ReLU and residual add) on synthetic 3×32×32,
# 1 rank, 2 epochs of 8 steps with evaluation after each (another batch size, new plans),
# checkpoints every 5, --cudnn-benchmark off (the same algorithms in every run).
#  - with graphs the run's checkpoint at step 16 is bitwise the run without them, and its
#    step-5 checkpoint resumed with graphs to 16 is bitwise too;
#  - run.json says so: gpu.cuda_graph true, gpu.cuda_graph_steps >= 4, the note names the
#    captured graphs; without: false, 0, no note;
#  - where no graph may be used the run says why in run.json and trains as is:
#    mnist_cnn (dropout: a seed per step) and 2 ranks (their sums overlap backward; over
#    NCCL with 2 GPUs, else the host data plane on one: tests/lib.sh gpu_plane).
# SKIP (77) without a CUDA device.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
gpu_plane
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
LAST=checkpoints/step-00000016.h5 FIFTH=checkpoints/step-00000005.h5
train() {  # NAME GRAPH(0|1) NP MODEL extra args...
  local name=$1 graph=$2 np=$3 model=$4; shift 4
  local plane=(--backend nccl) chans=3 size=32
  [ "$np" -ge 2 ] && plane=("${GPU_BACKEND_ARGS[@]}")
  [ "$model" = mnist_cnn ] && chans=1 size=28
  CNNSCALE_GPU_GRAPH=$graph CNNSCALE_GPU_BN=own timeout 600 $M -n "$np" "$CNNSCALE" train --synthetic "${plane[@]}" \
    --model "$model" --image-size $size --channels $chans --classes 10 --synthetic-samples $((256 * np)) --epochs 2 \
    --batch-size 32 --optimizer sgd --lr 0.05 --momentum 0.9 --seed 4 --no-tensorboard --log-every 1 \
    --cudnn-benchmark off --precision bf16 --run-dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>&1
  expect_eq "$name: exit status" 0 "$?"
}
gpu_json() {  # RUNDIR: run.json's gpu object, one field per line (key=value)
  python3 -c 'import json,sys
g = json.load(open(sys.argv[1] + "/run.json")).get("gpu") or {}
for k in ("cuda_graph", "cuda_graph_steps", "cuda_graph_note"): print(f"{k}={g.get(k)}")' "$1"
}

train G 1 1 resnet20 --checkpoint-every 5 --keep-checkpoints 10
train E 0 1 resnet20 --checkpoint-every 5 --keep-checkpoints 10
gpu_json "$TMP/G" >"$TMP/G.gpu"
gpu_json "$TMP/E" >"$TMP/E.gpu"
expect_grep "G: run.json cuda_graph true" '^cuda_graph=True$' "$TMP/G.gpu"
expect_grep "G: at least 4 steps as graphs" '^cuda_graph_steps=([4-9]|[1-9][0-9]+)$' "$TMP/G.gpu"
expect_grep "G: the note names the captured graphs" '^cuda_graph_note=[0-9]+ steps from [0-9]+ captured graphs' "$TMP/G.gpu"
expect_grep "E: run.json cuda_graph false" '^cuda_graph=False$' "$TMP/E.gpu"
expect_grep "E: no steps as graphs, no note" '^cuda_graph_steps=0$' "$TMP/E.gpu"
expect_grep "E: no note" '^cuda_graph_note=$' "$TMP/E.gpu"
expect_ckpt_bitwise "graphs vs as is at step 16 (parameters, buffers, momentum)" "$TMP/G/$LAST" "$TMP/E/$LAST"
mkdir -p "$TMP/R/checkpoints" && cp "$TMP/G/$FIFTH" "$TMP/R/checkpoints/"
train R 1 1 resnet20 --resume auto
expect_grep "R: resumed at step 5" "resumed from .*step-0*5.h5 at step 5" "$TMP/R.out"
expect_ckpt_bitwise "G's step-5 checkpoint resumed with graphs to 16 == G" "$TMP/G/$LAST" "$TMP/R/$LAST"

train D 1 1 mnist_cnn --max-steps 6
gpu_json "$TMP/D" >"$TMP/D.gpu"
expect_grep "mnist_cnn (dropout): no graph" '^cuda_graph=False$' "$TMP/D.gpu"
expect_grep "mnist_cnn: run.json says dropout" '^cuda_graph_note=not used: .*dropout' "$TMP/D.gpu"
train T 1 2 resnet20 --max-steps 6
gpu_json "$TMP/T" >"$TMP/T.gpu"
expect_grep "2 ranks: no graph" '^cuda_graph=False$' "$TMP/T.gpu"
expect_grep "2 ranks: run.json says why" '^cuda_graph_note=not used: not offered by the caller: more than one rank' "$TMP/T.gpu"
if [ "$_fail" -gt 0 ]; then
  cat "$TMP"/*.gpu 2>/dev/null
  for f in "$TMP"/*.out; do echo "    --- $f"; tail -6 "$f" | sed 's/^/    | /'; done
fi
finish
