#!/usr/bin/env bash
# The Slurm scaling sweep on the local 2-node cluster: <build>/slurm/CNN_CPU.slurm at 1 and 2
# nodes (1 task each, strong scaling, synthetic data), then the dependent report job.
set -u
source "$CNNSCALE_SOURCE/tests/slurm/cluster_lib.sh"
cluster_up
OUT="$WORK/sweep"  # on the shared build tree: the nodes' /tmp is private
cd "$WORK"
bash "$CNNSCALE_SOURCE/scripts/scaling-sweep.sh" --nodes 1,2 --tasks-per-node 1 --global-batch 32 \
  --cnnscale "$CNNSCALE" --out "$OUT" -- --synthetic --max-steps 8 --log-every 4 >"$TMP/sub.out" 2>&1
expect_eq "submission exit status" 0 "$?"
cat "$TMP/sub.out"
rjob=$(sed -n 's/^report job=\([0-9]*\).*/\1/p' "$OUT/sweep.txt")
expect_ne "report job id recorded" "" "$rjob"
for _ in $(seq 1 160); do  # up to ~8 minutes
  [ -n "$rjob" ] && squeue -h -j "$rjob" 2>/dev/null | grep -q . || break
  sleep 3
done
for d in "$OUT"/nodes-*-job-*; do
  expect_file "run.json in $(basename "$d")" "$d/run.json"
done
expect_file "report.md after the report job" "$OUT/report/report.md"
expect_grep "report: strong scaling" 'strong scaling' "$OUT/report/report.md"
expect_grep "report row for 1 node" '^\| 1 +\| +1 ' "$OUT/report/report.md"
expect_grep "report row for 2 ranks on 2 nodes" '^\| 2 +\| +2 ' "$OUT/report/report.md"
finish
