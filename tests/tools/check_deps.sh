#!/usr/bin/env bash
# check_deps.sh — scripts/check-deps.sh passes on this build with the install list, and
# fails, naming the package and a file that needs it, when a package the build or the
# tests use is left out: ocl-icd-opencl-dev (what libdnnl-dev's CMake config needs but
# Debian only recommends; the list once lacked it and a fresh machine could not build),
# lmod (run time: the templates and the modules test) and libxml2-utils (a test's xmllint).
source "$CNNSCALE_SOURCE/tests/lib.sh"
command -v dpkg >/dev/null && command -v apt-cache >/dev/null || { echo "SKIP: not a Debian system (no dpkg/apt-cache)"; exit 77; }
dpkg -S /usr/include/dnnl.h >/dev/null 2>&1 || { echo "SKIP: oneDNN is not from Debian's libdnnl-dev here"; exit 77; }
CD="$CNNSCALE_SOURCE/scripts/check-deps.sh"
"$CD" --build "$CNNSCALE_BUILD" >"$TMP/ok.txt" 2>&1
expect_eq "check-deps passes with scripts/install-deps.sh's list" 0 "$?"
expect_grep "it says OK" '^check-deps: OK$' "$TMP/ok.txt"
expect_grep "it counts what the build used" '^check-deps: [0-9]+ Debian packages used' "$TMP/ok.txt"
check_without() { # PKG FILE-REGEX
  "$CD" --build "$CNNSCALE_BUILD" --without "$1" >"$TMP/no-$1.txt" 2>&1
  expect_eq "without $1: fails" 1 "$?"
  expect_grep "without $1: names the package and a file that needs it" "^check-deps: $1 is used but not installed .*: $2" "$TMP/no-$1.txt"
}
check_without ocl-icd-opencl-dev '/usr/lib/x86_64-linux-gnu/libOpenCL\.so'
check_without lmod '/usr/share/lmod/'
check_without libxml2-utils '/usr/bin/xmllint'
"$CD" --build "$TMP/nowhere" >"$TMP/nobuild.txt" 2>&1
expect_eq "no build tree: usage status 2" 2 "$?"
expect_grep "no build tree: says what to run" 'no build tree at .*scripts/build.sh' "$TMP/nobuild.txt"
finish
