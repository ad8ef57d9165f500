#!/usr/bin/env bash
# closed_checkout.sh — a test that runs something as an unprivileged user does not depend
# on where the checkout lives (issue 39 item 4: with the clone at /root/p, mode 700,
# imagefolder_cli's "unreadable" case ran /root/p/build/bin/cnnscale as nobody: "Permission
# denied", exit 126). Every test script that changes user does it through tests/lib.sh's
# can_be_nobody / as_nobody (none names setpriv, runuser, su or sudo), and each of them
# passes when the source and build trees are reachable only through a folder of mode 700
# (links to them inside one; its working folder there too), as under /root.
# SKIP (77) when not root or without setpriv (then those tests leave that part out).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
can_be_nobody || { echo "SKIP: needs root and setpriv (util-linux): the tests that change user leave that part out too"; exit 77; }
cd "$CNNSCALE_SOURCE/tests" || exit 1
direct=$(grep -rlE '(^|[^A-Za-z_])(setpriv|runuser|su|sudo|doas|--reuid|--ruid)([^A-Za-z_]|$)' --include='*.sh' . |
  grep -vxE './lib.sh|./tools/closed_checkout.sh')
expect_eq "no test changes user but through lib.sh's as_nobody" "" "$direct"
mapfile -t users < <(grep -rlE '(^|[^A-Za-z_])(as_nobody|can_be_nobody)([^A-Za-z_]|$)' --include='*.sh' . |
  grep -vxE './lib.sh|./tools/closed_checkout.sh' | sort)
expect_ne "the tests that change user (found: ${users[*]:-none})" 0 "${#users[@]}"

C="$TMP/closed"
mkdir -m 700 "$C"
ln -s "$CNNSCALE_SOURCE" "$C/src"
ln -s "$CNNSCALE_BUILD" "$C/build"
mkdir "$C/work"
setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$C/build/bin/cnnscale"
expect_ne "the set-up: nobody cannot reach the build through $C" 0 "$?"
for t in "${users[@]}"; do
  n=${t#./}
  (cd "$C/work" && CNNSCALE_SOURCE="$C/src" CNNSCALE_BUILD="$C/build" CNNSCALE="$C/build/bin/cnnscale" \
    timeout 600 bash "$C/src/tests/$n") >"$TMP/run.out" 2>&1
  st=$?
  expect_eq "$n with the checkout behind a mode-700 folder: exit status" 0 "$st"
  [ "$st" -eq 0 ] || grep -E '^FAIL|denied|^ +\|' "$TMP/run.out" | head -20
done
finish
