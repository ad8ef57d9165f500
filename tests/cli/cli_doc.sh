#!/usr/bin/env bash
# cli_doc.sh — docs/cli.md (the repository's reference of every command and option) is what
# scripts/cli-doc.sh writes from this build's `--help` texts: a changed option, default or
# help text fails here until the page is written again. Also: it names every command of
# `cnnscale --help` and every long option of each command's --help, and no --help default
# prints a double at full precision ("0.10000000000000001").
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
DOC="$CNNSCALE_SOURCE/docs/cli.md"
bash "$CNNSCALE_SOURCE/scripts/cli-doc.sh" "$CNNSCALE" >"$TMP/cli.md" 2>"$TMP/cli.err"
expect_eq "cli-doc.sh exit status" 0 "$?"
if cmp -s "$TMP/cli.md" "$DOC"; then
  expect_eq "docs/cli.md is current" same same
else
  diff -u "$DOC" "$TMP/cli.md" | head -40 | sed 's/^/    | /'
  expect_eq "docs/cli.md is current (to update it: scripts/cli-doc.sh $CNNSCALE > docs/cli.md)" same differs
fi
commands=$("$CNNSCALE" --help | awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}')
expect_grep "eight commands listed by cnnscale --help" "train prep allreduce data-bench report watch export env" \
  <(echo $commands)
for cmd in $commands; do
  expect_grep "docs/cli.md has a section for $cmd" "^## cnnscale $cmd\$" "$DOC"
  missing=""
  for opt in $("$CNNSCALE" "$cmd" --help | grep -oE '^  (-[a-z] \[ )?--[a-z0-9_-]+' | grep -oE -- '--[a-z0-9_-]+'); do
    # the option's line within its command's section of the page
    awk -v s="## cnnscale $cmd" '$0 == s {on = 1; next} /^## / {on = 0} on' "$DOC" | grep -qE -- "^  (-[a-z] \[ )?$opt( |\$|\])" ||
      missing="$missing $opt"
  done
  expect_eq "docs/cli.md documents every option of cnnscale $cmd" "" "$missing"
done
expect_eq "no default printed at full double precision" "" "$(grep -E '\(=[0-9]+\.[0-9]{12,}\)' "$DOC")"
finish
