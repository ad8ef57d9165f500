#!/usr/bin/env bash
# The Slurm scaling sweep on the local 2-node cluster: <build>/slurm/CNN_CPU.slurm at 1 and 2
# nodes (1 task each, strong scaling, synthetic data), each job measuring the network in its
# allocation first (`cnnscale allreduce --level cross` at 2 nodes), then the dependent report
# job, whose cross-node α₂, β₂ must be the ones fitted independently (here, in Python) to
# that measurement, and whose 4-node projection exists only because of it; with --epochs 90
# the report's training budget (node-hours per count, the request paragraph).
set -u
source "$CNNSCALE_SOURCE/tests/slurm/cluster_lib.sh"
cluster_up
OUT="$WORK/sweep"  # on the shared build tree: the nodes' /tmp is private
cd "$WORK"
bash "$CNNSCALE_SOURCE/scripts/scaling-sweep.sh" --nodes 1,2 --tasks-per-node 1 --global-batch 32 \
  --allreduce-args "-b 8 -e 8M -f 4 -w 2 -n 8" --epochs 90 --train-samples 60000 \
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
# (a missing report: the report job's own output, and its state, say why)
if [ ! -s "$OUT/report/report.md" ]; then
  echo "    report job $rjob: $(job_field "$rjob" JobState) exit $(job_field "$rjob" ExitCode)"
  show_out "$(ls "$OUT"/logs/report-*.out 2>/dev/null | head -n 1)"
fi
expect_grep "report: strong scaling" 'strong scaling' "$OUT/report/report.md"
expect_grep "report row for 1 node" '^\| 1 +\| +1 ' "$OUT/report/report.md"
expect_grep "report row for 2 ranks on 2 nodes" '^\| 2 +\| +2 ' "$OUT/report/report.md"

# The network measurements: cross-node at 2 nodes only (1 task per node: no node level).
cross=$(ls "$OUT"/nodes-2-job-*/allreduce-cross.json 2>/dev/null | head -n 1)
expect_file "allreduce-cross.json in the 2-node run directory" "$cross"
if ls "$OUT"/nodes-1-job-*/allreduce-*.json >/dev/null 2>&1; then bad "1-node job measured a level it does not have"
else ok "1-node job measured nothing (no cross-node or intra-node level)"; fi
for d in "$OUT"/nodes-*-job-*; do [ -f "$d/run.json" ] || show_out "$(ls "$OUT"/logs/nodes-"$(basename "$d" | cut -d- -f2)"-*.out | head -n 1)"; done
expect_grep "report job passed the measurement" "--allreduce .*allreduce-cross\.json" "$(ls "$OUT"/logs/report-*.out | head -n 1)"
# Independent fit of T = 2(p−1)α + 2(p−1)/p·n/β (relative least squares, p = 2) to the
# measurement, against what report.json says the model used.
python3 - "$cross" "$OUT/report/report.json" >"$TMP/cross.txt" 2>&1 <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
p = b["world_size"]
assert b["level"] == "cross" and b["nodes"] == 2 and p == 2, (b["level"], b["nodes"], p)
rows = [(r["size"], r["time_us"] / 1000.0) for r in b["results"] if r["time_us"] > 0]
A = [(2 * (p - 1) / t, 2 * (p - 1) / p * n / t) for n, t in rows]  # rows divided by t
s00 = sum(a * a for a, _ in A); s01 = sum(a * c for a, c in A); s11 = sum(c * c for _, c in A)
r0 = sum(a for a, _ in A); r1 = sum(c for _, c in A)
det = s00 * s11 - s01 * s01
alpha, inv_beta = (r0 * s11 - r1 * s01) / det, (s00 * r1 - s01 * r0) / det
if alpha < 0:
    alpha, inv_beta = 0.0, r1 / s11
beta_gbs = 1 / inv_beta / 1e6
g = json.load(open(sys.argv[2]))["groups"][0]
c = g["model"]["cross"]
print("beta_state", c["beta_gbs"]["state"])
print("alpha_state_ok", c["alpha_us"]["state"] == ("measured" if alpha > 0 else "pinned"))
print("beta_close", abs(c["beta_gbs"]["value"] / beta_gbs - 1) < 1e-6)
print("alpha_close", abs(c["alpha_us"]["value"] - alpha * 1000) < 1e-3)
print("source_names_file", sys.argv[1].split("/")[-2] in c["source"])
proj = {x["ranks"]: x for x in g["projections"]}
print("proj4", proj[4]["projected"], proj[4]["nodes"])
print("measured: beta %.4g GB/s, alpha %.4g us; report: beta %.4g GB/s, alpha %.4g us, eta %.3g; "
      "exposed comm at 2 nodes %.4g ms" % (beta_gbs, alpha * 1000, c["beta_gbs"]["value"], c["alpha_us"]["value"],
      g["model"]["exposure"]["value"], g["runs"][1]["breakdown_ms"]["comm_exposed"]))
PY
cat "$TMP/cross.txt"
expect_grep "report: beta2 measured, not fitted to the runs" '^beta_state measured$' "$TMP/cross.txt"
expect_grep "report: alpha2 measured (or pinned where the fit is negative)" '^alpha_state_ok True$' "$TMP/cross.txt"
expect_grep "report: beta2 equals the independent fit (1e-6 relative)" '^beta_close True$' "$TMP/cross.txt"
expect_grep "report: alpha2 equals the independent fit (1e-3 us)" '^alpha_close True$' "$TMP/cross.txt"
expect_grep "report: the source names the 2-node run directory" '^source_names_file True$' "$TMP/cross.txt"
expect_grep "report: 4 ranks on 4 nodes projected" '^proj4 True 4' "$TMP/cross.txt"
expect_grep "report.md: the cross-node level comes from the measurement" 'allreduce measurement \(--level cross\)' "$OUT/report/report.md"
# The training budget (issue 29): --epochs 90 --train-samples 60000 through the report job;
# each measured row from its run.json, the 4-node row from the model.
python3 "$CNNSCALE_SOURCE/tests/report/check_budget.py" "$OUT/report/report.json" 90 60000 >"$TMP/budget.txt" 2>&1
cat "$TMP/budget.txt"
expect_grep "budget: every measured row from its run.json's images/s" '^measured rows ok 2$' "$TMP/budget.txt"
expect_grep "budget: the 4-node row projected" '^projected 4 nodes True$' "$TMP/budget.txt"
expect_grep "report.md: the request paragraph" '^Training mnist_cnn \(fp32, global batch 32\) for 90 epochs on 60000 images takes .* node-hours' \
  "$OUT/report/report.md"
finish
