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
#   --no-install  do not run scripts/install-deps.sh --fuzz (clang-16, libfuzzer-16-dev, libclang-rt-16-dev, libomp-16-dev, llvm-16)
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
# (llvm-16, installed with the others by install-deps.sh --fuzz)
[ -x /usr/lib/llvm-16/bin/llvm-symbolizer ] && export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-16/bin/llvm-symbolizer
failed=()
for t in "${TARGETS[@]}"; do
  work="$BUILD/corpus/$t"
  mkdir -p "$work"
  dict=()
  [ -f "$ROOT/tests/fuzz/$t.dict" ] && dict=(-dict="$ROOT/tests/fuzz/$t.dict")
  log="$BUILD/logs/$t.log"
  # The HDF5 targets meet crashes inside libhdf5 1.10.8 itself within seconds
  # (tests/fuzz/hdf5-crashes/README.md): they run in fork mode, which goes on past a crash,
  # and each crash found is then replayed and judged by its stack: inside libhdf5 (the first
  # frame that is not the sanitizer's, libc's or libFuzzer's is libhdf5's) it is recorded,
  # anywhere else it is a defect, as in every other target.
  mode=()
  hdf5=0
  case "$t" in fuzz_shard | fuzz_checkpoint) hdf5=1; mode=(-fork=1 -ignore_crashes=1) ;; esac
  arts="$BUILD/artifacts/$t-"
  ls "$BUILD/artifacts" | grep "^$t-" | sort >"$BUILD/logs/$t.before" || true
  set +e
  "$BUILD/fuzz/$t" -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$arts" "${mode[@]}" "${dict[@]}" "$work" "$ROOT/tests/fuzz/corpus/$t" >"$log" 2>&1
  st=$?
  set -e
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(sed -nE 's/^#([0-9]+):? .*/\1/p' "$log" | tail -1)  # fork mode's progress lines
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  corpus=$(find "$work" -type f | wc -l)
  hdf5_note=""
  if [ "$hdf5" = 1 ]; then
    in_hdf5=0
    for art in $(ls "$BUILD/artifacts" | grep "^$t-" | sort | comm -13 "$BUILD/logs/$t.before" -); do
      rep="$BUILD/logs/$art.replay"
      "$BUILD/fuzz/$t" "$BUILD/artifacts/$art" >"$rep" 2>&1 || true
      first=$(grep -E '^ *#[0-9]+ 0x[0-9a-f]+ in ' "$rep" |
        grep -vE ' in (__asan|__ubsan|__sanitizer|__interceptor|__lsan|_asan|__libc|__GI_|__mem|__str|memcpy|memmove|memset|strlen|strn?cmp|strchr|malloc|calloc|realloc|abort|raise|fuzzer::|LLVMFuzzerTestOneInput|main |_start)' |
        grep -vE '(/libc\.so|/libasan|/libubsan|compiler-rt)' | head -1 || true)
      if grep -qE 'libhdf5|\bin H5[A-Za-z_]+' <<<"$first"; then
        in_hdf5=$((in_hdf5 + 1))
        mkdir -p "$BUILD/artifacts/hdf5"
        mv "$BUILD/artifacts/$art" "$BUILD/artifacts/hdf5/"
      elif grep -qE 'ERROR|runtime error|deadly signal|Sanitizer' "$rep"; then
        echo "fuzz.sh: $t: a crash outside libhdf5: $BUILD/artifacts/$art ($rep)"
        st=1
      else
        mkdir -p "$BUILD/artifacts/flaky"  # did not crash again on its own (state of an earlier input)
        mv "$BUILD/artifacts/$art" "$BUILD/artifacts/flaky/"
      fi
    done
    [ "$st" = 1 ] || st=0
    [ "$in_hdf5" = 0 ] || hdf5_note=" ($in_hdf5 input(s) crash inside libhdf5 itself: $BUILD/artifacts/hdf5/, see tests/fuzz/hdf5-crashes/README.md)"
  fi
  if [ "$st" -eq 0 ]; then
    echo "fuzz.sh: $t: ${SECONDS_PER} s, ${execs:-?} executions, corpus $corpus, cov ${cov:-?}: no defect found$hdf5_note"
  else
    art=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //' || true)
    echo "fuzz.sh: $t: FAILED (exit $st) after ${execs:-?} executions: ${art:-no artifact} (log $log; reproduce: $BUILD/fuzz/$t ${art:-FILE})"
    grep -m1 -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|deadly signal|uncaught exception|ParseDictionaryFile" "$log" || true
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${#failed[@]} target(s) found a defect: ${failed[*]}" >&2
  exit 1
fi
