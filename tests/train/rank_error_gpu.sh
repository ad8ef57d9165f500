#!/usr/bin/env bash
# The GPU form of rank_error.sh (issue 18, item 3): 2 ranks on 2 GPUs with --backend
# nccl; rank 1 fails during backward of step 3 with NCCL sums in flight. Before the
# fix its unwinding waited in ~NcclPendingReduce and ncclCommDestroy for a peer that
# was waiting for it, so the job ended at the 300 s watchdog and the message was lost;
# now the Trainer aborts NCCL (ncclCommAbort) and main() ends the job in seconds.
# SKIP (77) with fewer than 2 GPUs: NCCL refuses two ranks on one GPU.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_gpus 2 "NCCL does not allow two ranks on one GPU"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
start=$(date +%s)
CNNSCALE_INJECT_ERROR=1:3 timeout 180 $M -n 2 -x CNNSCALE_INJECT_ERROR "$CNNSCALE" train --synthetic --backend nccl \
  --model resnet20 --image-size 32 --channels 3 --batch-size 64 --max-steps 1000 --log-every 1 --no-eval \
  --first-bucket-mb 0.05 --bucket-mb 0.05 --collective-timeout 60 >"$TMP/gpu.out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
expect_eq "status 2 (a user error)" 2 "$rc"
expect_grep "backend nccl was used" 'backend nccl' "$TMP/gpu.out"
expect_grep "the failing rank's message" \
  "cnnscale: error: rank 1 on $(hostname): injected error during backward of step 3 \(CNNSCALE_INJECT_ERROR" "$TMP/gpu.out"
if grep -Eq 'waited [0-9]+ s in|Segmentation|Signal: |terminate called' "$TMP/gpu.out"; then
  bad "no watchdog report or crash"; sed 's/^/    | /' "$TMP/gpu.out" | head -20
else ok "no watchdog report or crash"; fi
python3 -c "import sys; sys.exit(0 if $elapsed < 45 else 1)"
expect_eq "ended within seconds, before the 60 s watchdog (took ${elapsed}s incl. start-up)" 0 "$?"
finish
