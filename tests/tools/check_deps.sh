#!/usr/bin/env bash
# check_deps.sh — scripts/check-deps.sh passes on this build with the install list, and
# fails, naming the package and a file that needs it, when a package the build or the
# tests use is left out: ocl-icd-opencl-dev (what libdnnl-dev's CMake config needs but
# Debian only recommends; the list once lacked it and a fresh machine could not build),
# lmod (run time: the templates and the modules test), libxml2-utils (a test's xmllint) and
# clang-16 (scripts/fuzz.sh's compiler, from install-deps.sh's FUZZ_PACKAGES).
# And the run-time reading of the scripts' shell text (--commands-in): a command in
# `bash -c "…"` or after && counts, Python's open( inside `python3 -c "…"` / `"$PY" -c
# "…"` does not (it once made the check fail wherever xdg-utils, which installs an `open`
# command, was installed: issue 26 item 14).
source "$CNNSCALE_SOURCE/tests/lib.sh"
mkdir -p "$TMP/bin"
printf '#!/bin/sh\n' >"$TMP/bin/open"
printf '#!/bin/sh\n' >"$TMP/bin/frobnicate"
chmod +x "$TMP/bin/open" "$TMP/bin/frobnicate"
cat >"$TMP/sample.sh" <<'SAMPLE'
python3 -c "import json; j = json.load(open('x')); print(\"a\")"
"$PY" -c "f = open(1)"
x=$(python3 -c "print(open)") && frobnicate
bash -c "frobnicate --x; open y"
SAMPLE
PATH="$TMP/bin:$PATH" "$CNNSCALE_SOURCE/scripts/check-deps.sh" --commands-in "$TMP/sample.sh" >"$TMP/cmds.txt" 2>&1
expect_eq "--commands-in: exit 0" 0 "$?"
expect_grep "a command after && counts" '^frobnicate	' "$TMP/cmds.txt"
expect_grep "a command in bash -c counts" '^open	' "$TMP/cmds.txt"
# Without the bash -c line, no open at all.
grep -v '^bash -c' "$TMP/sample.sh" >"$TMP/sample2.sh"
PATH="$TMP/bin:$PATH" "$CNNSCALE_SOURCE/scripts/check-deps.sh" --commands-in "$TMP/sample2.sh" \
  "$CNNSCALE_SOURCE/tests/data/imagefolder_pil.sh" >"$TMP/cmds2.txt" 2>&1
expect_eq "open( in python -c code (and in imagefolder_pil.sh) is no command" 0 "$(grep -c '^open	' "$TMP/cmds2.txt")"
expect_grep "the real commands still count (imagefolder_pil.sh runs h5dump)" '^h5dump	' "$TMP/cmds2.txt"
command -v dpkg >/dev/null && command -v apt-cache >/dev/null || { echo "SKIP: not a Debian system (no dpkg/apt-cache)"; exit 77; }
dpkg -S /usr/include/dnnl.h >/dev/null 2>&1 || { echo "SKIP: oneDNN is not from Debian's libdnnl-dev here"; exit 77; }
CD="$CNNSCALE_SOURCE/scripts/check-deps.sh"
"$CD" --build "$CNNSCALE_BUILD" >"$TMP/ok.txt" 2>&1
expect_eq "check-deps passes with scripts/install-deps.sh's list" 0 "$?"
expect_grep "it says OK" '^check-deps: OK$' "$TMP/ok.txt"
expect_grep "it counts what the build used" '^check-deps: [0-9]+ Debian packages used' "$TMP/ok.txt"
# The four runs without a package at once (each is ~1 CPU-minute of dpkg lookups; CI time).
# clang-16: scripts/fuzz.sh runs it and installs it with install-deps.sh --fuzz, so the
# FUZZ_PACKAGES list counts (CI once failed when the check read only PACKAGES and
# TEST_PACKAGES); libfuzzer-16-dev depends on clang-16, so both are left out for it.
for p in ocl-icd-opencl-dev lmod libxml2-utils clang-16; do
  extra=()
  [ "$p" != clang-16 ] || extra=(--without libfuzzer-16-dev)
  ("$CD" --build "$CNNSCALE_BUILD" --without "$p" "${extra[@]}" >"$TMP/no-$p.txt" 2>&1; echo $? >"$TMP/no-$p.rc") &
done
wait
check_without() { # PKG FILE-REGEX
  expect_eq "without $1: fails" 1 "$(cat "$TMP/no-$1.rc")"
  expect_grep "without $1: names the package and a file that needs it" "^check-deps: $1 is used but not installed .*: $2" "$TMP/no-$1.txt"
}
check_without ocl-icd-opencl-dev '/usr/lib/x86_64-linux-gnu/libOpenCL\.so'
check_without lmod '/usr/share/lmod/'
check_without libxml2-utils '/usr/bin/xmllint'
check_without clang-16 '/usr/bin/clang-16 \(scripts/[a-z-]+\.sh runs clang-16\)'
"$CD" --build "$TMP/nowhere" >"$TMP/nobuild.txt" 2>&1
expect_eq "no build tree: usage status 2" 2 "$?"
expect_grep "no build tree: says what to run" 'no build tree at .*scripts/build.sh' "$TMP/nobuild.txt"
finish
