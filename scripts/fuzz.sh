#!/usr/bin/env bash
# fuzz.sh — builds cnnscale's libFuzzer targets (tests/fuzz/: one per input cnnscale parses,
# each calling the product's own parser) with Debian's clang 16 under AddressSanitizer and
# UndefinedBehaviorSanitizer, in their own build folder, and runs each for N seconds.
#
# Each target starts from its committed seeds (tests/fuzz/corpus/TARGET/, never written)
# and a working corpus kept in the build folder (BUILD/corpus/TARGET/, grown run to run),
# with its dictionary (tests/fuzz/TARGET.dict) where there is one; -timeout 10 s per input
# (a hang is a defect), 2 GiB of memory. What a target finds — a crash, a hang, a leak, a
# sanitizer report — is written to BUILD/artifacts/TARGET-*; the run then fails, naming the
# file to reproduce it with (BUILD/fuzz/TARGET FILE). The summary line of each target: its
# executions, corpus size and edges covered (libFuzzer's cov), for docs/reliability.md.
#
# Usage: scripts/fuzz.sh [--seconds N] [--build DIR] [--no-install] [TARGET...]
#   --seconds N   per target (default 30: CI's smoke; a campaign is 900 and more)
#   --build DIR   the fuzzing build folder (default build-fuzz)
#   --no-install  do not run scripts/install-deps.sh --fuzz (clang-16, libfuzzer-16-dev, libclang-rt-16-dev, libomp-16-dev)
#   TARGET        one of tests/fuzz/fuzz_*.cpp's names, e.g. fuzz_model_spec (default: all)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER=30
BUILD="$ROOT/build-fuzz"
INSTALL=1
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_PER=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: error: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
case "$SECONDS_PER" in ''|*[!0-9]*) echo "fuzz.sh: error: --seconds takes a whole number of seconds" >&2; exit 2 ;; esac
ALL=()  # every tests/fuzz/fuzz_*.cpp is a target
for f in "$ROOT"/tests/fuzz/fuzz_*.cpp; do f=${f##*/}; ALL+=("${f%.cpp}"); done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz.sh: error: no target $t (targets: ${ALL[*]})" >&2; exit 2; }
done
[ "$INSTALL" = 0 ] || "$ROOT/scripts/install-deps.sh" --fuzz
command -v clang++-16 >/dev/null || { echo "fuzz.sh: error: clang++-16 not found; run scripts/install-deps.sh --fuzz" >&2; exit 2; }

# The fuzzing build: clang-16, CUDA off (the targets are host parsers), every library
# instrumented (CMakeLists.txt: CNNSCALE_FUZZ); only the fuzz targets and what they link.
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  mkdir -p "$BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCNNSCALE_FUZZ=ON -DCNNSCALE_CUDA=OFF \
    -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 >"$BUILD/configure.log" 2>&1 ||
    { echo "fuzz.sh: error: configuring $BUILD failed (see $BUILD/configure.log)" >&2; exit 1; }
fi
cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}"

mkdir -p "$BUILD/corpus" "$BUILD/artifacts" "$BUILD/logs"
# ASan's leak check on; UBSan stops at its first report (-fno-sanitize-recover) with a stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Function names and lines in the reports (clang-16's symbolizer is not on PATH).
[ -x /usr/lib/llvm-16/bin/llvm-symbolizer ] && export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-16/bin/llvm-symbolizer
failed=()
for t in "${TARGETS[@]}"; do
  work="$BUILD/corpus/$t"
  mkdir -p "$work"
  dict=()
  [ -f "$ROOT/tests/fuzz/$t.dict" ] && dict=(-dict="$ROOT/tests/fuzz/$t.dict")
  log="$BUILD/logs/$t.log"
  set +e
  "$BUILD/fuzz/$t" -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$BUILD/artifacts/$t-" "${dict[@]}" "$work" "$ROOT/tests/fuzz/corpus/$t" >"$log" 2>&1
  st=$?
  set -e
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  corpus=$(find "$work" -type f | wc -l)
  if [ "$st" -eq 0 ]; then
    echo "fuzz.sh: $t: ${SECONDS_PER} s, ${execs:-?} executions, corpus $corpus, cov ${cov:-?}: no defect found"
  else
    art=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
    echo "fuzz.sh: $t: FAILED (exit $st) after ${execs:-?} executions: ${art:-no artifact} (log $log; reproduce: $BUILD/fuzz/$t ${art:-FILE})"
    grep -m1 -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|deadly signal|uncaught exception" "$log" || true
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${#failed[@]} target(s) found a defect: ${failed[*]}" >&2
  exit 1
fi
