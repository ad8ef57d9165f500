#!/usr/bin/env bash
# output_files.sh — files the user names are written by one rule (util/atomic_file.hpp,
# docs/report.md "Output files"; issue 39), for every writer: `data-bench --json`,
# `allreduce --json`, `train --timeline` and the files of `report --output DIR`:
#  - a symbolic link to a regular file is written through: the link stays, its target
#    gets the new content; a link to a missing file creates that file;
#  - a FIFO, a directory, a character device (a private one made with mknod, as root:
#    never /dev/null) and a link to one of them are refused before the work starts
#    (exit 2, one `cnnscale: error:` line naming the option, the path and what it is) and
#    stay what they were. Before, each was replaced by a regular file, exit 0.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
C="$CNNSCALE"
"$CNNSCALE_BUILD/tests/cnnscale_fixture_tool" write "$TMP/fx.h5" 64 16 4
"$C" prep --format hdf5 --input "$TMP/fx.h5" --images /x --labels /y --output "$TMP/ds" >"$TMP/prep.out" 2>&1
expect_eq "prep exit status" 0 "$?"

# The paths each writer is given, in $TMP/W (W: the writer's name).
setup() {
  local d="$TMP/$1"
  mkdir -p "$d/adir"
  echo old >"$d/real"
  ln -s real "$d/link"
  ln -s missing "$d/dangling"
  mkfifo "$d/fifo"
  ln -s adir "$d/ldir"
  DEV=""
  mknod "$d/null" c 1 3 2>/dev/null && { DEV="$d/null"; ln -s null "$d/lnull"; }
}
kind() { stat -c %F "$1" 2>/dev/null; }

# writer NAME CMD...: CMD with the path appended runs the writer (`--json PATH`).
writer() {
  local name=$1 d="$TMP/$1" t st
  shift
  setup "$name"
  timeout 120 "$@" "$d/link" >"$d/link.out" 2>&1
  expect_eq "$name: a link to a regular file: exit 0" 0 "$?"
  expect_eq "$name: the link stays a link" "symbolic link" "$(kind "$d/link")"
  expect_ne "$name: its target has the new content" "old" "$(head -c 3 "$d/real")"
  timeout 120 "$@" "$d/dangling" >"$d/dangling.out" 2>&1
  expect_eq "$name: a link to a missing file: exit 0" 0 "$?"
  expect_eq "$name: that link stays a link" "symbolic link" "$(kind "$d/dangling")"
  expect_file "$name: its target is created" "$d/missing"
  for t in fifo adir ldir ${DEV:+null lnull}; do
    local before
    before=$(kind "$d/$t")
    timeout 120 "$@" "$d/$t" >"$d/$t.out" 2>&1
    st=$?
    expect_eq "$name: $t ($before): exit 2" 2 "$st"
    expect_grep "$name: $t: says what it is" "^cnnscale: error: cannot write (--[a-z]+ )?'$d/$t.*': it is .*(a FIFO \(named pipe\)|a directory|a character device), not a regular file" "$d/$t.out"
    expect_eq "$name: $t stays a $before" "$before" "$(kind "$d/$t")"
  done
  expect_eq "$name: no temporary file left" "" "$(ls "$d" | grep '\.tmp\.')"
}

writer data-bench "$C" data-bench --data "$TMP/ds" --batch-size 4 --batches 2 --json
# Refused before the benchmark, not after it: no result line.
expect_eq "data-bench: nothing measured for a refused path" 0 "$(grep -c 'images/s' "$TMP/data-bench/fifo.out")"
writer allreduce "$C" allreduce -b 8 -e 64 --json
writer timeline "$C" train --synthetic --model mnist_cnn --batch-size 8 --max-steps 2 --no-tensorboard \
  --timeline-steps 1:2 --timeline
expect_eq "timeline: refused before the training starts" 0 "$(grep -c -- '--timeline: recording' "$TMP/timeline/fifo.out")"

# report --output DIR: each of its four files by the same rule, none written when one is refused.
mkdir -p "$TMP/run"
small_run_json "$TMP/run/run.json"
R="$TMP/rep"
mkdir -p "$R/out" "$TMP/elsewhere"
echo old >"$TMP/elsewhere/report.md"
ln -s "$TMP/elsewhere/report.md" "$R/out/report.md"
ln -s "$TMP/elsewhere/report.html" "$R/out/report.html"
"$C" report "$TMP/run" --output "$R/out" >"$R/ok.out" 2>&1
expect_eq "report: links in --output DIR: exit 0" 0 "$?"
expect_eq "report: report.md stays a link" "symbolic link" "$(kind "$R/out/report.md")"
expect_grep "report: its target is the new report" "^# " "$TMP/elsewhere/report.md"
expect_file "report: a link to a missing report.html creates it" "$TMP/elsewhere/report.html"
cp "$R/out/report.json" "$R/report.json.before"
rm "$R/out/scaling.csv" && mkfifo "$R/out/scaling.csv"
echo changed >"$TMP/elsewhere/report.md"
"$C" report "$TMP/run" --output "$R/out" --bootstrap 0 >"$R/fifo.out" 2>&1
expect_eq "report: scaling.csv is a FIFO: exit 2" 2 "$?"
expect_grep "report: says which file and what it is" \
  "^cnnscale: error: cannot write '$R/out/scaling.csv': it is a FIFO \(named pipe\), not a regular file" "$R/fifo.out"
expect_eq "report: the FIFO stays" "fifo" "$(kind "$R/out/scaling.csv")"
expect_eq "report: no file of the four was written (report.md, through its link, as it was)" "changed" "$(cat "$R/out/report.md")"
finish
