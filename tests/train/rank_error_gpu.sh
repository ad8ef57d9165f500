#!/usr/bin/env bash
# rank_error_gpu.sh — the GPU form of rank_error.sh (issue 18 item 3, issue 38): 2 GPU
# ranks, resnet20; rank 1 fails during backward of step 3 with gradient sums in flight.
# The job must end within seconds with that rank's message and status 2, not at the
# peers' 60 s --collective-timeout (the watchdog), not with a crash. Which plane
# (tests/lib.sh gpu_plane):
#  - 2+ GPUs: NCCL. Before issue 18's fix the unwinding waited in ~NcclPendingReduce and
#    ncclCommDestroy for a peer that was waiting for it, so the job ended at the
#    watchdog and the message was lost; now the Trainer aborts NCCL (ncclCommAbort) and
#    main() ends the job (MPI_Abort).
#  - 1 GPU: the host data plane (--device cuda --backend mpi, both ranks on that GPU;
#    NCCL refuses two ranks on one GPU). A staged sum starts MPI only in its wait(), so
#    the failing rank leaves none behind; its peer blocks in MPI and main()'s MPI_Abort
#    ends it, as on the CPU (docs/gpu.md, "Errors on one rank"): the message said once,
#    no abort report, as rank_error.sh asserts.
# SKIP (77) without a CUDA device.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
gpu_plane
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
start=$(date +%s)
CNNSCALE_INJECT_ERROR=1:3 timeout 180 $M -n 2 -x CNNSCALE_INJECT_ERROR "$CNNSCALE" train --synthetic \
  "${GPU_BACKEND_ARGS[@]}" --model resnet20 --image-size 32 --channels 3 --batch-size 64 --max-steps 1000 \
  --log-every 1 --no-eval --first-bucket-mb 0.05 --bucket-mb 0.05 --collective-timeout 60 >"$TMP/gpu.out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
expect_eq "status 2 (a user error)" 2 "$rc"
expect_grep "backend $GPU_BACKEND was used" "2 rank\(s\) on 1 node\(s\), backend $GPU_BACKEND" "$TMP/gpu.out"
[ "$GPU_PLANE" = host ] && expect_grep "host plane: rank 0 says the GPU ranks go over it" \
  'GPU ranks over the host data plane \(mpi\)' "$TMP/gpu.out"
expect_grep "the failing rank's message" \
  "cnnscale: error: rank 1 on $(hostname): injected error during backward of step 3 \(CNNSCALE_INJECT_ERROR" "$TMP/gpu.out"
crash='waited [0-9]+ s in|Segmentation|Signal: |terminate called'
if [ "$GPU_PLANE" = host ]; then  # what rank_error.sh asserts of MPI
  crash="$crash|Aborted"
  expect_eq "said once" 1 "$(grep -c 'cnnscale: error:' "$TMP/gpu.out")"
fi
if grep -Eq "$crash" "$TMP/gpu.out"; then
  bad "no watchdog report or crash"; sed 's/^/    | /' "$TMP/gpu.out" | head -20
else ok "no watchdog report or crash"; fi
python3 -c "import sys; sys.exit(0 if $elapsed < 45 else 1)"
expect_eq "ended within seconds, before the 60 s watchdog (took ${elapsed}s incl. start-up)" 0 "$?"
[ "$_fail" -gt 0 ] && sed 's/^/    | /' "$TMP/gpu.out" | tail -20
finish
