#!/usr/bin/env bash
# An error on one rank alone, mid-training (CNNSCALE_INJECT_ERROR=RANK:STEP: a UserError
# during backward with gradient buckets in flight, as a bad label or a failed read on
# one rank), ends the whole job within seconds with that rank's message and status 2:
# not at the peers' --collective-timeout (60 s here), not with a crash. 3 ranks, the
# failing rank 1 or rank 0; gradients summed in node-shared memory (the default here)
# and by MPI allreduces (CNNSCALE_SHM_ALLREDUCE=0).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
ARGS=(--synthetic --model "conv(8,3) relu conv(8,3) relu maxpool(2) flatten linear(64) relu linear(10)"
      --batch-size 16 --max-steps 1000 --log-every 1 --no-eval --first-bucket-mb 0.001 --bucket-mb 0.001
      --collective-timeout 60)

run_case() {  # name, failing rank, CNNSCALE_SHM_ALLREDUCE
  local name=$1 rank=$2 shm=$3 start elapsed rc
  start=$(date +%s)
  CNNSCALE_INJECT_ERROR="$rank:3" CNNSCALE_SHM_ALLREDUCE=$shm timeout 120 $M -n 3 \
    -x CNNSCALE_INJECT_ERROR -x CNNSCALE_SHM_ALLREDUCE "$CNNSCALE" train "${ARGS[@]}" >"$TMP/$name.out" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  expect_eq "$name: status 2 (a user error)" 2 "$rc"
  expect_grep "$name: the failing rank's message" \
    "cnnscale: error: rank $rank on $(hostname): injected error during backward of step 3 \(CNNSCALE_INJECT_ERROR" \
    "$TMP/$name.out"
  expect_eq "$name: said once" 1 "$(grep -c 'cnnscale: error:' "$TMP/$name.out")"
  if grep -Eq 'waited [0-9]+ s in|Segmentation|Signal: |Aborted|terminate called' "$TMP/$name.out"; then
    bad "$name: no watchdog report or crash"; sed 's/^/    | /' "$TMP/$name.out" | head -20
  else ok "$name: no watchdog report or crash"; fi
  python3 -c "import sys; sys.exit(0 if $elapsed < 30 else 1)"
  expect_eq "$name: ended within seconds, long before the 60 s watchdog (took ${elapsed}s incl. start-up)" 0 "$?"
}

run_case rank1_shm 1 1
run_case rank1_mpi 1 0
run_case rank0_mpi 0 0
# The hook names RANK:STEP; anything else is refused before training.
CNNSCALE_INJECT_ERROR=oops "$CNNSCALE" train --synthetic --max-steps 1 >"$TMP/bad.out" 2>&1
expect_eq "malformed CNNSCALE_INJECT_ERROR: status" 2 "$?"
expect_grep "malformed CNNSCALE_INJECT_ERROR explained" 'CNNSCALE_INJECT_ERROR=oops is not RANK:STEP' "$TMP/bad.out"
finish
