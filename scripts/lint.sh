#!/usr/bin/env bash
# lint.sh — clang-format and clang-tidy over cnnscale's C++ and CUDA sources (not run
# by CI: run it before sending a change).
#
#   scripts/lint.sh [--format | --tidy | --fix] [--all] [-p BUILD_DIR] [FILE...]
#
#   --format   clang-format --dry-run: list the lines whose layout differs from
#              .clang-format (exit 1 if any)
#   --tidy     clang-tidy with .clang-tidy on the .cpp files, compiled as BUILD_DIR's
#              compile_commands.json says (default: build/; configure a CUDA build to
#              check src/*/cuda/*.cpp, a CPU build to check src/*/cuda/stub/). Headers are
#              checked through the .cpp files that include them; .cu files are skipped.
#   --fix      clang-format -i on the files (clang-tidy's suggestions are left to you)
#   (none)     --format, then --tidy
# Files: those given; else --all: every tracked source under src/ tests/ bench/; else
# the sources changed since the merge base with main (committed or not).
#
# Needs clang-format and clang-tidy 14 or newer (Debian: clang-format clang-tidy).
# clang-tidy 14 rejects lambda captures of structured bindings (C++20, fixed in clang
# 16) with "reference to local binding ... [clang-diagnostic-error]"; ignore those.
set -uo pipefail

die() { echo "lint: error: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE=both ALL=0 BUILD="$ROOT/build" FILES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --format) MODE=format; shift ;;
    --tidy) MODE=tidy; shift ;;
    --fix) MODE=fix; shift ;;
    --all) ALL=1; shift ;;
    -p) BUILD=${2:?-p needs a build directory}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) FILES+=("$1"); shift ;;
  esac
done

if [ -d "$BUILD" ]; then BUILD=$(cd "$BUILD" && pwd); fi
cd "$ROOT" || exit 2
is_source() { case "$1" in *.cpp|*.hpp|*.cu) [ -f "$1" ] ;; *) return 1 ;; esac; }
if [ ${#FILES[@]} -eq 0 ]; then
  if [ "$ALL" = 1 ]; then
    mapfile -t cand < <(git ls-files -- src tests bench)
  else
    base=$(git merge-base HEAD main 2>/dev/null) || die "no branch 'main' to compare with; give files or --all"
    mapfile -t cand < <({ git diff --name-only "$base" -- src tests bench; git ls-files --others --exclude-standard -- src tests bench; } | sort -u)
  fi
  for f in "${cand[@]+"${cand[@]}"}"; do is_source "$f" && FILES+=("$f"); done
fi
[ ${#FILES[@]} -gt 0 ] || { echo "lint: no C++ files to check"; exit 0; }

status=0
if [ "$MODE" = fix ]; then
  command -v clang-format >/dev/null || die "clang-format not found"
  clang-format -i "${FILES[@]}"
  exit 0
fi

if [ "$MODE" = format ] || [ "$MODE" = both ]; then
  command -v clang-format >/dev/null || die "clang-format not found"
  out=$(clang-format --dry-run "${FILES[@]}" 2>&1)
  if [ -n "$out" ]; then
    echo "$out"
    echo "lint: clang-format has $(grep -c "warning:" <<<"$out") finding(s); scripts/lint.sh --fix FILE... applies it"
    status=1
  else
    echo "lint: clang-format: ${#FILES[@]} file(s) clean"
  fi
fi

if [ "$MODE" = tidy ] || [ "$MODE" = both ]; then
  command -v clang-tidy >/dev/null || die "clang-tidy not found"
  db="$BUILD/compile_commands.json"
  [ -f "$db" ] || die "$db not found: configure a build first (cmake -S . -B build), or pass -p BUILD_DIR"
  tidy=() skipped=0
  for f in "${FILES[@]}"; do
    case "$f" in *.cpp) ;; *) continue ;; esac
    if grep -q "\"file\": \"$ROOT/$f\"" "$db"; then tidy+=("$f"); else skipped=$((skipped + 1)); fi
  done
  [ "$skipped" = 0 ] || echo "lint: clang-tidy: $skipped .cpp file(s) not in $db (the other device side, or not built) skipped"
  if [ ${#tidy[@]} -gt 0 ]; then
    log=$(mktemp)
    printf '%s\n' "${tidy[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p "$BUILD" --quiet >"$log" 2>/dev/null
    if grep -q 'warning:\|error:' "$log"; then
      cat "$log"
      echo "lint: clang-tidy: $(grep -c 'warning:\|error:' "$log") finding(s) in ${#tidy[@]} file(s)"
      status=1
    else
      echo "lint: clang-tidy: ${#tidy[@]} file(s) clean"
    fi
    rm -f "$log"
  fi
fi
exit "$status"
