#!/usr/bin/env bash
# `cnnscale allreduce` on 2 ranks: nccl-tests columns, zero wrong, JSON output, bad options.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe"
for dt in float bfloat16; do
  timeout 300 $M -n 2 "$CNNSCALE" allreduce -b 4 -e 4M -f 4 -w 1 -n 3 -d $dt --backend mpi --json "$TMP/ar-$dt.json" \
    >"$TMP/ar-$dt.out" 2>"$TMP/ar-$dt.err"
  expect_eq "allreduce $dt exit status" 0 "$?"
  expect_grep "$dt header has nccl-tests columns" 'size\(B\) +count +type +time\(us\) +algbw\(GB/s\) +busbw\(GB/s\) +#wrong' "$TMP/ar-$dt.out"
  expect_grep "$dt largest size row with 0 wrong" "^ +4194304 +[0-9]+ +$dt +[0-9.]+ +[0-9.]+ +[0-9.]+ +0$" "$TMP/ar-$dt.out"
  expect_grep "$dt footer" '# Avg bus bandwidth +: [0-9.]+ GB/s' "$TMP/ar-$dt.out"
  expect_grep "$dt JSON world size" '"world_size": 2' "$TMP/ar-$dt.json"
done
# busbw = algbw * 2(n-1)/n = algbw at n=2: check a row.
python3 - "$TMP/ar-float.json" <<'PY' >"$TMP/bus.txt" 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
bad = [r for r in j["results"] if abs(r["busbw_gbs"] - r["algbw_gbs"]) > 1e-9 or r["wrong"] != 0]
print("rows", len(j["results"]), "bad", len(bad))
PY
expect_grep "JSON rows consistent (busbw == algbw at 2 ranks, no wrong)" '^rows [0-9]+ bad 0$' "$TMP/bus.txt"

timeout 60 $M -n 4 "$CNNSCALE" allreduce -b 1K -e 64K -f 8 -w 0 -n 1 >"$TMP/ar4.out" 2>&1
expect_eq "allreduce 4 ranks exit status" 0 "$?"
expect_grep "4-rank header" '4 ranks on 1 node' "$TMP/ar4.out"

# --level: the two levels of the hierarchical sum (one node here: node = all 4 ranks, cross =
# each rank alone), recorded in the JSON for `cnnscale report`.
timeout 60 $M -n 4 "$CNNSCALE" allreduce --level node -b 1K -e 64K -f 8 -w 0 -n 1 --json "$TMP/lv-node.json" >"$TMP/lv1.out" 2>&1
expect_eq "--level node exit status" 0 "$?"
expect_grep "--level node header" '^# cnnscale allreduce --level node: sums over 4 ranks each \(launch: 4 ranks on 1 node' "$TMP/lv1.out"
timeout 60 $M -n 4 "$CNNSCALE" allreduce --level cross -b 1K -e 64K -f 8 -w 0 -n 1 --json "$TMP/lv-cross.json" >"$TMP/lv2.out" 2>&1
expect_eq "--level cross exit status" 0 "$?"
python3 - "$TMP/lv-node.json" "$TMP/lv-cross.json" >"$TMP/lv.txt" 2>&1 <<'PY'
import json, sys
for f in sys.argv[1:]:
    j = json.load(open(f))
    print(j["level"], j["world_size"], j["nodes"], j["ranks_per_node"], j["wrong_total"])
PY
expect_grep "--level node JSON: 4 ranks in the sum" '^node 4 1 4 0$' "$TMP/lv.txt"
expect_grep "--level cross JSON: 1 rank per sum on one node" '^cross 1 1 4 0$' "$TMP/lv.txt"
"$CNNSCALE" allreduce --level diagonal >"$TMP/bad4.out" 2>"$TMP/bad4.err"
expect_eq "bad --level exit status" 2 "$?"
expect_grep "bad --level message" 'cnnscale: error: --level diagonal is not known' "$TMP/bad4.err"

"$CNNSCALE" allreduce -d int8 >"$TMP/bad.out" 2>"$TMP/bad.err"
expect_eq "bad datatype exit status" 2 "$?"
expect_grep "bad datatype message" 'cnnscale: error: --datatype int8 is not supported' "$TMP/bad.err"
"$CNNSCALE" allreduce --bogus >"$TMP/bad2.out" 2>"$TMP/bad2.err"
expect_eq "unknown option exit status" 2 "$?"
expect_grep "unknown option message" "cnnscale: error: allreduce: unrecognised option '--bogus'" "$TMP/bad2.err"
"$CNNSCALE" allreduce --backend nccl -e 8 >"$TMP/bad3.out" 2>"$TMP/bad3.err"
expect_eq "nccl without GPU exit status" 2 "$?"
expect_grep "nccl without GPU message" 'cnnscale: error: --backend nccl' "$TMP/bad3.err"
finish
