#!/usr/bin/env bash
# sanitizer_gpu.sh — compute-sanitizer on the GPU model and optimiser tests (issue 18,
# "Tests that must exist"): memcheck (out-of-bounds, misaligned and invalid
# global/shared accesses, CUDA API errors) and initcheck (device reads of memory never
# written) over a few cases of test_cuda_model_gpu and test_cuda_optimizer_gpu, within a
# time budget.
#
# Why a budget and few cases: sanitised kernels run 10-100× slower and every kernel is
# instrumented when first loaded. On the H100 of 2026-11-27 (run beside the other gpu
# tests by gpu-first-run.sh, which stops a test at 210 s) memcheck of 5 model cases
# passed and initcheck of the same 5 was still running when the 210 s ran out; on the
# H200 of 2026-11-26 initcheck of 11 cases did not finish in 200 s. So:
# - CNNSCALE_SANITIZER_BUDGET (s, default 150) bounds all the tool runs together; each
#   run is stopped at what is left minus 20 s for each run after it (all that is left
#   when that would be under 10 s). A run stopped there is a failure naming the cases it
#   finished and the one it was in; a run with under 10 s left is a failure "not run
#   (budget)". So the script ends within the budget plus a few seconds, below the first
#   run's 210 s and CTest's limit.
# - The runs, most useful first: memcheck of the model cases, memcheck of our NHWC batch
#   norm's kernels (test_cuda_batchnorm_gpu on its small shapes), memcheck of every
#   optimiser case, initcheck of one optimiser case, initcheck of one model case.
# - The model cases run with CNNSCALE_TEST_CUDNN_BENCHMARK=0 (the test's own switch):
#   cuDNN's heuristic algorithm choice instead of cudnnFind, which runs (and the tool
#   instruments) every candidate algorithm's kernels. The kernels that run are still
#   checked against our allocations, workspaces included.
# Model cases (tiny shapes; together they run conv forward and backward with stride,
# padding and bias, ReLU, max-pool, batch-norm with running statistics, the residual add,
# dropout, flatten, linear (cuBLAS), the softmax cross-entropy kernel, the bf16
# conversion kernels and the bf16 store's ReLU / add / bias kernels):
#   memcheck  CNNSCALE_SANITIZER_MODEL_FILTER (a gtest filter; '*' for all)
#   initcheck CNNSCALE_SANITIZER_INITCHECK_FILTER (default: the batch-norm case, which
#             also runs conv, ReLU, flatten and linear)
# Not vacuous: each run must end on its own with "ERROR SUMMARY: 0 errors" and every
# selected test PASSED (none SKIPPED, at least one ran); the cases that passed are
# printed per run, with its seconds. memcheck runs without --leak-check: cuDNN and cuBLAS
# keep allocations until their handles go at exit, which is not our leak.
# SKIP (77), naming what is missing, without compute-sanitizer, without a GPU, or when
# the test binaries find no usable device (e.g. a driver too old for this CUDA).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
SAN=$(command -v compute-sanitizer || true)
[ -z "$SAN" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer
[ -z "$SAN" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/compute-sanitizer" ] && SAN=$CUDA_HOME/bin/compute-sanitizer
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
missing=()
[ -z "$SAN" ] && missing+=("compute-sanitizer (not on PATH, not in /usr/local/cuda/bin or \$CUDA_HOME/bin)")
[ "${gpus:-0}" -lt 1 ] && missing+=("a CUDA device (nvidia-smi lists none)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "SKIP: needs $(printf '%s; ' "${missing[@]}")"
  exit 77
fi
BUDGET=${CNNSCALE_SANITIZER_BUDGET:-150}
case $BUDGET in '' | *[!0-9]*) echo "sanitizer_gpu.sh: CNNSCALE_SANITIZER_BUDGET must be whole seconds, got '$BUDGET'" >&2; exit 2 ;; esac
MODEL_FILTER=${CNNSCALE_SANITIZER_MODEL_FILTER:-'CudaLayers.ConvStridePaddingBiasRelu:CudaLayers.BatchNormTrainingRunningStatsAndEval:CudaLayers.ResidualAddAndDropout:CudaBf16.ConversionsRoundToNearestEvenAndTranspose:CudaBf16.StoreKernelsRoundOnce'}
INIT_FILTER=${CNNSCALE_SANITIZER_INITCHECK_FILTER:-'CudaLayers.BatchNormTrainingRunningStatsAndEval'}
# Our NHWC batch norm's kernels (CNNSCALE_GPU_BN=own, issue 37): every case of
# test_cuda_batchnorm_gpu on its small shapes (CNNSCALE_BN_TEST_CASES=small, set for every
# run: the other binaries ignore it).
BN_FILTER=${CNNSCALE_SANITIZER_BN_FILTER:-'CudaBatchNormNhwc.*'}
RESERVE=20  # seconds kept for each later run
# bin tool filter, in order
RUNS=("test_cuda_model_gpu memcheck $MODEL_FILTER"
      "test_cuda_batchnorm_gpu memcheck $BN_FILTER"
      "test_cuda_optimizer_gpu memcheck *"
      "test_cuda_optimizer_gpu initcheck CudaOptimizer.AdamW"
      "test_cuda_model_gpu initcheck $INIT_FILTER")
echo "compute-sanitizer: $SAN ($("$SAN" --version 2>/dev/null | tail -n 1)); $gpus GPU(s); budget ${BUDGET} s for ${#RUNS[@]} runs"
start=$SECONDS
for i in "${!RUNS[@]}"; do
  read -r bin tool filter <<<"${RUNS[$i]}"
  what="$bin under $tool"
  later=$((${#RUNS[@]} - i - 1))
  left=$((BUDGET - (SECONDS - start)))
  limit=$((left - RESERVE * later))
  [ "$limit" -lt 10 ] && limit=$left  # a small budget goes to the first runs
  if [ "$limit" -lt 10 ]; then
    bad "$what ($filter): not run (budget: $left s of $BUDGET left; CNNSCALE_SANITIZER_BUDGET gives more)"
    continue
  fi
  [ -x "$CNNSCALE_BUILD/tests/$bin" ] || { bad "$bin built (missing: $CNNSCALE_BUILD/tests/$bin)"; continue; }
  log="$TMP/$bin.$tool.out"
  t0=$SECONDS
  # timeout signals the whole process group: the tool and the test binary under it.
  CNNSCALE_TEST_CUDNN_BENCHMARK=0 CNNSCALE_BN_TEST_CASES=small timeout -k 5 "$limit" "$SAN" --tool "$tool" --error-exitcode 99 --print-limit 50 \
    "$CNNSCALE_BUILD/tests/$bin" --gtest_color=no --gtest_filter="$filter" >"$log" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
  if [ "$rc" = 77 ]; then
    echo "SKIP: $bin found no usable CUDA device under $tool although nvidia-smi lists $gpus:"; tail -5 "$log"
    exit 77
  fi
  passed_cases=$(sed -n 's/^\[       OK \] \([^ ]*\).*/\1/p' "$log" | tr '\n' ' ')
  echo "run: $what, filter $filter: ${secs} s of its ${limit} s; passed: ${passed_cases:-none}"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    running=$(sed -n 's/^\[ RUN      \] \([^ ]*\).*/\1/p' "$log" | tail -n 1)
    bad "$what finished within its ${limit} s (stopped in ${running:-start-up}; finished: ${passed_cases:-none})"
    tail -n 5 "$log" | sed 's/^/    | /'
    continue
  fi
  expect_eq "$what: exit status (99: the tool found errors, 1: a test failed)" 0 "$rc"
  expect_grep "$what: ERROR SUMMARY: 0 errors" 'ERROR SUMMARY: 0 errors' "$log"
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran\..*/\1/p' "$log" | tail -n 1)
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -n 1)
  python3 -c "import sys; sys.exit(0 if int('${ran:-0}') > 0 and '${ran:-0}' == '${passed:-x}' else 1)"
  expect_eq "$what: every selected test ran and passed (${passed:-?} of ${ran:-?})" 0 "$?"
  if grep -q '^\[  SKIPPED \]' "$log"; then bad "$what: no test skipped"; grep '^\[  SKIPPED \]' "$log" | head; fi
  [ "$rc" != 0 ] && sed 's/^/    | /' "$log" | grep -E 'ERROR|Invalid|Uninitialized|FAILED|====|CUDA     ' | head -30
done
echo "sanitizer runs: $((SECONDS - start)) s of the ${BUDGET} s budget"
finish
