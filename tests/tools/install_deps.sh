#!/usr/bin/env bash
# install_deps.sh — scripts/install-deps.sh's install path, with apt-get, dpkg-query and id
# replaced by stubs on PATH (nothing is installed; no network). Once, a clean `apt-get
# update` (no W:/E: line) made the script exit 1 with no message before installing anything
# (grep's no-match under pipefail and set -e; issue 39 review): a fresh machine could not
# install. Cases:
#  1. one package missing, a clean update: apt-get update, then apt-get install of exactly
#     that package; exit 0;
#  2. an update that cannot read a third-party source (W: lines): the warning names it and
#     the install goes on; exit 0;
#  3. that, and apt-get install failing: exit 1, the error names the unread source and how
#     to disable it;
#  4. nothing missing: no apt-get call at all.
# The stub id says root; the cache of kept .debs is the test's own (CNNSCALE_DEB_CACHE), so it
# runs as any user and writes nothing outside $TMP.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
STUB="$TMP/stub"
mkdir -p "$STUB"
# dpkg-query: every package installed but $MISSING.
cat >"$STUB/dpkg-query" <<'S'
#!/usr/bin/env bash
pkg=${!#}
[ "$pkg" = "${MISSING:-}" ] && exit 1
printf 'install ok installed'
S
cat >"$STUB/id" <<'S'
#!/usr/bin/env bash
echo 0
S
# apt-get: logs its arguments; `update` prints $UPDATE_OUT, `install` exits $INSTALL_ST.
cat >"$STUB/apt-get" <<'S'
#!/usr/bin/env bash
echo "apt-get $*" >>"$APT_LOG"
case " $* " in
  *" update "*) printf '%b' "${UPDATE_OUT:-}"; exit "${UPDATE_ST:-0}" ;;
  *" install "*) exit "${INSTALL_ST:-0}" ;;
esac
exit 0
S
chmod +x "$STUB"/*
# The kept .debs go to a folder of the test's (never the machine's cache), one already there.
export CNNSCALE_DEB_CACHE="$TMP/debs"
mkdir -p "$CNNSCALE_DEB_CACHE"
: >"$CNNSCALE_DEB_CACHE/environment-modules_1.0_all.deb"
run() {  # LABEL: runs install-deps.sh with the stubs; output in $TMP/LABEL.out, status in $st
  APT_LOG="$TMP/$1.apt" PATH="$STUB:$PATH" bash "$CNNSCALE_SOURCE/scripts/install-deps.sh" >"$TMP/$1.out" 2>&1
  st=$?
  touch "$TMP/$1.apt"
}
export APT_LOG MISSING UPDATE_OUT UPDATE_ST INSTALL_ST

MISSING=patchelf UPDATE_OUT='Hit:1 http://deb.debian.org/debian bookworm InRelease\nReading package lists...\n' \
  UPDATE_ST=0 INSTALL_ST=0 run clean
expect_eq "clean update: exit status 0" 0 "$st"
expect_grep "clean update: apt-get update ran" "^apt-get update" "$TMP/clean.apt"
expect_grep "clean update: the missing package was installed" "^apt-get install .* patchelf$" "$TMP/clean.apt"
expect_eq "clean update: no warning" "" "$(grep -i warning "$TMP/clean.out")"

UNREADABLE='Hit:1 http://deb.debian.org/debian bookworm InRelease\nErr:2 http://127.0.0.1:9/cuda/repos/debian12/x86_64  InRelease\n  Could not connect\nW: Failed to fetch http://127.0.0.1:9/cuda/repos/debian12/x86_64/InRelease  Could not connect\nW: Some index files failed to download.\n'
MISSING=patchelf UPDATE_OUT=$UNREADABLE UPDATE_ST=0 INSTALL_ST=0 run unreadable
expect_eq "an unreadable source: exit status 0" 0 "$st"
expect_grep "an unreadable source: the warning names it" \
  "install-deps: warning: apt-get update \(exit 0\) could not read: http://127.0.0.1:9/cuda/repos/debian12/x86_64" \
  "$TMP/unreadable.out"
expect_grep "an unreadable source: the install goes on" "^apt-get install .* patchelf$" "$TMP/unreadable.apt"

MISSING=patchelf UPDATE_OUT=$UNREADABLE UPDATE_ST=0 INSTALL_ST=100 run failed
expect_eq "install fails: exit status 1" 1 "$st"
expect_grep "install fails: the error names the unread source and the fix" \
  "install-deps: error: apt-get install failed .*could not read http://127.0.0.1:9/cuda/repos/debian12/x86_64: .*disable it" \
  "$TMP/failed.out"

MISSING="" UPDATE_OUT="" INSTALL_ST=0 run none
expect_eq "nothing missing: exit status 0" 0 "$st"
expect_grep "nothing missing: says so" "install-deps: all [0-9]+ packages present" "$TMP/none.out"
expect_eq "nothing missing: no apt-get update or install" "" "$(grep -E '^apt-get (update|install)' "$TMP/none.apt")"
finish
