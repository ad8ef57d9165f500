#!/usr/bin/env bash
# run_dir.sh — a run directory never loses or mixes results (issue 12), on 2 ranks:
# 1. --resume none over an older run is refused; --force-new moves the old run aside
#    (kept byte for byte); `latest` names an existing file; --resume auto then continues
#    the NEW run; a resume with another seed or data set is refused, naming the key.
# 2. Re-running a finished run (and a finished local sweep) trains nothing and leaves
#    run.json as it was; `cnnscale report` reads it; more steps continue the run.
# 3. A second training on a run directory in use fails at once (exit 2) naming the
#    holder; the first one's files are its own.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
ARGS=(--synthetic --model "conv(8,3) relu maxpool(2) flatten linear(10)" --batch-size 16 --no-eval)
SEED=11
train() { timeout 300 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --seed "$SEED" "$@"; }
md5() { md5sum "$1" 2>/dev/null | cut -d' ' -f1; }
latest_exists() { local d=$1/checkpoints; [ -s "$d/latest" ] && [ -f "$d/$(cat "$d/latest")" ]; }

# ---- 1. --resume none over an older run ----
D="$TMP/r1"
train --max-steps 6 --checkpoint-every 2 --run-dir "$D" >"$TMP/r1a.out" 2>&1
expect_eq "first run exit status" 0 "$?"
old_ckpt=$(md5 "$D/checkpoints/step-00000006.h5")
train --max-steps 1 --checkpoint-every 1 --resume none --run-dir "$D" >"$TMP/r1b.out" 2>&1
expect_eq "--resume none over an older run: exit 2" 2 "$?"
expect_grep "--resume none over an older run: both ways out named" \
  "cnnscale: error: --resume none in run directory '$D', which already holds a run .*choose a new --run-dir.*pass --resume none --force-new" "$TMP/r1b.out"
expect_eq "the older run's newest checkpoint is untouched" "$old_ckpt" "$(md5 "$D/checkpoints/step-00000006.h5")"
latest_exists "$D"
expect_eq "latest names an existing checkpoint" 0 "$?"

train --max-steps 2 --checkpoint-every 1 --resume none --force-new --run-dir "$D" >"$TMP/r1c.out" 2>&1
expect_eq "--resume none --force-new: exit status" 0 "$?"
prev=$(ls -d "$D"/previous-* 2>/dev/null | head -1)
expect_grep "--force-new says where the old run went" "moved to $D/previous-" "$TMP/r1c.out"
expect_eq "the old run's checkpoint moved aside intact" "$old_ckpt" "$(md5 "${prev:-/none}/checkpoints/step-00000006.h5")"
expect_file "the old run's run.json moved aside" "${prev:-/none}/run.json"
expect_eq "latest names the new run's last checkpoint" "step-00000002.h5" "$(cat "$D/checkpoints/latest" 2>/dev/null)"
latest_exists "$D"
expect_eq "latest names an existing checkpoint after the new run" 0 "$?"
expect_eq "no checkpoint of the old run left in the run directory" "" "$(ls "$D"/checkpoints/step-0000000[46].h5 2>/dev/null)"

train --max-steps 4 --resume auto --run-dir "$D" >"$TMP/r1d.out" 2>&1
expect_eq "--resume auto after --force-new: exit status" 0 "$?"
expect_grep "--resume auto continues the NEW run" "resumed from $D/checkpoints/step-00000002.h5 at step 2" "$TMP/r1d.out"

# Another configuration (issue 10): refused with the differing key named, nothing written.
before=$(md5 "$D/run.json")
SEED=12
train --max-steps 8 --resume auto --run-dir "$D" >"$TMP/r1e.out" 2>&1
expect_eq "resume with another seed: exit 2" 2 "$?"
expect_grep "resume with another seed: the key named, and how to start afresh" \
  "cnnscale: error: run directory '$D' holds a run of another configuration .*seed was '11', configured seed is '12'.*--force-new" "$TMP/r1e.out"
SEED=11
train --max-steps 8 --synthetic-samples 6000 --resume auto --run-dir "$D" >"$TMP/r1f.out" 2>&1
expect_eq "resume onto other data: exit 2" 2 "$?"
expect_grep "resume onto other data: named" "cnnscale: error: .*data was 'synthetic 1x28x28, 10 classes, 60000 samples', configured data is 'synthetic 1x28x28, 10 classes, 6000 samples'" "$TMP/r1f.out"
expect_eq "refused runs leave run.json alone" "$before" "$(md5 "$D/run.json")"
# An explicit checkpoint of another configuration is a deliberate choice: a warning.
SEED=12
train --max-steps 5 --resume "$D/checkpoints/step-00000004.h5" --run-dir "$TMP/r1g" >"$TMP/r1g.out" 2>&1
expect_eq "--resume PATH of another seed: exit status" 0 "$?"
expect_grep "--resume PATH of another seed: warned" "cnnscale: warning: --resume .*step-00000004.h5 was written by another configuration: seed was '11', configured seed is '12'" "$TMP/r1g.out"
SEED=11

# A prep data set is known by its content: another copy (other path, other shard count)
# continues the run; synthetic data does not.
FM=/usr/share/datasets/fashion-mnist
if [ -d "$FM" ]; then
  "$CNNSCALE" prep --format idx --input "$FM" --output "$TMP/fm-a" --shards 2 >"$TMP/prep.out" 2>&1 &&
    "$CNNSCALE" prep --format idx --input "$FM" --output "$TMP/fm-b" --shards 3 >>"$TMP/prep.out" 2>&1
  expect_eq "prep twice: exit status" 0 "$?"
  DATA_ARGS=(--model "conv(8,3) relu maxpool(2) flatten linear(10)" --batch-size 16 --no-eval --seed 11)
  timeout 300 $M -n 2 "$CNNSCALE" train "${DATA_ARGS[@]}" --data "$TMP/fm-a" --max-steps 2 --run-dir "$TMP/p" >"$TMP/p1.out" 2>&1
  expect_eq "train on a prep data set: exit status" 0 "$?"
  timeout 300 $M -n 2 "$CNNSCALE" train "${DATA_ARGS[@]}" --data "$TMP/fm-b" --max-steps 3 --run-dir "$TMP/p" >"$TMP/p2.out" 2>&1
  expect_eq "resume on another copy of the same data: exit status" 0 "$?"
  expect_grep "resume on another copy of the same data: resumed" "resumed from $TMP/p/checkpoints/step-00000002.h5" "$TMP/p2.out"
  train --max-steps 4 --run-dir "$TMP/p" >"$TMP/p3.out" 2>&1
  expect_eq "resume a prep-data run on synthetic data: exit 2" 2 "$?"
  expect_grep "resume a prep-data run on synthetic data: named" \
    "data was 'prep 1x28x28, 10 classes, 60000 train \+ 10000 test samples, content [0-9a-f]{16}', configured data is 'synthetic" "$TMP/p3.out"
fi

# ---- 2. a finished run ----
F="$TMP/fin"
train --max-steps 4 --run-dir "$F" >"$TMP/fin1.out" 2>&1
expect_eq "finished run: exit status" 0 "$?"
sum=$(md5 "$F/run.json")
lines=$(wc -l <"$F/metrics.jsonl")
train --max-steps 4 --run-dir "$F" >"$TMP/fin2.out" 2>&1
expect_eq "re-running a finished run: exit 0" 0 "$?"
expect_grep "re-running a finished run: says so" "nothing to train: the run in $F is already at step 4" "$TMP/fin2.out"
expect_eq "re-running a finished run: run.json untouched" "$sum" "$(md5 "$F/run.json")"
expect_eq "re-running a finished run: metrics.jsonl untouched" "$lines" "$(wc -l <"$F/metrics.jsonl")"
"$CNNSCALE" report "$F" --output "$TMP/fin-report" >"$TMP/fin-report.out" 2>&1
expect_eq "cnnscale report reads the re-run directory" 0 "$?"
train --max-steps 7 --log-every 1 --run-dir "$F" >"$TMP/fin3.out" 2>&1
expect_eq "more steps continue the finished run: exit status" 0 "$?"
expect_grep "more steps: resumed at step 4" "resumed from $F/checkpoints/step-00000004.h5 at step 4" "$TMP/fin3.out"
python3 - "$F" >"$TMP/fin3.txt" 2>&1 <<'PY'
import json, sys
d = sys.argv[1]
j = json.load(open(d + "/run.json"))
lines = [json.loads(l) for l in open(d + "/metrics.jsonl")]
starts = [l["from_step"] for l in lines if l.get("event") == "start"]
segs = [(s["first_step"], s["last_step"]) for s in j["segments"]]
print("steps", j["steps"], "first_step", j["first_step"], "segments", segs, "starts", starts,
      "ips_positive", j["images_per_s"] > 0, "config_seed", j["config"]["seed"])
PY
expect_grep "run.json covers the whole run, metrics.jsonl marks each segment" \
  '^steps 7 first_step 4 segments \[\(0, 4\), \(4, 7\)\] starts \[0, 4\] ips_positive True config_seed 11$' "$TMP/fin3.txt"

# A finished local sweep, run again: nothing retrained, nothing rewritten, the report still made.
# shellcheck disable=SC2054  # "1,2" is one argument
SW=(bash "$CNNSCALE_SOURCE/scripts/scaling-sweep.sh" --local --ranks 1,2 --global-batch 32 --cnnscale "$CNNSCALE"
    --out "$TMP/sweep" -- --synthetic --model "conv(8,3) relu maxpool(2) flatten linear(10)" --max-steps 4 --no-eval)
MPIEXEC=$MPIEXEC timeout 600 "${SW[@]}" >"$TMP/sw1.out" 2>&1
expect_eq "sweep: exit status" 0 "$?"
s1=$(md5 "$TMP/sweep/ranks-1/run.json") s2=$(md5 "$TMP/sweep/ranks-2/run.json")
MPIEXEC=$MPIEXEC timeout 600 "${SW[@]}" >"$TMP/sw2.out" 2>&1
expect_eq "the same sweep again: exit status" 0 "$?"
expect_eq "the same sweep again: 1-rank run.json untouched" "$s1" "$(md5 "$TMP/sweep/ranks-1/run.json")"
expect_eq "the same sweep again: 2-rank run.json untouched" "$s2" "$(md5 "$TMP/sweep/ranks-2/run.json")"
expect_file "the same sweep again: report" "$TMP/sweep/report/report.md"

# ---- 3. two trainings at once ----
B="$TMP/busy"
( train --max-steps 100000 --log-every 1 --checkpoint-every 50 --run-dir "$B" >"$TMP/busy1.out" 2>&1; echo $? >"$TMP/busy1.rc" ) &
for _ in $(seq 1 600); do grep -q 'step 3/' "$TMP/busy1.out" 2>/dev/null && break; sleep 0.1; done
train --max-steps 3 --run-dir "$B" >"$TMP/busy2.out" 2>&1
expect_eq "second training on a busy run directory: exit 2" 2 "$?"
expect_grep "second training: the holder named" \
  "cnnscale: error: run directory '$B' is in use by another training: pid [0-9]+ on $(hostname)" "$TMP/busy2.out"
expect_eq "second training: said once (rank 0), every rank left" 1 "$(grep -c 'cnnscale: error:' "$TMP/busy2.out")"
holder=$(pgrep -f "cnnscale train .*--run-dir $B\$" | tail -1)  # a rank (mpirun comes first)
[ -n "$holder" ] && kill -USR1 "$holder"
wait
expect_eq "the first training checkpointed on its signal" 75 "$(cat "$TMP/busy1.rc")"
expect_eq "metrics.jsonl holds the first training only" 1 "$(grep -c '"event":"start"' "$B/metrics.jsonl")"
train --max-steps 2 --resume auto --run-dir "$B" >"$TMP/busy3.out" 2>&1
expect_eq "the lock went with its holder: the next training starts" 0 "$?"
finish
