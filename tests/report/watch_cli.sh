#!/usr/bin/env bash
# watch_cli.sh — `cnnscale watch RUN_DIR` on run directories written by hand (no training):
# --once prints the current table (start record, progress rows, evaluations; a line not
# yet ended by '\n' is not shown); --rows bounds it; without --once it follows
# metrics.jsonl as lines are appended (a log: each new row and evaluation once) and exits 0 when
# run.json records the segment's end; a resumed segment's older run.json does not end it;
# a missing or empty run directory and bad options are `cnnscale: error:` lines (exit 2).
# How run.lock's holder is judged (issue 39): a dead recorded holder whose lock another
# process took ends the run; a holder recorded on another host, and a live training in a
# pid namespace of its own (`unshare --pid`, root only), are running jobs.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
C="$CNNSCALE"
row() {  # row STEP LOSS
  printf '{"step":%d,"epoch":1,"loss":%s,"lr":0.01,"images_per_s":1234.5,"step_ms":25.9,"data_ms":0.1,"compute_ms":20,"comm_exposed_ms":5,"optimizer_ms":0.8,"elapsed_s":%d,"total_steps":100,"eta_s":70,"slowest_step_ms":26.4}\n' "$1" "$2" "$1"
}

# ---- errors ----
"$C" watch "$TMP/nope" --once >"$TMP/e1" 2>&1
expect_eq "missing run dir: exit 2" 2 "$?"
expect_grep "missing run dir: explained" "^cnnscale: error: watch: run directory '$TMP/nope' does not exist; give the --run-dir" "$TMP/e1"
mkdir -p "$TMP/empty"
"$C" watch "$TMP/empty" --once >"$TMP/e2" 2>&1
expect_eq "empty run dir: exit 2" 2 "$?"
expect_grep "empty run dir: explained" "^cnnscale: error: watch: '$TMP/empty' holds no metrics.jsonl, so no training has started there yet" "$TMP/e2"
"$C" watch "$TMP/empty" --interval 0 >"$TMP/e3" 2>&1
expect_eq "--interval 0: exit 2" 2 "$?"
expect_grep "--interval 0: explained" "^cnnscale: error: watch: --interval must be positive" "$TMP/e3"
"$C" watch >"$TMP/e4" 2>&1
expect_eq "no run dir: exit 2" 2 "$?"
expect_grep "no run dir: usage" "^cnnscale: error: watch: no run directory given; usage: cnnscale watch RUN_DIR" "$TMP/e4"
"$C" --help >"$TMP/help" 2>&1
expect_grep "cnnscale --help lists watch" "^  watch +a running job's progress" "$TMP/help"

# ---- --once ----
D="$TMP/run"
mkdir -p "$D"
{
  echo '{"event":"start","from_step":0,"world_size":2,"global_batch":32,"resumed_from":null,"config_digest":"x","time":"2026-11-23T10:00:00Z"}'
  row 10 2.1; row 20 1.5; row 30 0.9
  echo '{"event":"eval","step":30,"epoch":1,"test_accuracy":0.8125,"test_loss":0.61,"elapsed_s":31}'
  printf '{"step":40,"epoch":1,"loss":0.7'   # a line still being written
} >"$D/metrics.jsonl"
"$C" watch "$D" --once >"$TMP/once" 2>&1
expect_eq "--once: exit 0" 0 "$?"
expect_grep "--once: the run's start" "^$D: 2 rank\(s\), global batch 32, started 2026-11-23T10:00:00Z$" "$TMP/once"
expect_grep "--once: running, progress and ETA" "^running: step 30/100 \(30%\), ETA 0:01:10, last update [0-9]+ s ago$" "$TMP/once"
expect_grep "--once: the column header" "^ +step +epoch +loss +lr +images/s +step ms +slowest ms +elapsed$" "$TMP/once"
expect_grep "--once: a row" "^ +20 +1 +1\.5000 +0\.01 +1234 +25\.9 +26\.4 +0:00:20$" "$TMP/once"
expect_eq "--once: three rows (the unfinished line left out)" 3 "$(grep -cE '^ +[0-9]+ +1 ' "$TMP/once")"
expect_grep "--once: the evaluation" "^eval epoch 1 \(step 30\): test accuracy 0\.8125, loss 0\.6100$" "$TMP/once"
"$C" watch "$D" --once --rows 2 >"$TMP/once2" 2>&1
expect_eq "--rows 2: two rows" "20 30" "$(grep -E '^ +[0-9]+ +1 ' "$TMP/once2" | awk '{print $1}' | xargs)"

# ---- lines of the right JSON with the wrong types (written by something else) ----
W="$TMP/odd"
mkdir -p "$W"
{
  echo '{"event":"start","from_step":"zero","world_size":"two","global_batch":null,"time":5}'
  echo '{"event": 5}'
  echo '{"event":"eval","step":"x","test_accuracy":"high"}'
  echo '{"step":"ten","loss":"low"}'
  echo '[1, 2, 3]'
  echo '{"step":7,"epoch":"one","loss":"low","elapsed_s":"soon","total_steps":"all","eta_s":"later"}'
  row 8 0.5
} >"$W/metrics.jsonl"
echo '{"steps":"many","wall_s":"long"}' >"$W/run.json"
"$C" watch "$W" --once >"$TMP/odd.out" 2>&1
expect_eq "odd-typed lines: exit 0 (shown as far as they make sense)" 0 "$?"
expect_grep "odd-typed lines: the good row is shown" "^ +8 +1 +0\.5000 " "$TMP/odd.out"
expect_grep "odd-typed lines: a row with odd fields shows them as -" "^ +7 +- +- " "$TMP/odd.out"
expect_eq "odd-typed lines: no row for a non-numeric step" 2 "$(grep -cE '^ +[0-9]+ +' "$TMP/odd.out")"
expect_grep "odd-typed lines: the skipped lines are counted and the first named (issue 39)" \
  "^note: 4 line\(s\) of $W/metrics.jsonl skipped, no record watch can show: line 2: its \"event\" is 5, not text; line 3: an evaluation whose \"step\" is \"x\", not a number; line 4: its \"step\" is \"ten\", not a number; and 1 more$" \
  "$TMP/odd.out"
expect_grep "odd-typed lines: run.json's wrong field is named" \
  "^note: $W/run.json: \"steps\" is \"many\" \(text\), not a whole number: watch cannot tell from it" "$TMP/odd.out"
"$C" watch "$W" --interval 0.2 >"$TMP/odd.live" 2>&1 &
pid=$!
sleep 1
echo '{"event":"nope","step":9}' >>"$W/metrics.jsonl"
sleep 1
kill -0 $pid 2>/dev/null
expect_eq "odd-typed lines: following does not end on them (nor on a run.json of the wrong types)" 0 "$?"
kill $pid 2>/dev/null; wait $pid 2>/dev/null
grep -q "internal error" "$TMP/odd.out" "$TMP/odd.live" && bad "odd-typed lines: no internal error" || ok "odd-typed lines: no internal error"
expect_grep "odd-typed lines, following: a line skipped later is said as it comes" \
  "^skipped $W/metrics.jsonl line 8: an event \"nope\" that watch does not know$" "$TMP/odd.live"

# ---- a run that ended with a run.json of the wrong types (issue 39) ----
# Finished, then its run.json edited ("steps" as text) and garbage appended to metrics.jsonl;
# run.lock is there and free. Before: "ended without finishing … killed", the lines dropped.
host=$(hostname)
sleep 0 & dead=$!
wait $dead  # a pid that no longer runs
F="$TMP/typed"
mkdir -p "$F"
{
  echo '{"event":"start","from_step":0,"world_size":1,"global_batch":16,"time":"2026-11-23T10:00:00Z"}'
  row 10 2.1; row 20 1.5
  echo 'garbage'
} >"$F/metrics.jsonl"
printf '{"host":"%s","pid":%d,"job_id":"","started":"2026-11-23T10:00:00Z"}\n' "$host" "$dead" >"$F/run.lock"
echo '{"steps":"20","wall_s":12,"images_per_s":300,"ended":"finished","finished":true}' >"$F/run.json"
"$C" watch "$F" --once >"$TMP/typed.out" 2>&1
expect_eq "run.json of wrong types, lock free: --once exit 1" 1 "$?"
expect_grep "run.json of wrong types: the field and the file, not 'killed'" \
  "^ended, but how cannot be told: no process holds $F/run.lock .*, and $F/run.json: \"steps\" is \"20\" \(text\), not a whole number .*; metrics.jsonl's last progress line is step 20" \
  "$TMP/typed.out"
expect_eq "run.json of wrong types: not called killed" 0 "$(grep -c 'stopped or killed' "$TMP/typed.out")"
expect_grep "run.json of wrong types: the garbage line named" "^note: 1 line\(s\) of $F/metrics.jsonl skipped, no record watch can show: line 4: not JSON: garbage$" "$TMP/typed.out"
timeout 20 "$C" watch "$F" --interval 0.2 >"$TMP/typed.live" 2>&1
expect_eq "run.json of wrong types, following: ends, exit 1" 1 "$?"
expect_grep "following: the garbage line said" "^note: 1 line\(s\) of $F/metrics.jsonl skipped" "$TMP/typed.live"
expect_grep "following: the end says why it cannot tell" "^ended, but how cannot be told: .*\"steps\" is \"20\" \(text\)" "$TMP/typed.live"
echo '{"steps":20,"wall_s":12,"images_per_s":300,"ended":"finished","finished":true}' >"$F/run.json"
"$C" watch "$F" --once >"$TMP/typed2.out" 2>&1
expect_eq "the same run.json with \"steps\" a number: finished, exit 0" 0 "$?"
expect_grep "the same run.json with \"steps\" a number: finished" "^finished: 20 steps in 0:00:12, median 300 img/s" "$TMP/typed2.out"
echo '{"steps":20,"wall_s":"long","images_per_s":300,"ended":"finished","finished":true}' >"$F/run.json"
"$C" watch "$F" --once >"$TMP/typed3.out" 2>&1
expect_eq "a field only shown of the wrong type: still finished, exit 0" 0 "$?"
expect_grep "a field only shown of the wrong type: shown as ?" "^finished: 20 steps in \?, median 300 img/s" "$TMP/typed3.out"
expect_grep "a field only shown of the wrong type: named" "^note: $F/run.json: \"wall_s\" is \"long\" \(text\), not a number: not shown$" "$TMP/typed3.out"

# ---- run.lock held by another process than the dead training it records (issue 39) ----
# Before: watch waited forever ("running"); report said "still running"; train blamed a training.
K="$TMP/squat"
mkdir -p "$K"
{
  echo '{"event":"start","from_step":0,"world_size":1,"global_batch":16,"time":"2026-11-23T10:00:00Z"}'
  row 10 2.1; row 30 1.5
} >"$K/metrics.jsonl"
printf '{"host":"%s","pid":%d,"job_id":"","started":"2026-11-23T10:00:00Z"}\n' "$host" "$dead" >"$K/run.lock"
flock "$K/run.lock" sleep 120 >/dev/null 2>&1 &
squat=$!
for _ in $(seq 50); do flock -n "$K/run.lock" true || break; sleep 0.1; done  # until it holds the lock
"$C" watch "$K" --once >"$TMP/squat.out" 2>&1
expect_eq "squatted lock: --once exit 1" 1 "$?"
expect_grep "squatted lock: the dead holder and the process holding the lock" \
  "^ended without finishing: $K/run.lock names pid $dead on $host as its holder, which no longer runs, and pid [0-9]+ \(flock\) holds the lock now: not a training of this run.* after step 30; .*end that process first" \
  "$TMP/squat.out"
timeout 20 "$C" watch "$K" --interval 0.2 >"$TMP/squat.live" 2>&1
expect_eq "squatted lock, following: ends (confirmed 2 s later), exit 1" 1 "$?"
expect_grep "squatted lock, following: says so" "^ended without finishing: $K/run.lock names pid $dead on $host" "$TMP/squat.live"
"$C" report "$K" --output "$TMP/squat.rep" >"$TMP/squat.rep.out" 2>&1
expect_grep "squatted lock: report calls it killed, not running" \
  "^cnnscale: error: '$K' has no run.json: killed after step 30 .*run.lock names pid $dead on $host as its holder, which no longer runs, and pid [0-9]+ \(flock\) holds the lock now" \
  "$TMP/squat.rep.out"
timeout 60 "$C" train --synthetic --model "flatten linear(10)" --max-steps 1 --resume auto --run-dir "$K" >"$TMP/squat.train" 2>&1
expect_eq "squatted lock: train refuses, exit 2" 2 "$?"
expect_grep "squatted lock: train names the process, not a training" \
  "^cnnscale: error: run directory '$K' is locked by pid [0-9]+ \(flock\), not by a training: $K/run.lock records pid $dead on $host" \
  "$TMP/squat.train"
# The recorded holder alive (the lock's holder records itself): still running.
printf '{"host":"%s","pid":%d,"job_id":"","started":"2026-11-23T10:00:00Z"}\n' "$host" "$squat" >"$K/run.lock"
"$C" watch "$K" --once >"$TMP/live.out" 2>&1
expect_eq "lock held by the holder it records: --once exit 0" 0 "$?"
expect_grep "lock held by the holder it records: running" "^running: step 30/100" "$TMP/live.out"
kill $(pgrep -P "$squat") "$squat" 2>/dev/null  # flock and its sleep
wait "$squat" 2>/dev/null
# The lock taken by a process that is gone, held on by a child that inherited its descriptor
# (review of issue 39): /proc/locks names the dead taker. Another process, not the run.
printf '{"host":"%s","pid":%d,"job_id":"","started":"2026-11-23T10:00:00Z"}\n' "$host" "$dead" >"$K/run.lock"
(
  exec 9>>"$K/run.lock"
  flock 9
  setsid sleep 91.25 </dev/null >/dev/null 2>&1 &
)
for _ in $(seq 50); do flock -n "$K/run.lock" true || break; sleep 0.1; done
"$C" watch "$K" --once >"$TMP/inherit.out" 2>&1
expect_eq "lock inherited from a gone taker: --once exit 1" 1 "$?"
expect_grep "lock inherited from a gone taker: named" \
  "^ended without finishing: $K/run.lock names pid $dead on $host as its holder, which no longer runs, and a process that inherited the lock of pid [0-9]+ \(gone\) holds the lock now" \
  "$TMP/inherit.out"
pkill -f "sleep 91.25" 2>/dev/null

# ---- a holder recorded on another host: cannot be checked from here, so still running ----
O="$TMP/otherhost"
mkdir -p "$O"
cp "$K/metrics.jsonl" "$O/"
printf '{"host":"%s","pid":%d,"job_id":"","started":"2026-11-23T10:00:00Z"}\n' "not-$host" "$dead" >"$O/run.lock"
flock "$O/run.lock" sleep 120 >/dev/null 2>&1 &
other=$!
for _ in $(seq 50); do flock -n "$O/run.lock" true || break; sleep 0.1; done
"$C" watch "$O" --once >"$TMP/other.out" 2>&1
expect_eq "holder on another host: --once exit 0" 0 "$?"
expect_grep "holder on another host: running" "^running: step 30/100" "$TMP/other.out"
"$C" report "$O" --output "$TMP/other.rep" >"$TMP/other.rep.out" 2>&1
expect_grep "holder on another host: report says still running" \
  "^cnnscale: error: '$O' has no run.json: still running \(pid $dead on not-$host holds run.lock\)" "$TMP/other.rep.out"
timeout 60 "$C" train --synthetic --model "flatten linear(10)" --max-steps 1 --resume auto --run-dir "$O" >"$TMP/other.train" 2>&1
expect_grep "holder on another host: train says another training holds it" \
  "^cnnscale: error: run directory '$O' is in use by another training: pid $dead on not-$host" "$TMP/other.train"
kill $(pgrep -P "$other") "$other" 2>/dev/null
wait "$other" 2>/dev/null

# ---- a live training in a pid namespace of its own (issue 39 review) ----
# Under `unshare --pid` (as in a container sharing the host's name: Docker --network host,
# Kubernetes hostNetwork) the training records the pid it has there, which no process has
# here. Before: watch said "ended without finishing … pid Q (cnnscale) holds the lock now:
# not a training of this run … end that process first" (status 1), report "killed … end
# that process", train "locked by pid Q (cnnscale), not by a training". Its pid there is set
# (ns_last_pid) to one that no process has here. A watch in another pid namespace, which
# cannot see the holder at all, must not call it killed either.
echo "not root" >"$TMP/unshare.err"
if [ "$(id -u)" -ne 0 ] ||
  ! unshare --pid --fork --mount-proc sh -c 'echo 300 >/proc/sys/kernel/ns_last_pid' >"$TMP/unshare.err" 2>&1; then
  echo "SKIP (pid namespace part): needs root and unshare --pid --fork --mount-proc with a writable" \
    "ns_last_pid: $(head -1 "$TMP/unshare.err")"
else
  P="$TMP/ns"
  n=$(($(cat /proc/sys/kernel/pid_max) - 1000))
  while [ -e "/proc/$n" ]; do n=$((n - 1)); done
  # bash is pid 1 there; the training, started in the background, gets pid n.
  # shellcheck disable=SC2016  # expanded by that bash
  timeout 300 unshare --pid --fork --mount-proc --kill-child bash -c \
    'echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid; "${@:2}" & wait $!' ns "$n" \
    "$C" train --synthetic --model "flatten linear(10)" --batch-size 8 --max-steps 100000000 --no-tensorboard \
    --run-dir "$P" >"$TMP/ns.train" 2>&1 &
  ns_job=$!
  for _ in $(seq 300); do grep -q '"loss"' "$P/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
  recorded=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$P/run.lock" 2>/dev/null)
  expect_eq "pid namespace: run.lock records the training's pid there" "$n" "$recorded"
  expect_eq "pid namespace: no process has that pid here" "no" "$([ -e "/proc/$n" ] && echo yes || echo no)"
  "$C" watch "$P" --once >"$TMP/ns.out" 2>&1
  expect_eq "pid namespace: --once exit 0" 0 "$?"
  expect_grep "pid namespace: running" "^running: step [0-9]+/100000000" "$TMP/ns.out"
  "$C" report "$P" --output "$TMP/ns.rep" >"$TMP/ns.rep.out" 2>&1
  expect_grep "pid namespace: report says still running" \
    "^cnnscale: error: '$P' has no run.json: still running \(pid $n on $host holds run.lock\)" "$TMP/ns.rep.out"
  timeout 60 "$C" train --synthetic --model "flatten linear(10)" --max-steps 1 --resume auto --run-dir "$P" \
    >"$TMP/ns.second" 2>&1
  expect_eq "pid namespace: a second training refused, exit 2" 2 "$?"
  expect_grep "pid namespace: a second training is told that training holds it" \
    "^cnnscale: error: run directory '$P' is in use by another training: pid $n on $host" "$TMP/ns.second"
  unshare --pid --fork --mount-proc "$C" watch "$P" --once >"$TMP/ns.other.out" 2>&1
  expect_eq "pid namespace: a watch in another one: --once exit 0" 0 "$?"
  expect_grep "pid namespace: a watch in another one: running" "^running: step [0-9]+/100000000" "$TMP/ns.other.out"
  for p in $(pgrep -x cnnscale); do  # the training, by its pid here
    [ "$(awk '/^NSpid:/ {print $NF}' "/proc/$p/status" 2>/dev/null)" = "$n" ] && kill "$p"
  done
  wait "$ns_job" 2>/dev/null
fi

# ---- following a running job ----
"$C" watch "$D" --interval 0.2 >"$TMP/live" 2>&1 &
pid=$!
sleep 1
printf '5,"lr":0.01,"images_per_s":1200,"step_ms":26,"elapsed_s":40,"total_steps":100}\n' >>"$D/metrics.jsonl"
row 50 0.6 >>"$D/metrics.jsonl"
echo '{"event":"eval","step":50,"epoch":1,"test_accuracy":0.84,"test_loss":0.5,"elapsed_s":51}' >>"$D/metrics.jsonl"
sleep 1
kill -0 $pid 2>/dev/null
expect_eq "still watching before run.json" 0 "$?"
row 100 0.4 >>"$D/metrics.jsonl"
echo '{"steps":100,"wall_s":95,"images_per_s":1300,"test_accuracy":0.85,"timeline":"/x/t.json"}' >"$D/run.json.tmp" &&
  mv "$D/run.json.tmp" "$D/run.json"
for _ in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
kill -0 $pid 2>/dev/null && { bad "watch exits once run.json records the end"; kill $pid; }
wait $pid
expect_eq "watch: exit 0 at the run's end" 0 "$?"
expect_eq "each row printed once, in order" "10 20 30 40 50 100" "$(grep -E '^ +[0-9]+ +1 ' "$TMP/live" | awk '{print $1}' | xargs)"
expect_eq "the evaluations, each once" "30 50" \
  "$(grep -E '^eval epoch' "$TMP/live" | sed -E 's/.*\(step ([0-9]+)\).*/\1/' | xargs)"
expect_grep "the end is said" "^finished: 100 steps in 0:01:35, median 1300 img/s, test accuracy 0\.8500; timeline /x/t\.json$" "$TMP/live"

# ---- a resumed segment: the previous run.json does not end it ----
echo '{"event":"start","from_step":100,"world_size":4,"global_batch":64,"resumed_from":"c.h5","config_digest":"x","time":"2026-11-23T11:00:00Z"}' >>"$D/metrics.jsonl"
row 110 0.3 >>"$D/metrics.jsonl"
"$C" watch "$D" --once >"$TMP/resumed" 2>&1
expect_grep "resumed: the new segment's start" "4 rank\(s\), global batch 64, .*\(resumed at step 100\)" "$TMP/resumed"
expect_grep "resumed: still running" "^running: step 110/100" "$TMP/resumed"
expect_eq "resumed: the new segment's rows only" "110" "$(grep -E '^ +[0-9]+ +1 ' "$TMP/resumed" | awk '{print $1}' | xargs)"

# ---- deeply nested JSON (issue 48 item 10): a metrics line of 300,000 nested '[' (under
# the 1 MiB line cap) and a run.json of 100,000 killed watch with SIGSEGV (copying the
# parsed line recursed once per level). Now: JSON nested deeper than 64 levels is refused
# as malformed, naming the file; report refuses such a run.json the same way.
N="$TMP/nested"
mkdir -p "$N"
cp "$D/metrics.jsonl" "$N/"
python3 -c "print('{\"step\": 120, \"loss\": ' + '[' * 300000 + ']' * 300000 + '}')" >>"$N/metrics.jsonl"
"$C" watch "$N" --once >"$TMP/nested.out" 2>&1
st=$?
expect_ne "nested metrics line: no crash (exit $st)" 139 "$st"
expect_grep "nested metrics line: skipped as not JSON, line named" "line [0-9]+: not JSON: \{\"step\": 120, \"loss\": \[\[" "$TMP/nested.out"
python3 -c "print('{\"deep\": ' + '[' * 100000 + ']' * 100000 + '}')" >"$N/run.json"
"$C" watch "$N" --once >"$TMP/nested2.out" 2>&1
st=$?
expect_ne "nested run.json: no crash (exit $st)" 139 "$st"
expect_grep "nested run.json: named, with the limit" "$N/run.json: not JSON \(.*nested deeper than 64 levels \(100001\)\)" "$TMP/nested2.out"
"$C" report "$N" --output "$TMP/nested-report" >"$TMP/nested3.out" 2>&1
expect_eq "nested run.json: report exits 2" 2 "$?"
expect_grep "nested run.json: report names the file" "^cnnscale: error: .*$N/run.json: malformed JSON \(.*nested deeper than 64 levels" "$TMP/nested3.out"
finish
