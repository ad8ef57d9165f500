#!/usr/bin/env bash
# tensorboard.sh — TensorBoard event files from `cnnscale train` on 2 ranks (issue 19),
# on a small CIFAR-10 set (tests/data/make_cifar.py: 500 train, 200 test; 15 steps per
# epoch), so that evaluation lines exist too:
#  1. run 1 (20 steps, --log-every 4) is "killed" after step 20 with its newest usable
#     checkpoint at step 15 (the later ones deleted); run 2 resumes there (--resume
#     auto) and trains to step 45. RUN_DIR/tb then holds one file per run; every record
#     of both passes an independent CRC-32C check (python, below) and starts with
#     file_version "brain.Event:2" then SessionLog START (run 2's at step 16).
#  2. With PyPI tensorboard importable (CNNSCALE_TENSORBOARD_PYTHON, the venv of
#     scripts/python-venv.sh, python3 or
#     /usr/bin/python3; else that part prints SKIP and the test exits 77 after part 1
#     and 3): TensorBoard's own EventAccumulator (which checks the CRCs and applies the
#     START purge) shows exactly the expected tags; each tag's steps are strictly
#     increasing (no step twice although run 1 logged steps 16 and 20 before its
#     checkpoint was lost) and equal, value for value, metrics.jsonl with each
#     segment's lines replacing the earlier segment's from its from_step on; the
#     options text summary appears once per segment; a copy with one byte flipped in
#     the last record loses that record in the reader and fails our CRC check.
#  3. --tensorboard DIR writes there (none in the run directory), --no-tensorboard
#     writes none, both together are refused before MPI starts; --force-new moves tb/
#     aside with the rest of the old run.
# check-deps: optional python tensorboard (part 2 SKIPs without it)
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
ARGS=(--model "conv(8,3,1,1) relu maxpool(2) flatten linear(10)" --batch-size 16 --lr 0.05 --seed 3
  --log-every 4 --checkpoint-every 6)
count() { local n=0 f; for f in "$@"; do [ -e "$f" ] && n=$((n + 1)); done; echo "$n"; }  # files a glob matched

python3 "$CNNSCALE_SOURCE/tests/data/make_cifar.py" /usr/share/datasets/fashion-mnist \
  "$TMP/dl/cifar-10-batches-bin" 100 200
expect_eq "make_cifar.py exit status" 0 "$?"
"$CNNSCALE" prep --format cifar10 --input "$TMP/dl" --output "$TMP/ds" --shards 2 --test-shards 1 >"$TMP/prep.out" 2>&1
expect_eq "prep exit status" 0 "$?"

# ---- 1. a run whose checkpoint lags its TensorBoard file, resumed ----
D="$TMP/run"
timeout 300 $M -n 2 "$CNNSCALE" train --data "$TMP/ds" "${ARGS[@]}" --epochs 3 --max-steps 20 --run-dir "$D" \
  >"$TMP/r1.out" 2>&1
expect_eq "run 1 exit status" 0 "$?"
expect_grep "run 1 names its event file" "TensorBoard events: $D/tb/events\.out\.tfevents\.[0-9]+\." "$TMP/r1.out"
rm -f "$D/checkpoints/step-00000018.h5" "$D/checkpoints/step-00000020.h5"
timeout 300 $M -n 2 "$CNNSCALE" train --data "$TMP/ds" "${ARGS[@]}" --epochs 3 --resume auto --run-dir "$D" \
  >"$TMP/r2.out" 2>&1
expect_eq "run 2 (resumed) exit status" 0 "$?"
expect_grep "run 2 resumed at step 15" "resumed from .*step-00000015.h5 at step 15" "$TMP/r2.out"
expect_eq "one event file per run" 2 "$(count "$D"/tb/events.out.tfevents.*)"
expect_grep "run.json names the event file" '"tensorboard": ".*/tb/events\.out\.tfevents\.' "$D/run.json"

# Independent of cnnscale and TensorBoard: the framing and both CRCs of every record
# (CRC-32C = reflected 0x82F63B78, init/xorout 0xFFFFFFFF; masked as TFRecord does).
cat >"$TMP/crc_check.py" <<'PY'
import os, struct, sys

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

assert crc32c(b"123456789") == 0xE3069283
for path in sorted(os.path.join(sys.argv[1], f) for f in os.listdir(sys.argv[1])):
    raw, at, recs = open(path, "rb").read(), 0, []
    while at < len(raw):
        (n,) = struct.unpack_from("<Q", raw, at)
        (lc,) = struct.unpack_from("<I", raw, at + 8)
        data = raw[at + 12:at + 12 + n]
        (dc,) = struct.unpack_from("<I", raw, at + 12 + n) if at + 16 + n <= len(raw) else (None,)
        if lc != masked(raw[at:at + 8]) or dc != masked(data):
            print("BAD CRC", os.path.basename(path), "record", len(recs) + 1)
            break
        recs.append(data)
        at += 16 + n
    # Event: wall_time (field 1, 0x09 + 8 bytes), then file_version "brain.Event:2" (field 3);
    # then SessionLog START: step (field 2, varint), session_log (field 7) {status: 1}.
    first = recs[0][9:] == b"\x1a\x0dbrain.Event:2"
    start = recs[1][9:] if len(recs) > 1 and recs[1].endswith(b"\x3a\x02\x08\x01") else b""
    step = start[1] if start[:1] == b"\x10" and len(start) == 6 else -1
    print("file", len(recs), "records", "file_version" if first else "NO-FILE-VERSION", "start_step", step)
PY
python3 "$TMP/crc_check.py" "$D/tb" >"$TMP/crc.txt" 2>&1
expect_eq "independent CRC check: both files, every record" "2" "$(grep -c '^file [0-9]* records file_version' "$TMP/crc.txt")"
expect_eq "run 1's file starts at step 1, run 2's at 16" "1 16" "$(awk '/^file/ {print $NF}' "$TMP/crc.txt" | xargs)"
expect_eq "no bad CRC" "" "$(grep BAD "$TMP/crc.txt")"
cp -r "$D/tb" "$TMP/tb-damaged"
damaged=("$TMP/tb-damaged"/events.out.tfevents.*)  # in name order: run 2's last
last=${damaged[${#damaged[@]}-1]}
python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-6] ^= 0x55; open(p, 'wb').write(b)" "$last"
python3 "$TMP/crc_check.py" "$TMP/tb-damaged" >"$TMP/crc-damaged.txt" 2>&1
expect_grep "the CRC check catches a flipped byte" "^BAD CRC events\.out\.tfevents\..* record [0-9]+$" "$TMP/crc-damaged.txt"

# ---- 3. where the files go ----
S=(--synthetic --model "conv(4,3) relu maxpool(2) flatten linear(10)" --batch-size 8 --max-steps 2 --no-eval)
timeout 300 $M -n 2 "$CNNSCALE" train "${S[@]}" --run-dir "$TMP/a" --tensorboard "$TMP/elsewhere/a" >"$TMP/a.out" 2>&1
expect_eq "--tensorboard DIR: exit status" 0 "$?"
expect_eq "--tensorboard DIR: the file is there" 1 "$(count "$TMP"/elsewhere/a/events.out.tfevents.*)"
expect_eq "--tensorboard DIR: no tb/ in the run directory" "" "$(ls -d "$TMP/a/tb" 2>/dev/null)"
timeout 300 $M -n 2 "$CNNSCALE" train "${S[@]}" --run-dir "$TMP/b" --no-tensorboard >"$TMP/b.out" 2>&1
expect_eq "--no-tensorboard: exit status" 0 "$?"
expect_eq "--no-tensorboard: no tb/" "" "$(ls -d "$TMP/b/tb" 2>/dev/null)"
"$CNNSCALE" train "${S[@]}" --tensorboard "$TMP/c" --no-tensorboard >"$TMP/c.out" 2>&1
expect_eq "--tensorboard with --no-tensorboard: exit 2" 2 "$?"
expect_grep "--tensorboard with --no-tensorboard: named" \
  "^cnnscale: error: --tensorboard $TMP/c and --no-tensorboard exclude each other" "$TMP/c.out"
timeout 300 $M -n 2 "$CNNSCALE" train "${S[@]}" --run-dir "$TMP/f" >"$TMP/f1.out" 2>&1 &&
  timeout 300 $M -n 2 "$CNNSCALE" train "${S[@]}" --run-dir "$TMP/f" --resume none --force-new >"$TMP/f2.out" 2>&1
expect_eq "--force-new: exit status" 0 "$?"
expect_eq "--force-new: the old run's event file moved aside with it" 1 "$(count "$TMP"/f/previous-*/tb/events.out.tfevents.*)"
expect_eq "--force-new: the new run's tb/ holds its own file only" 1 "$(count "$TMP"/f/tb/events.out.tfevents.*)"

# ---- 2. TensorBoard's own reader ----
PY=""
for p in ${CNNSCALE_TENSORBOARD_PYTHON:-} /var/cache/cnnscale/pypi-venv/bin/python python3 /usr/bin/python3; do
  if "$p" -c 'from tensorboard.backend.event_processing.event_accumulator import EventAccumulator' 2>/dev/null; then
    PY=$p
    break
  fi
done
if [ -z "$PY" ]; then
  echo "SKIP: TensorBoard's reader part: no python imports tensorboard (pip install tensorboard, then set" \
    "CNNSCALE_TENSORBOARD_PYTHON to that python)"
  (finish)  # the summary; exit 77 only when everything else passed
  st=$?
  [ "$st" -eq 0 ] && exit 77
  exit "$st"
fi
"$PY" - "$D" "$TMP/tb-damaged" >"$TMP/tb.txt" 2>"$TMP/tb.err" <<'PY'
import json, sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

run_dir, damaged = sys.argv[1], sys.argv[2]
TAGS = {"train/loss": "loss", "train/lr": "lr", "train/images_per_s": "images_per_s",
        "step_time/total_ms": "step_ms", "step_time/data_ms": "data_ms", "step_time/compute_ms": "compute_ms",
        "step_time/comm_exposed_ms": "comm_exposed_ms", "step_time/optimizer_ms": "optimizer_ms",
        "eval/accuracy": "test_accuracy", "eval/loss": "test_loss"}
# metrics.jsonl as TensorBoard should show it: a segment's start record drops what the
# earlier segment logged after the step it resumed from.
want = {t: {} for t in TAGS}
for line in open(run_dir + "/metrics.jsonl"):
    r = json.loads(line)
    if r.get("event") == "start":
        for t in want:
            want[t] = {s: v for s, v in want[t].items() if s <= r["from_step"]}
        continue
    for t, k in TAGS.items():
        if k in r:
            want[t][r["step"]] = r[k]

ea = EventAccumulator(run_dir + "/tb", size_guidance={"scalars": 0, "tensors": 0})
ea.Reload()
print("tags", "same" if sorted(ea.Tags()["scalars"]) == sorted(TAGS) else sorted(ea.Tags()["scalars"]))
bad = []
for t in TAGS:
    ev = ea.Scalars(t)
    steps = [e.step for e in ev]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        bad.append(f"{t}: steps not strictly increasing {steps}")
    if steps != sorted(want[t]):
        bad.append(f"{t}: steps {steps} != metrics.jsonl {sorted(want[t])}")
    for e in ev:
        w = want[t].get(e.step)
        if w is None or abs(e.value - w) > 1e-6 * abs(w) + 1e-9:
            bad.append(f"{t} step {e.step}: {e.value} != metrics.jsonl {w}")
print("mismatches", len(bad))
for b in bad[:20]:
    print(" ", b)
print("train steps", " ".join(str(e.step) for e in ea.Scalars("train/loss")))
print("eval steps", " ".join(str(e.step) for e in ea.Scalars("eval/accuracy")))
texts = ea.Tensors("options")
print("options", ea.SummaryMetadata("options").plugin_data.plugin_name, [e.step for e in texts],
      all(b"| `seed` | `3` |" in e.tensor_proto.string_val[0] for e in texts),
      b"step-00000015.h5" in texts[-1].tensor_proto.string_val[0])
d = EventAccumulator(damaged, size_guidance={"scalars": 0})
d.Reload()
print("damaged: last eval step", d.Scalars("eval/accuracy")[-1].step)
PY
expect_eq "TensorBoard reader ran" 0 "$?"
expect_grep "TensorBoard shows exactly the expected scalar tags" "^tags same$" "$TMP/tb.txt"
expect_grep "every tag's steps and values equal metrics.jsonl, no step twice" "^mismatches 0$" "$TMP/tb.txt"
expect_grep "train steps: run 1's to 15, run 2's from 16 (its START purged run 1's 16 and 20)" \
  "^train steps 4 8 12 15 16 20 24 28 30 32 36 40 44 45$" "$TMP/tb.txt"
expect_grep "eval at each epoch end; run 1's eval at its step 20 purged" "^eval steps 15 30 45$" "$TMP/tb.txt"
expect_grep "options as a text summary, once per segment, the second naming its checkpoint" \
  "^options text \[1, 16\] True True$" "$TMP/tb.txt"
expect_grep "TensorBoard's reader drops the record with a flipped byte" "^damaged: last eval step 30$" "$TMP/tb.txt"
finish
