#!/usr/bin/env bash
# check-deps.sh — proves that scripts/install-deps.sh installs everything the build, the
# tests and the demo use, so that a fresh Debian 12 machine (nothing preinstalled) works.
#
# What was used is read off the machine, not declared:
#   build:   CMakeCache paths, the compiler's dependency files (*.d), the linked libraries
#   runtime: commands the test/demo/cluster scripts run (command position in the shell
#            text), absolute /usr paths they name, python modules their python code imports
# Each file is mapped to its Debian package with `dpkg -S`; every such package must lie in
# the Depends-closure (Recommends do NOT count: apt-get --no-install-recommends skips
# them, which is how libdnnl-dev's OpenCL need once slipped through) of the install list
# plus build-essential, or be Essential/required (present on every Debian system).
# Files outside Debian's packages (/usr/local, the CUDA toolkit, pyenv) are not judged.
#
# Usage: scripts/check-deps.sh [--build DIR] [--without PKG]... [--packages "P1 P2 ..."]
#        scripts/check-deps.sh --commands-in FILE...
#   --build DIR      the build tree to inspect (default: build)
#   --commands-in    only print the commands the shell text of FILEs runs (those found
#                    on PATH), one per line: what the run-time check below reads
#   --without PKG    drop PKG from the install list (to show that the check catches it)
#   --packages LIST  judge against LIST instead of install-deps.sh's PACKAGES + TEST_PACKAGES
#                    + FUZZ_PACKAGES
# Exit 0: every used package is installed by the list; 1: names each missing package with a
# file that needs it; 2: usage or no build tree.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
BUILD=build
WITHOUT=()
LIST=""
COMMANDS_IN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --commands-in) COMMANDS_IN=1; shift; break ;;
    --build) BUILD=$2; shift 2 ;;
    --without) WITHOUT+=("$2"); shift 2 ;;
    --packages) LIST=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-deps: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# The commands FILE runs (command position in its shell text: after a newline, ; | & ( $(
# ` then do else ! and a few wrappers), one per line, with the path each resolves to.
# Left out: comments, single-quoted text, the bodies of heredocs whose end word is quoted
# (data, python; a comment that shows one starts none) and the double-quoted code after
# python3 -c or "$PY" -c (Python's open( is not the shell's `open`, which xdg-utils
# installs).
commands_in() {
  awk 'end != "" { if ($0 == end || $0 ~ "^[[:space:]]*" end "$") end = ""; next }
       pyq { if (match($0, /"/)) { pyq = 0; print substr($0, RSTART + 1) }; next }
       /(^|[[:space:];&|]|\$\()(python3?|"\$\{?PY[A-Z_]*\}?"|\$\{?PY[A-Z_]*\}?)[[:space:]]+-c[[:space:]]+"[^"]*$/ {
         # python code after -c that goes on over the next lines: dropped up to its closing quote
         match($0, /-c[[:space:]]+"[^"]*$/); print substr($0, 1, RSTART - 1) "-c \"\""; pyq = 1; next }
       { print; if ($0 !~ /^[[:space:]]*#/ && match($0, /<<-?[[:space:]]*[\x27"][A-Za-z_][A-Za-z0-9_]*[\x27"]/)) {
           end = substr($0, RSTART, RLENGTH); sub(/^<<-?[[:space:]]*[\x27"]/, "", end); sub(/[\x27"]$/, "", end) } }' "$1" |
    sed -e 's/^[[:space:]]*#.*//' -e 's/[[:space:]]#[^!].*$//' -e "s/'[^']*'//g" |
    sed -E 's/((^|[[:space:];&|]|\$\()(python3?|"\$\{?PY[A-Z_]*\}?"|\$\{?PY[A-Z_]*\}?)[[:space:]]+-c[[:space:]]+)"([^"\\]|\\.)*"/\1""/g' |
    { grep -oE '(^|[;|&(`!{]|\$\(|\b(then|do|else|exec|command|timeout [0-9]+[a-z]?|xargs|nsenter [^ ]+|sudo|env|time))[[:space:]]*[A-Za-z_][A-Za-z0-9_.+-]*' || true; } |
    { grep -oE '[A-Za-z_][A-Za-z0-9_.+-]*$' || true; } | sort -u | while read -r c; do
      case "$(type -t "$c" 2>/dev/null)" in file) ;; *) continue ;; esac
      printf '%s\t%s\n' "$c" "$(command -v "$c")"
    done
}
if [ $COMMANDS_IN = 1 ]; then
  for f in "$@"; do commands_in "$f"; done
  exit 0
fi
[ -f "$BUILD/CMakeCache.txt" ] || { echo "check-deps: no build tree at $BUILD (run scripts/build.sh first)" >&2; exit 2; }
if [ -z "$LIST" ]; then
  # shellcheck disable=SC1090
  # FUZZ_PACKAGES count: scripts/fuzz.sh (a script this check reads) installs them itself
  # with install-deps.sh --fuzz before it runs clang-16
  source <(sed -n '/^PACKAGES=(/,/^)/p; /^TEST_PACKAGES=(/p; /^FUZZ_PACKAGES=(/p' scripts/install-deps.sh)
  LIST="${PACKAGES[*]} ${TEST_PACKAGES[*]} ${FUZZ_PACKAGES[*]}"
fi
read -r -a PKGS <<<"$LIST"
for w in "${WITHOUT[@]+"${WITHOUT[@]}"}"; do
  for i in "${!PKGS[@]}"; do [ "${PKGS[$i]}" != "$w" ] || unset 'PKGS[i]'; done
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# ---- what was used: "file<TAB>why" lines --------------------------------------------
{
  grep -E ':(FILEPATH|PATH)=/' "$BUILD/CMakeCache.txt" | sed 's/^[^=]*=//' | tr ';' '\n' | sed 's/$/\tCMake configure/'
  find "$BUILD" -name '*.d' -type f -exec cat {} + 2>/dev/null | tr ' \\' '\n\n' | grep '^/' | sed 's/$/\tcompiled/'
  find "$BUILD" -name link.txt -exec cat {} + | tr ' ' '\n' | grep -E '^/.*\.(so|a)(\.[0-9.]+)?$' | sed 's/$/\tlinked/'
  # run-time libraries of what the build produced
  for b in "$BUILD"/bin/* ; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    ldd "$b" 2>/dev/null | awk '$3 ~ /^\// {print $3 "\tloaded by '"${b##*/}"'"}'
  done
} >"$T/build.txt"

# (scripts/lint.sh is a developer tool, not build, test or demo: clang-format/clang-tidy
# are not installed for it)
SCRIPTS=""
for f in scripts/*.sh tests/*.sh tests/*/*.sh slurm/*.in slurm/*.sh slurm/*.slurm; do
  [ -f "$f" ] && [ "$f" != scripts/lint.sh ] && SCRIPTS+="$f "
done
{
  # commands in command position (after a newline, ; | & ( $( ` then do else ! and a few
  # wrappers), comments and quoted heredoc bodies of python excluded
  for f in $SCRIPTS; do
    commands_in "$f" | while IFS=$'\t' read -r c p; do printf '%s\t%s runs %s\n' "$p" "$f" "$c"; done
  done
  # absolute paths under /usr that the scripts name (data sets, init files, plugins)
  for f in $SCRIPTS; do
    { grep -oE '/usr/(share|lib|bin|sbin|libexec)/[A-Za-z0-9_./+-]+' "$f" || true; } | sort -u | while read -r p; do
      if [ -e "$p" ]; then printf '%s\t%s names it\n' "$p" "$f"; fi
    done
  done
} >"$T/runtime.txt"

# python modules imported by python code inside the tests and scripts (Debian's python3).
# A cross-check against a reference that is optional (it SKIPs without it, e.g. torchvision)
# says so in a comment line of its own: "check-deps: optional python MODULE...": such
# modules are neither required nor, when installed by hand, counted as used.
PY=/usr/bin/python3
PYFILES="$SCRIPTS $(ls tests/*/*.py scripts/*.py 2>/dev/null || true)"
# shellcheck disable=SC2086
OPTIONAL_PY=" $({ grep -hoE 'check-deps: optional python [A-Za-z0-9_ ]+' $PYFILES || true; } | sed 's/.*optional python //' | tr '\n' ' ') "
if [ -x "$PY" ]; then
  for f in $PYFILES; do
    { grep -hoE '^[[:space:]]*(import [A-Za-z_][A-Za-z0-9_., ]*|from [A-Za-z_][A-Za-z0-9_.]* import)' "$f" || true; } |
      sed -E 's/^[[:space:]]*(import|from)[[:space:]]+//; s/[[:space:]]+import$//' | tr ',' '\n' |
      sed -E 's/^[[:space:]]+//; s/[[:space:]].*//; s/\..*//' | sort -u | while read -r m; do
        [ -n "$m" ] || continue
        case "$OPTIONAL_PY" in *" $m "*) continue ;; esac
        { compgen -G "tests/*/$m.py" || compgen -G "tests/*/*/$m.py"; } >/dev/null && continue  # the project's own module (tests/data/shard_tamper.py, tests/nn/onnx/user_cnn.py)
        loc=$("$PY" -c "import $m, sys; print(getattr($m, '__file__', None) or 'builtin')" 2>/dev/null) ||
          { printf 'MISSING-PYTHON-MODULE %s\t%s imports it and %s cannot\n' "$m" "$f" "$PY"; continue; }
        [ "$loc" = builtin ] || printf '%s\t%s imports %s\n' "$loc" "$f" "$m"
      done
  done >>"$T/runtime.txt"
else
  echo "MISSING-PYTHON /usr/bin/python3	the tests run python3" >>"$T/runtime.txt"
fi

# ---- map files to packages (one dpkg -S for all: it reads the whole database per call) --
# merged /usr: dpkg may know a file as /lib/... or /usr/lib/..., or only by its link name
cat "$T/build.txt" "$T/runtime.txt" | sort -u -t$'\t' -k1,1 >"$T/all.txt"
grep '^MISSING-' "$T/all.txt" | sed 's/^MISSING-[A-Z-]* //' >"$T/notes" || true
grep -v '^MISSING-' "$T/all.txt" | while IFS=$'\t' read -r f why; do
  case "$f" in /usr/local/* | /opt/* | /root/* | /home/* | /tmp/* | "$PWD"/*) continue ;; esac
  [ -f "$f" ] || continue
  r=$(readlink -f "$f")
  for c in "$f" "$r" "${f#/usr}" "${r#/usr}" "/usr$f" "/usr$r"; do printf '%s\t%s\t%s\n' "$c" "$f" "$why"; done
done | sort -u -t$'\t' -k1,1 >"$T/variants"
cut -f1 "$T/variants" | xargs -r dpkg -S 2>/dev/null | sed 's/^\([^:]*\(:[a-z0-9]*\)\{0,1\}\): /\1\t/' |
  sort -t$'\t' -k2,2 >"$T/owners" || true
# owners: "pkg[, pkg]\tpath" -> used: "pkg\tfile (why)"
join -t$'\t' -1 2 -2 1 "$T/owners" "$T/variants" | while IFS=$'\t' read -r _ pkgs f why; do
  for p in ${pkgs//,/ }; do printf '%s\t%s (%s)\n' "${p%:amd64}" "$f" "$why"; done
done | sort -u >"$T/used"

dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' | awk '$2 == "yes" || $3 == "required" {print $1}' >"$T/base"
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
  build-essential "${PKGS[@]}" 2>/dev/null | grep -v '^ ' | tr -d '<>' | sed 's/:amd64$//' >"$T/closure"
[ -s "$T/closure" ] || { echo "check-deps: apt-cache depends gave nothing (run apt-get update once)" >&2; exit 2; }
sort -u "$T/closure" "$T/base" -o "$T/have"

cut -f1 "$T/used" | sort -u >"$T/used-pkgs"
missing=$(comm -23 "$T/used-pkgs" "$T/have")
echo "check-deps: $(wc -l <"$T/used-pkgs") Debian packages used by the build, tests and demo; install list: ${#PKGS[@]} packages (+ build-essential), closure $(wc -l <"$T/have") packages"
status=0
for p in $missing; do
  echo "check-deps: $p is used but not installed by scripts/install-deps.sh: $(grep -m1 -P "^\Q$p\E\t" "$T/used" | cut -f2)"
  status=1
done
while IFS=$'\t' read -r what why; do
  echo "check-deps: $what is not available: $why"
  status=1
done <"$T/notes"
if [ $status -eq 0 ]; then echo "check-deps: OK"; else echo "check-deps: add the package(s) above to PACKAGES in scripts/install-deps.sh"; fi
exit $status
