#!/usr/bin/env bash
# env_gpu_reason.sh — where no GPU is usable, `cnnscale env` says why (CUDA's own error
# text, driver and runtime versions, the fix), --backend nccl fails with that reason, and
# --backend auto warns once (rank 0) when the environment says GPUs exist but the CPU is
# chosen; `train --device` (issue 38): cuda over a host plane fails naming the rank and
# CUDA's reason once, cpu with nccl is refused, cpu with auto trains without the warning.
# SKIPs where a GPU is actually usable. (issue 18, item 1)
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
# The GPU hints must come only from what this test sets.
unset SLURM_JOB_GPUS SLURM_STEP_GPUS SLURM_GPUS_ON_NODE CUDA_VISIBLE_DEVICES

timeout 120 "$CNNSCALE" env >"$TMP/env.out" 2>"$TMP/env.err"
expect_eq "env: status" 0 "$?"
if grep -q 'device=cuda' "$TMP/env.out"; then
  echo "SKIP: a GPU is usable here ($(grep -o 'device=[^ ]*' "$TMP/env.out" | head -1)); nothing to explain"
  exit 77
fi
cuda_build=0
"$CNNSCALE" --version | grep -q CUDA && cuda_build=1
if [ "$cuda_build" = 1 ]; then
  # A CUDA build where cudaGetDeviceCount fails: CUDA's text must survive, with versions and the fix.
  why=$(sed -n 's/.* cuda_error="\([^"]*\)".*/\1/p' "$TMP/env.out" | head -1)
  expect_ne "env: rank line carries cuda_error=\"…\"" "" "$why"
  expect_grep "env: reason line with CUDA's error text" "^no GPU on rank 0: cudaGetDeviceCount failed: $why \\(cudaError[A-Za-z]+\\)" "$TMP/env.out"
  expect_grep "env: runtime version named" "the CUDA [0-9]+\\.[0-9]+ runtime \\(cudaRuntimeGetVersion [0-9]+\\)" "$TMP/env.out"
  expect_grep "env: driver version named" "cudaDriverGetVersion [0-9]+" "$TMP/env.out"
  expect_grep "env: a fix named" "Fix: " "$TMP/env.out"
  if grep -q "cudaErrorInsufficientDriver" "$TMP/env.out"; then
    expect_grep "env: insufficient driver, the exact text" \
      'CUDA driver version is insufficient for CUDA runtime version' "$TMP/env.out"
    expect_grep "env: the driver branch and the rebuild named" \
      "driver is R[0-9]+ or newer .*rebuild cnnscale against the cluster's CUDA" "$TMP/env.out"
  fi
else
  expect_grep "env: build without CUDA says so" "^no GPU on rank 0: this cnnscale was built without CUDA" "$TMP/env.out"
fi
expect_eq "env: no warning without GPU hints" "" "$(cat "$TMP/env.err")"

# --backend nccl: the same reason in the error, printed once for two ranks.
timeout 120 $M -n 2 "$CNNSCALE" env --backend nccl >"$TMP/nccl.out" 2>&1
expect_eq "nccl: status" 2 "$?"
if [ "$cuda_build" = 1 ]; then
  expect_grep "nccl: error names the rank and the reason" \
    "cnnscale: error: --backend nccl .*rank 0 on $(hostname) has none: cudaGetDeviceCount failed" "$TMP/nccl.out"
else  # no NCCL in this build at all: that is the reason, before any rank's GPU
  expect_grep "nccl: error says the build has no NCCL and the ways out" \
    "cnnscale: error: --backend nccl: this cnnscale was built without CUDA/NCCL .*use --backend mpi or rebuild" \
    "$TMP/nccl.out"
fi
expect_eq "nccl: printed once" 1 "$(grep -c 'cnnscale: error:' "$TMP/nccl.out")"

# --backend auto with Slurm saying the job has GPUs: CPU chosen, one warning with the reason.
timeout 120 $M -n 2 -x SLURM_JOB_GPUS=0,1 "$CNNSCALE" env >"$TMP/auto.out" 2>"$TMP/auto.err"
expect_eq "auto+hints: status" 0 "$?"
expect_eq "auto+hints: both ranks on the CPU" 2 "$(grep -c 'device=cpu backend=mpi' "$TMP/auto.out")"
expect_grep "auto+hints: warning names the hint and the reason" \
  "^cnnscale: warning: --backend auto trains on the CPU \\(MPI\\) although .* looks like a GPU node \\(SLURM_JOB_GPUS=0,1\\): rank 0 on .* has no usable GPU: " \
  "$TMP/auto.err"
expect_eq "auto+hints: warned once" 1 "$(grep -c 'cnnscale: warning:' "$TMP/auto.err")"

# --backend mpi: the CPU knowingly, no warning.
timeout 120 $M -n 2 -x SLURM_JOB_GPUS=0,1 "$CNNSCALE" env --backend mpi >"$TMP/mpi.out" 2>"$TMP/mpi.err"
expect_eq "mpi: status" 0 "$?"
expect_eq "mpi: no warning" "" "$(grep 'cnnscale: warning' "$TMP/mpi.err")"

# train --device (issue 38).
T="train --synthetic --model mnist_cnn --batch-size 8 --max-steps 2 --no-eval --no-tensorboard"
# shellcheck disable=SC2086
timeout 120 $M -n 2 "$CNNSCALE" $T --device cuda --backend mpi >"$TMP/dc.out" 2>&1
expect_eq "train --device cuda --backend mpi without a GPU: status" 2 "$?"
if [ "$cuda_build" = 1 ]; then
  expect_grep "--device cuda: the rank, its host and CUDA's reason" \
    "cnnscale: error: --device cuda needs a GPU on every rank, but rank 0 on $(hostname): cudaGetDeviceCount failed" \
    "$TMP/dc.out"
  expect_grep "--device cuda: the way out" "train on the CPU with --device cpu" "$TMP/dc.out"
else
  expect_grep "--device cuda: a build without CUDA says so" "cnnscale: error: .*without CUDA" "$TMP/dc.out"
fi
expect_eq "--device cuda: printed once" 1 "$(grep -c 'cnnscale: error:' "$TMP/dc.out")"
# --device cuda alone (backend auto: NCCL): the error names the switch typed and --device cpu,
# not --backend nccl / --backend mpi (which would keep --device cuda and fail again).
# shellcheck disable=SC2086
timeout 120 $M -n 2 "$CNNSCALE" $T --device cuda >"$TMP/dca.out" 2>&1
expect_eq "train --device cuda without a GPU: status" 2 "$?"
if [ "$cuda_build" = 1 ]; then
  expect_grep "--device cuda (auto backend): the switch typed, rank, host" \
    "cnnscale: error: --device cuda needs a GPU on every rank, but rank 0 on $(hostname) has none: cudaGetDeviceCount failed" \
    "$TMP/dca.out"
else
  expect_grep "--device cuda (auto backend): a build without CUDA says so" \
    "cnnscale: error: --device cuda: this cnnscale was built without CUDA" "$TMP/dca.out"
fi
expect_grep "--device cuda (auto backend): the way out is --device cpu" "or use --device cpu for a CPU run" "$TMP/dca.out"
expect_eq "--device cuda (auto backend): no --backend advice" "" "$(grep -o 'use --backend [a-z]*' "$TMP/dca.out")"
# shellcheck disable=SC2086
timeout 120 $M -n 2 "$CNNSCALE" $T --device cpu --backend nccl >"$TMP/dcn.out" 2>&1
expect_eq "train --device cpu --backend nccl: status" 2 "$?"
expect_grep "--device cpu --backend nccl: refused with the ways out" \
  "cnnscale: error: --device cpu with --backend nccl: NCCL sums device buffers; use --backend mpi" "$TMP/dcn.out"
# shellcheck disable=SC2086
timeout 60 "$CNNSCALE" $T --device gpu >"$TMP/dbad.out" 2>&1
expect_eq "train --device gpu: status" 2 "$?"
expect_grep "--device gpu: names the choices" "cnnscale: error: --device takes auto, cuda or cpu, not 'gpu'" "$TMP/dbad.out"
# shellcheck disable=SC2086
timeout 120 $M -n 2 -x SLURM_JOB_GPUS=0,1 "$CNNSCALE" $T --device cpu >"$TMP/dcpu.out" 2>"$TMP/dcpu.err"
expect_eq "train --device cpu (auto backend, GPU hints): status" 0 "$?"
expect_eq "--device cpu: no 'trains on the CPU' warning" "" "$(grep 'cnnscale: warning' "$TMP/dcpu.err")"
finish
