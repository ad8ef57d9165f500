#!/usr/bin/env bash
# The Slurm sweep on the local cluster: 1 and 2 nodes of slurm/CNN_CPU.slurm, then the
# dependent report job. SKIPs (77) without a reachable Slurm controller, without the
# template, or while this build has no `cnnscale train`.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TEMPLATE="$CNNSCALE_SOURCE/slurm/CNN_CPU.slurm"
sinfo -h >/dev/null 2>&1 || { echo "SKIP: no Slurm controller reachable (sinfo fails)"; exit 77; }
[ -f "$TEMPLATE" ] || { echo "SKIP: $TEMPLATE not present in this tree"; exit 77; }
"$CNNSCALE" train --help >/dev/null 2>&1 || { echo "SKIP: \`cnnscale train\` not built yet"; exit 77; }
NODES=$(sinfo -h -o %D | awk '{s+=$1} END {print s+0}')
LIST=1; [ "${NODES:-1}" -ge 2 ] && LIST=1,2
OUT="$CNNSCALE_BUILD/slurm-sweep-test.$$"  # on the shared build tree, not node-local /tmp
bash "$CNNSCALE_SOURCE/scripts/scaling-sweep.sh" --nodes "$LIST" --tasks-per-node 1 --global-batch 32 \
  --cnnscale "$CNNSCALE" --out "$OUT" -- --synthetic --max-steps 5 >"$TMP/sub.out" 2>&1
expect_eq "submission exit status" 0 "$?"
rjob=$(sed -n 's/^report job=\([0-9]*\).*/\1/p' "$OUT/sweep.txt")
for _ in $(seq 1 160); do  # up to ~8 minutes
  [ -n "$rjob" ] && squeue -h -j "$rjob" 2>/dev/null | grep -q . || break
  sleep 3
done
expect_file "report.md after the report job" "$OUT/report/report.md"
expect_grep "report lists the node counts" '^\| 1 ' "$OUT/report/report.md"
rm -rf "$OUT"
finish
