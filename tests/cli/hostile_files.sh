#!/usr/bin/env bash
# hostile_files.sh — issue 48 items 1 and 3 end to end: real cnnscale commands run by
# root while the unprivileged user nobody (uid 65534) plants symbolic links in a sticky
# folder anyone can write ($TMP/shared, mode 1777, as /tmp is) and makes a run directory
# and a report folder of its own (util/atomic_file.hpp, train/run_dir.hpp
# check_run_directory, docs/report.md "Output files", docs/checkpoints.md):
#  - data-bench --json and allreduce --json onto nobody's link to root's private file
#    (mode 0600), train --timeline onto nobody's link to a missing file in a folder only
#    root may write, report --output into the shared folder holding nobody's report.md
#    link: exit 2, one `cnnscale: error:` naming the link, its owner (uid 65534), the
#    folder and the fix; root's file keeps its content and mode 0600, nothing is created;
#  - report --output into a folder nobody made, holding a report.md link: refused,
#    naming the folder and its owner;
#  - train --run-dir into a directory nobody made (mode 777) holding links run.json,
#    metrics.jsonl and run.lock to three private files of root's: exit 2 naming the
#    directory and its owner, nothing written; root's own run directory in the shared
#    folder holding nobody's run.json link: exit 2 naming the link;
#  - what still works: root's own link in the shared folder is written through, and the
#    file it names keeps its mode 0600; a new run directory root makes in the shared
#    folder trains (exit 0).
# Before: every refused case exited 0, root's files replaced (mode widened to 0644),
# appended to or truncated.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
can_be_nobody || { echo "SKIP: nobody plants the links: needs tests/lib.sh can_be_nobody (root, util-linux)"; exit 77; }
C="$CNNSCALE"
nobody_dir >/dev/null || { bad "cannot make \$TMP passable for nobody"; finish; }
SH="$TMP/shared" ROOTONLY="$TMP/rootonly"
mkdir "$SH" "$ROOTONLY" && chmod 1777 "$SH" && chmod 700 "$ROOTONLY"

# private NAME: root's file $TMP/NAME, mode 0600, "secret NAME".
private() { printf 'secret %s\n' "$1" >"$TMP/$1" && chmod 600 "$TMP/$1"; }
expect_private() {
  expect_eq "$2: root's $1 keeps its content" "secret $1" "$(cat "$TMP/$1")"
  expect_eq "$2: root's $1 keeps its owner and mode" "root 600 regular file" "$(stat -c '%U %a %F' "$TMP/$1")"
}
# The link rule's words for nobody's link in $SH (util/atomic_file.cpp refused_link).
LINK_RULE="owned by (nobody \()?uid 65534\)?, in '$SH', a folder that anyone can write and that has the sticky bit"

"$CNNSCALE_BUILD/tests/cnnscale_fixture_tool" write "$TMP/fx.h5" 64 16 4
"$C" prep --format hdf5 --input "$TMP/fx.h5" --images /x --labels /y --output "$TMP/ds" >"$TMP/prep.out" 2>&1
expect_eq "prep exit status" 0 "$?"

# ---- item 1: output files through another user's link ----
private bench.txt
as_nobody ln -s "$TMP/bench.txt" "$SH/bench.json"
"$C" data-bench --data "$TMP/ds" --batch-size 4 --batches 2 --json "$SH/bench.json" >"$TMP/bench.out" 2>&1
expect_eq "data-bench --json, nobody's link: exit 2" 2 "$?"
expect_grep "data-bench: the error names the link, its owner, the folder and the fix" \
  "^cnnscale: error: cannot write --json '$SH/bench.json': it is a symbolic link $LINK_RULE.*Remove the link \(rm '$SH/bench.json'\) if it is not what you meant, or give a path in a folder you own$" \
  "$TMP/bench.out"
expect_eq "data-bench: refused before measuring" 0 "$(grep -c 'images/s' "$TMP/bench.out")"
expect_private bench.txt data-bench
expect_eq "data-bench: the link stays nobody's link" "symbolic link nobody" "$(stat -c '%F %U' "$SH/bench.json")"

private allreduce.txt
as_nobody ln -s "$TMP/allreduce.txt" "$SH/allreduce.json"
timeout 120 "$C" allreduce -b 8 -e 64 --json "$SH/allreduce.json" >"$TMP/allreduce.out" 2>&1
expect_eq "allreduce --json, nobody's link: exit 2" 2 "$?"
expect_grep "allreduce: the error names the link and its owner" \
  "^cnnscale: error: cannot write --json '$SH/allreduce.json': it is a symbolic link $LINK_RULE" "$TMP/allreduce.out"
expect_private allreduce.txt allreduce

as_nobody ln -s "$ROOTONLY/made.json" "$SH/timeline.json"
timeout 300 "$C" train --synthetic --model mnist_cnn --batch-size 8 --max-steps 2 --no-tensorboard \
  --timeline-steps 1:2 --timeline "$SH/timeline.json" >"$TMP/timeline.out" 2>&1
expect_eq "train --timeline, nobody's dangling link: exit 2" 2 "$?"
expect_grep "train --timeline: the error names the link and its owner" \
  "^cnnscale: error: cannot write --timeline '$SH/timeline.json': it is a symbolic link $LINK_RULE" "$TMP/timeline.out"
expect_eq "train --timeline: no file made in root's closed folder" "" "$(ls -A "$ROOTONLY")"

# report --output: a run to report on.
mkdir -p "$TMP/run"
small_run_json "$TMP/run/run.json"
private report.txt
as_nobody ln -s "$TMP/report.txt" "$SH/report.md"
"$C" report "$TMP/run" --output "$SH" --bootstrap 0 >"$TMP/report-shared.out" 2>&1
expect_eq "report --output into the shared folder, nobody's report.md link: exit 2" 2 "$?"
expect_grep "report: the error names the link and its owner" \
  "^cnnscale: error: cannot write '$SH/report.md': it is a symbolic link $LINK_RULE" "$TMP/report-shared.out"
expect_eq "report: none of the four files written" "" "$(cd "$SH" && ls report.html scaling.csv report.json 2>/dev/null)"
expect_private report.txt "report into the shared folder"

as_nobody mkdir "$SH/out"
as_nobody ln -s "$TMP/report.txt" "$SH/out/report.md"
"$C" report "$TMP/run" --output "$SH/out" --bootstrap 0 >"$TMP/report-theirs.out" 2>&1
expect_eq "report --output into nobody's folder: exit 2" 2 "$?"
expect_grep "report: the error names the folder, its owner and the fix" \
  "^cnnscale: error: the report's --output folder '$SH/out' belongs to (nobody \()?uid 65534\)?, not to you \(you are root \(uid 0\)\): .*choose an --output folder you own" \
  "$TMP/report-theirs.out"
expect_private report.txt "report into nobody's folder"

# Still written through: root's own link in the shared folder; the file keeps its mode.
private mine.txt
ln -s "$TMP/mine.txt" "$SH/mine.json"
"$C" data-bench --data "$TMP/ds" --batch-size 4 --batches 2 --json "$SH/mine.json" >"$TMP/mine.out" 2>&1
expect_eq "data-bench --json, root's own link in the shared folder: exit 0" 0 "$?"
expect_eq "its target holds the JSON" "{" "$(head -c 1 "$TMP/mine.txt")"
expect_eq "its target keeps mode 0600 (not widened)" "600" "$(stat -c %a "$TMP/mine.txt")"
expect_eq "the link stays" "symbolic link" "$(stat -c %F "$SH/mine.json")"

# ---- item 3: a run directory another user made ----
TRAIN=(train --synthetic --model mnist_cnn --batch-size 8 --max-steps 2 --no-tensorboard --no-eval)
private run.json.txt; private metrics.txt; private lock.txt
as_nobody mkdir -m 777 "$SH/run"
as_nobody ln -s "$TMP/run.json.txt" "$SH/run/run.json"
as_nobody ln -s "$TMP/metrics.txt" "$SH/run/metrics.jsonl"
as_nobody ln -s "$TMP/lock.txt" "$SH/run/run.lock"
timeout 300 "$C" "${TRAIN[@]}" --run-dir "$SH/run" >"$TMP/theirs.out" 2>&1
expect_eq "train --run-dir nobody made: exit 2" 2 "$?"
expect_grep "train: the error names the directory, its owner and the fix" \
  "^cnnscale: error: run directory \(--run-dir\) '$SH/run' belongs to (nobody \()?uid 65534\)?, not to you \(you are root \(uid 0\)\): .*choose a --run-dir you own" \
  "$TMP/theirs.out"
for f in run.json.txt metrics.txt lock.txt; do expect_private "$f" "train in nobody's run directory"; done
expect_eq "train: nothing written there" "metrics.jsonl run.json run.lock" "$(ls "$SH/run" | tr '\n' ' ' | sed 's/ $//')"

mkdir "$SH/rootrun" && chmod 777 "$SH/rootrun"
private run2.txt
as_nobody ln -s "$TMP/run2.txt" "$SH/rootrun/run.json"
timeout 300 "$C" "${TRAIN[@]}" --run-dir "$SH/rootrun" >"$TMP/rootrun.out" 2>&1
expect_eq "train --run-dir root's, holding nobody's run.json link: exit 2" 2 "$?"
expect_grep "train: the error names the link, its owner and the fix" \
  "^cnnscale: error: run directory \(--run-dir\) '$SH/rootrun' holds a symbolic link '$SH/rootrun/run.json' \(to '$TMP/run2.txt'\), made by (nobody \()?uid 65534\)?: .*remove the link \(rm '$SH/rootrun/run.json'\), or choose a --run-dir you own" \
  "$TMP/rootrun.out"
expect_private run2.txt "train in root's run directory with nobody's link"
expect_eq "train: no lock, no metrics, no checkpoint there" "run.json" "$(ls "$SH/rootrun")"

timeout 300 "$C" "${TRAIN[@]}" --run-dir "$SH/newrun" >"$TMP/newrun.out" 2>&1
expect_eq "train --run-dir a new directory root makes in the shared folder: exit 0" 0 "$?"
expect_file "it writes run.json" "$SH/newrun/run.json"
finish
