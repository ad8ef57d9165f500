#!/usr/bin/env bash
# watch_killed.sh — a killed job leaves `cnnscale watch` a record it uses (issue 28 item 3):
# a run whose rank 0 is SIGKILLed writes no run.json, and watch used to wait for it until
# Ctrl-C. Its run.lock (an flock the kernel releases when the holder dies) now says so:
#  1. `kill -9` of rank 0 (its pid from run.lock) under `mpiexec -n 2`: a watch running
#     beside it ends within 15 s with status 1 and "ended without finishing: no process
#     holds RUN/run.lock (its last holder: pid P on HOST) … after step N";
#  2. `kill -9` of rank 1: the same;
#  3. `watch --once` on a run directory whose run ended that way says it at once (status 1),
#     and on a finished run says "finished" (status 0);
#  4. a watch probing the lock never keeps a run from starting: 20 runs started while a
#     watch polls every 0.1 s all start (train retries its lock for a second).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
TRAIN=(train --synthetic --model mnist_cnn --batch-size 16 --log-every 5 --max-steps 100000)

killed_case() {  # NAME RANK-TO-KILL
  local name=$1 victim=$2 dir="$TMP/$1" t0 st pid
  timeout 300 $M -n 2 "$CNNSCALE" "${TRAIN[@]}" --run-dir "$dir" >"$TMP/$name.train.out" 2>&1 &
  local job=$!
  for _ in $(seq 1 300); do grep -q '"step"' "$dir/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
  "$CNNSCALE" watch "$dir" --interval 0.5 >"$TMP/$name.watch.out" 2>&1 &
  local w=$!
  sleep 1
  local rank0
  rank0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$dir/run.lock")
  pid=$rank0
  if [ "$victim" != 0 ]; then  # the other training process of this run (not mpiexec, not the watch)
    for p in $(pgrep -x cnnscale); do
      [ "$p" != "$rank0" ] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -q "cnnscale train .*--run-dir $dir" && pid=$p
    done
  fi
  expect_ne "$name: the process to kill was found" "" "$pid"
  kill -9 "$pid"
  t0=$(date +%s)
  wait "$job"
  for _ in $(seq 1 150); do kill -0 "$w" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$w" 2>/dev/null; then
    bad "$name: watch still waits 15 s after the kill"
    kill "$w"
  fi
  wait "$w"
  st=$?
  expect_eq "$name: watch exit status 1" 1 "$st"
  expect_grep "$name: watch says the run ended without finishing" \
    "^ended without finishing: no process holds $dir/run.lock \(its last holder: pid [0-9]+ on .*\) and run.json records no end.* after step [0-9]+" \
    "$TMP/$name.watch.out"
  expect_eq "$name: no run.json" "" "$(ls "$dir"/run.json 2>/dev/null)"
}
killed_case kill_rank0 0
killed_case kill_rank1 1

# 3. --once afterwards, and on a finished run.
"$CNNSCALE" watch "$TMP/kill_rank0" --once >"$TMP/once.out" 2>&1
expect_eq "--once on a killed run: status 1" 1 "$?"
expect_grep "--once on a killed run: says so" "^ended without finishing: " "$TMP/once.out"
timeout 300 "$CNNSCALE" train --synthetic --model mnist_cnn --batch-size 16 --max-steps 10 --run-dir "$TMP/done" \
  >"$TMP/done.out" 2>&1
"$CNNSCALE" watch "$TMP/done" --once >"$TMP/once2.out" 2>&1
expect_eq "--once on a finished run: status 0" 0 "$?"
expect_grep "--once on a finished run: finished" "^finished: 10 steps" "$TMP/once2.out"

# 4. Runs starting while a watch polls the lock.
mkdir -p "$TMP/busy"
"$CNNSCALE" watch "$TMP/busy" --interval 0.1 >/dev/null 2>&1 &
w=$!
fails=0
for i in $(seq 1 20); do  # each run resumes the last and trains one step more
  timeout 120 "$CNNSCALE" train --synthetic --model "flatten linear(10)" --batch-size 8 --max-steps "$i" \
    --no-tensorboard --resume auto --run-dir "$TMP/busy" >"$TMP/busy.$i.out" 2>&1 || fails=$((fails + 1))
done
kill "$w" 2>/dev/null
wait "$w" 2>/dev/null
expect_eq "20 runs started beside a polling watch, none refused" 0 "$fails"
finish
