#!/usr/bin/env bash
# timeline.sh — --timeline FILE.json (issue 19) under mpiexec:
# 1. 2 ranks, a small CIFAR-format data set (2 epochs, evaluation and checkpoints):
#    valid trace JSON (python3 json), one process per rank named "rank N (host)", every
#    track (step, data wait, forward, backward per layer, gradient wait, optimizer,
#    evaluation, checkpoint, one per gradient bucket) with events on every rank, every
#    event's ts and dur >= 0, bucket spans overlapping backward (node shared memory sums,
#    the default); run.json records the file and `cnnscale report` names it.
# 2. 3 ranks summing over MPI (CNNSCALE_SHM_ALLREDUCE=0): every rank, overlap again, and
#    the default window (the 50 steps after the warm-up steps the summary leaves out).
# 3. --timeline-steps 5:9 records exactly steps 5..9; mistakes are `cnnscale: error:`.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
FM=/usr/share/datasets/fashion-mnist
if [ ! -d "$FM" ]; then
  echo "SKIP: $FM (Fashion-MNIST IDX files) not present"
  exit 77
fi
MODEL="conv(8,3) relu conv(8,3) relu maxpool(2) flatten linear(32) relu linear(10)"

# check.py FILE RANKS [--overlap] [--steps A:B] [--tracks a,b,...]: prints "ok: ..." or
# "FAIL: ..." lines.
cat >"$TMP/check.py" <<'PY'
import json, sys
path, ranks = sys.argv[1], int(sys.argv[2])
args = sys.argv[3:]
def option_value(name):
    return args[args.index(name) + 1] if name in args else None
def say(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
try:
    doc = json.load(open(path))
except Exception as e:
    say(False, "valid JSON (%s)" % e); sys.exit(0)
say(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list) and doc.get("displayTimeUnit") == "ms",
    "JSON object format with traceEvents and displayTimeUnit ms")
ev = doc["traceEvents"]
X = [e for e in ev if e.get("ph") == "X"]
meta = [e for e in ev if e.get("ph") == "M"]
pnames = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
say(sorted(pnames) == list(range(ranks)) and all(pnames[r].startswith("rank %d (" % r) for r in pnames),
    "one process per rank named 'rank N (host)': %s" % sorted(pnames.values()))
say(sorted({e["pid"] for e in X}) == list(range(ranks)), "events from every rank")
say(all(isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)) and e["ts"] >= 0
        and e["dur"] >= 0 for e in X), "every event has ts >= 0 and dur >= 0 (%d events)" % len(X))
tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
by_track = {}
for e in X:
    by_track.setdefault((e["pid"], tname.get((e["pid"], e["tid"]), "?")), []).append(e)
want = (option_value("--tracks") or "step,data wait,forward,backward,gradient wait (exposed),optimizer").split(",")
for r in range(ranks):
    names = {n for (p, n) in by_track if p == r}
    missing = [w for w in want if w not in names]
    say(not missing, "rank %d has events on tracks %s (missing: %s)" % (r, ",".join(want), missing))
    say(any(n.startswith("allreduce bucket 0 (") for n in names) or ranks == 1,
        "rank %d has an allreduce bucket track with events" % r)
    layers = {e["name"] for e in by_track.get((r, "backward"), [])}
    # The spec model's layers with parameters are named as torch.nn.Sequential's: 0, 2, 6, 8.
    say({"0", "2", "6", "8"} <= layers, "rank %d backward spans are per layer: %s" % (r, sorted(layers)))
steps = option_value("--steps")
if steps:
    a, b = map(int, steps.split(":"))
    got = sorted({e["args"]["step"] for e in X})
    say(got == list(range(a, b + 1)), "recorded steps are exactly %d..%d (got %s..%s, %d)" %
        (a, b, got[0] if got else None, got[-1] if got else None, len(got)))
    step_spans = sorted(e["args"]["step"] for e in by_track.get((0, "step"), []))
    say(step_spans == list(range(a, b + 1)), "one step span per recorded step on rank 0")
if "--overlap" in args:
    hits = 0
    for r in range(ranks):
        per_step = {}
        for (p, n), es in by_track.items():
            if p != r: continue
            for e in es:
                per_step.setdefault(e["args"]["step"], {}).setdefault(
                    "backward" if n == "backward" else ("bucket" if n.startswith("allreduce bucket") else "other"),
                    []).append(e)
        for s, parts in per_step.items():
            if "backward" in parts and "bucket" in parts:
                last_bwd_end = max(e["ts"] + e["dur"] for e in parts["backward"])
                if min(e["ts"] for e in parts["bucket"]) < last_bwd_end:
                    hits += 1
    say(hits > 0, "some allreduce span starts before the step's last backward span ends (%d rank-steps)" % hits)
PY
check() {  # check LABEL FILE RANKS ARGS...
  local label=$1
  shift
  python3 "$TMP/check.py" "$@" >"$TMP/check.out" 2>&1
  while IFS= read -r line; do
    case "$line" in
      ok:*) ok "$label: ${line#ok: }" ;;
      *) bad "$label: ${line#FAIL: }" ;;
    esac
  done <"$TMP/check.out"
}

# ---- 1. 2 ranks, evaluation and checkpoints ----
python3 "$CNNSCALE_SOURCE/tests/data/make_cifar.py" "$FM" "$TMP/dl/cifar-10-batches-bin" 100 200 >"$TMP/mk.out" 2>&1 &&
  "$CNNSCALE" prep --format cifar10 --input "$TMP/dl" --output "$TMP/ds" --shards 2 --test-shards 1 >"$TMP/prep.out" 2>&1
expect_eq "small CIFAR-format data set" 0 "$?"
timeout 300 $M -n 2 "$CNNSCALE" train --data "$TMP/ds" --model "$MODEL" --batch-size 16 --epochs 2 --bucket-mb 0.01 \
  --first-bucket-mb 0.001 --log-every 5 --run-dir "$TMP/run2" --timeline "$TMP/t2.json" --timeline-steps 1:1000 \
  >"$TMP/r2.out" 2>&1
expect_eq "2 ranks: exit status" 0 "$?"
expect_grep "2 ranks: the file is announced" "--timeline: wrote $TMP/t2.json \([0-9]+ events of 2 rank\(s\), steps 1:30\)" "$TMP/r2.out"
check "2 ranks" "$TMP/t2.json" 2 --overlap --steps 1:30 \
  --tracks "step,data wait,forward,backward,gradient wait (exposed),optimizer,evaluation,checkpoint"
expect_eq "no temporary file left" "" "$(ls "$TMP" | grep '\.tmp\.')"
expect_eq "run.json records the timeline" "$TMP/t2.json" \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("timeline"))' "$TMP/run2/run.json")"
"$CNNSCALE" report "$TMP/run2" --output "$TMP/rep" --bootstrap 0 >"$TMP/rep.out" 2>&1
expect_eq "report: exit status" 0 "$?"
expect_grep "report.md names the timeline" "t2\.json" "$TMP/rep/report.md"
expect_grep "report.html links the timeline" "href=\"file://$TMP/t2\.json\"" "$TMP/rep/report.html"

# ---- 2. 3 ranks over MPI, the default window ----
CNNSCALE_SHM_ALLREDUCE=0 timeout 300 $M -n 3 -x CNNSCALE_SHM_ALLREDUCE "$CNNSCALE" train --synthetic \
  --synthetic-samples 3840 --model "$MODEL" --batch-size 8 --max-steps 80 --bucket-mb 0.01 --first-bucket-mb 0.001 \
  --log-every 20 --timeline "$TMP/t3.json" >"$TMP/r3.out" 2>&1
expect_eq "3 ranks: exit status" 0 "$?"
expect_grep "3 ranks: gradients summed by MPI" "summed by MPI" "$TMP/r3.out"
expect_grep "3 ranks: the default window is the 50 steps after warm-up" "recording steps 9:58 into" "$TMP/r3.out"
check "3 ranks" "$TMP/t3.json" 3 --overlap --steps 9:58

# ---- 3. --timeline-steps bounds the steps; mistakes ----
timeout 300 $M -n 2 "$CNNSCALE" train --synthetic --model "$MODEL" --batch-size 8 --max-steps 20 --log-every 20 \
  --timeline "$TMP/t5.json" --timeline-steps 5:9 >"$TMP/r5.out" 2>&1
expect_eq "--timeline-steps 5:9: exit status" 0 "$?"
check "--timeline-steps 5:9" "$TMP/t5.json" 2 --steps 5:9
timeout 300 $M -n 2 "$CNNSCALE" train --synthetic --model "$MODEL" --batch-size 8 --max-steps 4 --log-every 20 \
  --timeline "$TMP/t6.json" --timeline-steps 10:20 >"$TMP/r6.out" 2>&1
expect_eq "a window outside the run: exit status" 0 "$?"
expect_grep "a window outside the run: warned" "cnnscale: warning: --timeline: steps 10:20 are not in this run \(steps 1:4\)" "$TMP/r6.out"
expect_eq "a window outside the run: no file" "" "$(ls "$TMP"/t6.json 2>/dev/null)"
"$CNNSCALE" train --synthetic --max-steps 2 --timeline "$TMP/t7.json" --timeline-steps 9:5 >"$TMP/e1" 2>&1
expect_eq "--timeline-steps 9:5: exit 2" 2 "$?"
expect_grep "--timeline-steps 9:5: explained" "^cnnscale: error: --timeline-steps 9:5 is not a step range; give A:B" "$TMP/e1"
"$CNNSCALE" train --synthetic --max-steps 2 --timeline-steps 1:5 >"$TMP/e2" 2>&1
expect_eq "--timeline-steps without --timeline: exit 2" 2 "$?"
expect_grep "--timeline-steps without --timeline: explained" "^cnnscale: error: --timeline-steps needs --timeline FILE.json" "$TMP/e2"
finish
