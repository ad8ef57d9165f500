#!/usr/bin/env bash
# `cnnscale report` end to end on run directories written here: the numbers of a
# hand-computed strong-scaling table in report.md / scaling.csv / report.json, well-formed
# SVG and HTML (xmllint), --allreduce, and the bad-input messages.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
command -v xmllint >/dev/null || { echo "SKIP: xmllint not installed (apt-get install libxml2-utils)"; exit 77; }

# run DIR P BATCH_PER_RANK STEP_MS COMM_MS [MODEL] — images/s = global batch / step time.
run() {
  mkdir -p "$1"
  python3 - "$@" <<'PY'
import json, sys
d, p, b, t, comm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
model = sys.argv[6] if len(sys.argv) > 6 else "mnist_cnn"
g = p * b
json.dump({"world_size": p, "nodes": max(1, p // 2), "ranks_per_node": min(p, 2), "backend": "mpi", "device": "cpu",
           "model": model, "precision": "fp32", "batch_per_rank": b, "global_batch": g, "steps": 50,
           "images_per_s": g * 1000.0 / t, "step_ms": {"median": t, "p10": t * 0.9, "p90": t * 1.25},
           "breakdown_ms": {"data": 0.05 * t, "compute": 0.8 * t - comm, "comm_exposed": comm, "optimizer": 0.15 * t},
           "train_loss": 0.4, "test_accuracy": None, "grad_bytes": 4800000,
           "slurm": {"job_id": "1234", "nodelist": "n[1-2]"}}, open(d + "/run.json", "w"))
PY
}
# Hand-computed: G = 240; step 2400, 1333.33, 800 ms → 100, 180, 300 images/s;
# speedup 1.8, 3.0; efficiency 90%, 75%; Karp–Flatt 1/9 = 0.1111 at both.
run "$TMP/r1" 1 240 2400 0
run "$TMP/r2" 2 120 1333.3333333333333 100
run "$TMP/r4" 4 60 800 120
"$CNNSCALE" report "$TMP/r4" "$TMP/r1" "$TMP/r2" --output "$TMP/out" >"$TMP/out.txt" 2>&1
expect_eq "report exit status" 0 "$?"
for f in report.md report.html scaling.csv report.json; do expect_file "$f written" "$TMP/out/$f"; done
expect_grep "stdout names the group and mode" 'mnist_cnn fp32 mpi cpu \(strong scaling, 3 rank counts\)' "$TMP/out.txt"
expect_grep "recommendation: 2 ranks (90% >= 80%)" 'Recommendation: up to 2 ranks \(1 node\).*90\.0%.*below the threshold at 4 ranks' "$TMP/out/report.md"
expect_grep "md row 2 ranks: 180 img/s, 1.800, 90.0%, 0.1111" '^\| 2 +\| +1 \| +2 CPUs \| +120 \| +240 \| +180\.0 \|.*\| +1\.800 \| +90\.0% \| +0\.1111 \|' "$TMP/out/report.md"
expect_grep "md row 4 ranks: 300 img/s, 3.000, 75.0%, 0.1111" '^\| 4 +\|.*\| +300\.0 \|.*\| +3\.000 \| +75\.0% \| +0\.1111 \|' "$TMP/out/report.md"
expect_grep "md base row has no Karp–Flatt" '^\| 1 +\|.*\| +1\.000 \| +100\.0% \| +— \|' "$TMP/out/report.md"
expect_grep "md says the projection is a model" 'Projection \(model, not measured\)' "$TMP/out/report.md"
expect_grep "md reports the fit error over the fitted points" 'Fit error over the 3 points fitted \(every measured count\): mean [0-9.]+%, max [0-9.]+%' "$TMP/out/report.md"
expect_grep "md projects to 64x the largest count (256 ranks on 128 nodes x 2)" '^\| 256 +\| +128 × 2 \| +64× \|' "$TMP/out/report.md"
expect_grep "csv measured row 4 ranks" '^mnist_cnn fp32 mpi cpu,mnist_cnn,fp32,mpi,cpu,strong,measured,4,2,60,240,300,[0-9.]+,[0-9.]+,3,0\.75,0\.1111111111,800,' "$TMP/out/scaling.csv"
expect_eq "csv rows: header + 3 measured + 6 model" 10 "$(wc -l <"$TMP/out/scaling.csv")"
python3 - "$TMP/out/report.json" >"$TMP/json.txt" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
g = j["groups"][0]
print("mode", g["mode"], "runs", len(g["runs"]), "proj", len(g["projections"]), "model", g["projection_is_model"])
print("eff", " ".join("%.4f" % r["efficiency"] for r in g["runs"]))
print("rec", g["recommendation"]["recommended_ranks"], g["recommendation"]["measured_below"])
PY
expect_grep "json: strong, 3 runs, 6 projections" '^mode strong runs 3 proj 6 model True$' "$TMP/json.txt"
expect_grep "json efficiencies" '^eff 1\.0000 0\.9000 0\.7500$' "$TMP/json.txt"
expect_grep "json recommendation" '^rec 2 4$' "$TMP/json.txt"

# Well-formed output: every <svg> on its own, the page as XML and as HTML.
python3 - "$TMP/out/report.html" "$TMP/svg" <<'PY'
import re, sys, os
os.makedirs(sys.argv[2], exist_ok=True)
for i, s in enumerate(re.findall(r"<svg\b.*?</svg>", open(sys.argv[1]).read(), re.S)):
    open("%s/chart%d.svg" % (sys.argv[2], i), "w").write(s)
PY
expect_eq "three charts in report.html" 3 "$(ls "$TMP/svg" | wc -l)"
for s in "$TMP"/svg/*.svg; do
  xmllint --noout "$s" 2>"$TMP/xl.err"
  expect_eq "$(basename "$s") is well-formed XML" 0 "$?"
done
expect_grep "throughput chart has the ideal line" 'ideal \(linear\)' "$TMP/svg/chart0.svg"
expect_grep "throughput chart y axis has units" 'throughput \(images/s, log scale\)' "$TMP/svg/chart0.svg"
expect_grep "efficiency chart has the threshold" 'threshold 80\.0%' "$TMP/svg/chart1.svg"
expect_grep "breakdown chart legend" '>comm \(exposed\)</text>' "$TMP/svg/chart2.svg"
expect_grep "breakdown chart y axis has units" 'median time per step \(ms\)' "$TMP/svg/chart2.svg"
xmllint --noout "$TMP/out/report.html" 2>"$TMP/xml.err"
expect_eq "report.html is well-formed XML" 0 "$?"
xmllint --html --noout "$TMP/out/report.html" 2>"$TMP/html.err"
expect_eq "xmllint --html exit status" 0 "$?"
# libxml2's HTML 4 parser does not know SVG element names; anything else is a real error.
grep -v 'Tag [a-z]* invalid' "$TMP/html.err" | grep -E 'error' >"$TMP/html.real" || true
expect_eq "no HTML errors beyond unknown SVG tags" 0 "$(wc -l <"$TMP/html.real")"
if grep -Eq '(src|href)="(https?:)?//' "$TMP/out/report.html"; then bad "report.html loads external resources"; else ok "report.html is self-contained"; fi

# --allreduce: alpha and beta from a benchmark file (ring model, 4 ranks, α = 20 µs, β = 5 GB/s).
python3 - "$TMP/ar.json" <<'PY'
import json, sys
p, a_us, beta = 4, 20.0, 5e9
rows = [{"size": s, "count": s // 4, "type": "float", "time_us": 2 * (p - 1) * a_us + 2 * (p - 1) / p * s / beta * 1e6,
         "algbw_gbs": 0, "busbw_gbs": 0, "wrong": 0} for s in [2 ** k for k in range(3, 27, 2)]]
json.dump({"tool": "cnnscale allreduce", "world_size": p, "backend": "mpi", "type": "float", "results": rows}, open(sys.argv[1], "w"))
PY
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" "$TMP/r4" --allreduce "$TMP/ar.json" --output "$TMP/out2" >"$TMP/out2.txt" 2>&1
expect_eq "report --allreduce exit status" 0 "$?"
expect_grep "benchmark alpha and beta in report.md" 'α = 20\.00 µs, β = 5\.000 GB/s' "$TMP/out2/report.md"
expect_grep "a 1-node benchmark is the intra-node level" 'ar\.json: 4 ranks in the sum, launch 1 node\(s\) × 4, --level world → intra-node level' "$TMP/out2/report.md"
expect_grep "model takes beta1 from it" '^\| β₁ intra-node \(bandwidth\) +\| +5\.000 GB/s \| measured \|.*\| +\[[0-9]\] \|$' "$TMP/out2/report.md"
# Its source as a numbered note below the table (the table fits a 120-column terminal).
ref=$(sed -nE 's/^\| β₁ intra-node \(bandwidth\) .*\| +(\[[0-9]\]) \|$/\1/p' "$TMP/out2/report.md" | tr -d '[]')
expect_grep "beta1's source note: the allreduce measurement" "^\[${ref:-?}\] allreduce measurement \(--level node\)" "$TMP/out2/report.md"
wide() {  # the table lines of a report.md wider than 120 characters (issue 29 item 4)
  python3 -c 'import sys; [print(l.rstrip()) for l in open(sys.argv[1], encoding="utf-8") if l.startswith("|") and len(l.rstrip("\n")) > 120]' "$1"
}
expect_eq "report.md tables fit 120 columns" "" "$(wide "$TMP/out2/report.md" | head -3)"

# Cross-node measurement (--level cross, 2 nodes, α = 50 µs, β = 1 GB/s), --project and --points.
python3 - "$TMP/cross.json" <<'PY'
import json, sys
p, a_us, beta = 2, 50.0, 1e9
rows = [{"size": s, "time_us": 2 * (p - 1) * a_us + 2 * (p - 1) / p * s / beta * 1e6, "wrong": 0}
        for s in [2 ** k for k in range(3, 27, 2)]]
json.dump({"tool": "cnnscale allreduce", "world_size": p, "nodes": 2, "ranks_per_node": 2, "level": "cross",
           "backend": "mpi", "results": rows}, open(sys.argv[1], "w"))
PY
printf 'ranks,nodes,images_per_s,step_ms,label\n8,4,500,,other system\n' >"$TMP/points.csv"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" "$TMP/r4" --allreduce "$TMP/ar.json" --allreduce "$TMP/cross.json" \
  --project 512,3584,64x8 --points "$TMP/points.csv" --output "$TMP/out3" >"$TMP/out3.txt" 2>&1
expect_eq "report with two --allreduce, --project, --points: exit status" 0 "$?"
expect_grep "beta2 from the cross-node measurement" '^\| β₂ cross-node \(bandwidth\) +\| +1\.000 GB/s \| measured \|' "$TMP/out3/report.md"
expect_grep "alpha2 from it" '^\| α₂ cross-node \(latency per message step\) +\| +50\.00 µs \| measured \|' "$TMP/out3/report.md"
expect_grep "--project 3584 at 2 ranks per node" '^\| 3584 +\| +1792 × 2 \| --project \|' "$TMP/out3/report.md"
expect_grep "--project 64x8" '^\| 512 +\| +64 × 8 \| --project \|' "$TMP/out3/report.md"
expect_grep "--points row" '^\| other system +\| +8 \| +4 \| +500\.0 \|' "$TMP/out3/report.md"
expect_grep "--points in the chart" 'external \(--points\)' "$TMP/out3/report.html"
expect_eq "report.md with projections: tables fit 120 columns" "" "$(wide "$TMP/out3/report.md" | head -3)"
xmllint --noout "$TMP/out3/report.html"
expect_eq "report.html with bands and points is well-formed" 0 "$?"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --project 3x --output "$TMP/o9" >"$TMP/e9.out" 2>"$TMP/e9.err"
expect_eq "bad --project: exit 2" 2 "$?"
expect_grep "bad --project: message" "^cnnscale: error: --project: '3x' is not a rank count R or a layout NxL" "$TMP/e9.err"
# One node only (r1, r2 are 1 node): nothing beyond it is projected.
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --output "$TMP/o10" >"$TMP/o10.txt" 2>&1
expect_grep "one node: 2 nodes not projected" '^\| 4 +\| +2 × 2 \| +2× \|.*not projected \[[0-9]\]' "$TMP/o10/report.md"
expect_grep "one node: why, below the table" '^\[[0-9]\] not projected: no cross-node run or allreduce measurement' "$TMP/o10/report.md"
expect_grep "one node: recommendation says so" 'Counts from 4 ranks are not projected' "$TMP/o10/report.md"

# Bad input: one clear message each, exit 2, no crash.
mkdir -p "$TMP/empty"
"$CNNSCALE" report "$TMP/r1" "$TMP/empty" --output "$TMP/o3" >"$TMP/e1.out" 2>"$TMP/e1.err"
expect_eq "dir without run.json: exit 2" 2 "$?"
expect_grep "dir without run.json: message" "^cnnscale: error: '.*/empty' has no run.json" "$TMP/e1.err"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" "$TMP/empty" --allow-missing --output "$TMP/o3b" >"$TMP/e1b.out" 2>&1
expect_eq "--allow-missing skips it" 0 "$?"
expect_grep "--allow-missing says what it skipped" '^skipped: .*empty.* has no run.json' "$TMP/e1b.out"
# A damaged run.json with a byte that is not UTF-8: the skipped run's reason quotes what the
# JSON parser last read, and report.json still gets written, valid (fuzz_report: the dump threw).
mkdir -p "$TMP/badbyte"
printf '{\n \xa0 "x": 1}\n' >"$TMP/badbyte/run.json"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" "$TMP/badbyte" --allow-missing --output "$TMP/o3c" >"$TMP/e1c.out" 2>&1
expect_eq "--allow-missing with a non-UTF-8 run.json: exit 0" 0 "$?"
expect_grep "... it says what it skipped" '^skipped: .*badbyte.*run.json' "$TMP/e1c.out"
python3 -c 'import json, sys; j = json.load(open(sys.argv[1], encoding="utf-8")); assert any("badbyte" in s for s in j["skipped"]), j["skipped"]' \
  "$TMP/o3c/report.json" 2>"$TMP/e1c.py"
expect_eq "... report.json is UTF-8 JSON naming the skipped run" 0 "$?"
mkdir -p "$TMP/broken" && echo '{"world_size": 2, ' >"$TMP/broken/run.json"
"$CNNSCALE" report "$TMP/broken" --output "$TMP/o4" >"$TMP/e2.out" 2>"$TMP/e2.err"
expect_eq "malformed run.json: exit 2" 2 "$?"
expect_grep "malformed run.json: names the file" '^cnnscale: error: .*/broken/run.json: malformed JSON' "$TMP/e2.err"
mkdir -p "$TMP/nobd" && python3 -c "
import json; d = json.load(open('$TMP/r2/run.json')); del d['breakdown_ms']; json.dump(d, open('$TMP/nobd/run.json', 'w'))"
"$CNNSCALE" report "$TMP/nobd" --output "$TMP/o5" >"$TMP/e3.out" 2>"$TMP/e3.err"
expect_eq "missing field: exit 2" 2 "$?"
expect_grep "missing field: names file and field" "^cnnscale: error: .*/nobd/run.json: required field 'breakdown_ms' is missing" "$TMP/e3.err"
run "$TMP/other" 2 120 1300 100 resnet_small
"$CNNSCALE" report "$TMP/r1" "$TMP/other" --output "$TMP/o6" >"$TMP/e4.out" 2>"$TMP/e4.err"
expect_eq "mixed models: exit 2" 2 "$?"
expect_grep "mixed models: names both" "^cnnscale: error: runs of different models.*'mnist_cnn'.*'resnet_small'" "$TMP/e4.err"
"$CNNSCALE" report "$TMP/r2" --output "$TMP/single" >"$TMP/s.out" 2>"$TMP/s.err"
expect_eq "single run: exit 0" 0 "$?"
expect_grep "single run: says scaling needs two counts" 'scaling needs runs at two or more rank counts' "$TMP/s.out"
expect_grep "single run: report.md has its row" '^\| 2 +\|.*\| +180\.0 \|' "$TMP/single/report.md"
xmllint --noout "$TMP/single/report.html"
expect_eq "single run: report.html well-formed" 0 "$?"
"$CNNSCALE" report "$TMP/r1" >"$TMP/e5.out" 2>"$TMP/e5.err"
expect_eq "no --output: exit 2" 2 "$?"
expect_grep "no --output: message" '^cnnscale: error: report: --output DIR is required' "$TMP/e5.err"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --mode diagonal --output "$TMP/o7" >"$TMP/e6.out" 2>"$TMP/e6.err"
expect_eq "bad --mode: exit 2" 2 "$?"
expect_grep "bad --mode: message" '^cnnscale: error: --mode diagonal is not known' "$TMP/e6.err"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --efficiency-threshold 1.5 --output "$TMP/o8" >"$TMP/e7.out" 2>"$TMP/e7.err"
expect_eq "bad threshold: exit 2" 2 "$?"
"$CNNSCALE" report --help >"$TMP/help.out" 2>&1
expect_grep "--help documents --efficiency-threshold" '--efficiency-threshold' "$TMP/help.out"
# Values no training or measurement can have (issue 39): options and files, refused by name.
for e in 1e30 inf nan; do
  "$CNNSCALE" report "$TMP/r1" "$TMP/r2" --epochs $e --train-samples 60000 --output "$TMP/oe" >"$TMP/ee.out" 2>"$TMP/ee.err"
  expect_eq "--epochs $e: exit 2" 2 "$?"
  expect_grep "--epochs $e: named, with the range" \
    "^cnnscale: error: --epochs (must be more than 0 and at most 1e\+06, got 1e\+30|inf is not a finite number|nan is not a finite number); the epochs of the training" "$TMP/ee.err"
done
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --epochs 90 --train-samples 60000 --node-hour-cost inf --output "$TMP/oe" >"$TMP/ee.out" 2>"$TMP/ee.err"
expect_grep "--node-hour-cost inf: named" "^cnnscale: error: --node-hour-cost inf is not a finite number" "$TMP/ee.err"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --epochs 90 --train-samples 1000000000000000 --output "$TMP/oe" >"$TMP/ee.out" 2>"$TMP/ee.err"
expect_grep "--train-samples 1e15: named" "^cnnscale: error: --train-samples must be at least 1 and at most 1e\+12, got 1e\+15" "$TMP/ee.err"
mkdir -p "$TMP/absurd"
python3 -c "
import json; d = json.load(open('$TMP/r2/run.json')); d['images_per_s'] = 1e308; json.dump(d, open('$TMP/absurd/run.json', 'w'))"
"$CNNSCALE" report "$TMP/r1" "$TMP/absurd" --output "$TMP/oa" >"$TMP/ea.out" 2>"$TMP/ea.err"
expect_eq "run.json images_per_s 1e308: exit 2" 2 "$?"
expect_grep "run.json images_per_s 1e308: file, field, bound" \
  "^cnnscale: error: $TMP/absurd/run.json: field 'images_per_s' is 1e\+308, more than any real measurement \(at most 1e\+12 images/s\)" "$TMP/ea.err"
echo '{"tool": "cnnscale data-bench", "images_per_s": 1e308, "images_per_cpu_s": 50, "world_size": 1, "data_threads": 1}' >"$TMP/db.json"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --data-bench "$TMP/db.json" --output "$TMP/ob" >"$TMP/eb.out" 2>"$TMP/eb.err"
expect_eq "--data-bench images_per_s 1e308: exit 2" 2 "$?"
expect_grep "--data-bench images_per_s 1e308: file, field, bound" \
  "^cnnscale: error: $TMP/db.json: field 'images_per_s' is 1e\+308, more than any real measurement" "$TMP/eb.err"
printf 'ranks,nodes,images_per_s\n8,4,inf\n' >"$TMP/inf.csv"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --points "$TMP/inf.csv" --output "$TMP/op" >"$TMP/ep.out" 2>"$TMP/ep.err"
expect_grep "--points images_per_s inf: file, line, field" "^cnnscale: error: $TMP/inf.csv:2: field 'images_per_s' is inf" "$TMP/ep.err"

# Input files are bounded (issue 39: a 300 MB --data-bench file was read whole, 1.76 GB):
# 20 MiB is refused before it is read, naming the file, its size and the bound.
python3 -c "
import json; json.dump({'tool': 'cnnscale data-bench', 'pad': 'x' * (20 << 20)}, open('$TMP/huge.json', 'w'))"
"$CNNSCALE" report "$TMP/r1" "$TMP/r2" --data-bench "$TMP/huge.json" --output "$TMP/oh" >"$TMP/eh.out" 2>"$TMP/eh.err"
expect_eq "20 MiB --data-bench file: exit 2" 2 "$?"
expect_grep "20 MiB --data-bench file: size and bound named" \
  "^cnnscale: error: $TMP/huge.json: 20\.0 MiB; cnnscale reads at most 16\.0 MiB from one input file" "$TMP/eh.err"
mkdir -p "$TMP/hugerun" && cp "$TMP/huge.json" "$TMP/hugerun/run.json"
"$CNNSCALE" report "$TMP/hugerun" --output "$TMP/oh2" >"$TMP/eh2.out" 2>"$TMP/eh2.err"
expect_grep "20 MiB run.json: size and bound named" "^cnnscale: error: $TMP/hugerun/run.json: 20\.0 MiB; cnnscale reads at most" "$TMP/eh2.err"
finish
