#!/usr/bin/env bash
# watch_killed.sh — a stopped or killed job leaves a record that `cnnscale watch` and
# `cnnscale report` use (issue 28 item 3; train/run_end.hpp). Each case runs
# `mpiexec -n 2 cnnscale train` (mnist_cnn, endless), a watch beside it, then ends the job:
#  1. `kill -9` of rank 0 (its pid from run.lock): nothing can be written; watch ends
#     within 15 s with status 1 and "ended without finishing: no process holds RUN/run.lock
#     (its last holder: pid P on HOST) … after step N"; report names it "killed after step N"
#     (an error naming --allow-missing without it; a "skipped:" line with it);
#  2. `kill -9` of rank 1: mpiexec sends rank 0 SIGTERM 1 s later (and SIGKILL 1 s after
#     that) while it waits in a collective: rank 0 pokes the watchdogs, rank 1 does not
#     answer, and run.json says "ended": "rank 1 on HOST died or hung: …"; watch says
#     "stopped: rank 1 …" (status 1), report lists it with its last step;
#  3. SIGTERM to mpiexec (a time limit or scancel without --signal=USR1): the ranks
#     checkpoint at the next step boundary; run.json "ended": "signal SIGTERM at step N"
#     with the timings of the steps run, checkpoint step-N, a metrics.jsonl end line; watch
#     and report say so; --resume auto then finishes the run, run.json "ended": "finished"
#     and its segments keep the stopped one (with its "ended");
#  4. a finished run continued (--max-steps raised) and then SIGTERMed keeps its finished
#     run.json byte for byte; the end line in metrics.jsonl says how the continuation
#     ended, watch says "stopped: …" (status 1), report still uses the finished summary;
#  5. `watch --once` on the ended runs at once (status 1), and on a finished run "finished" (0);
#  6. a watch probing the lock never keeps a run from starting: 20 runs started while a
#     watch polls every 0.1 s all start (train retries its lock for a second).
#  7. `kill -9` of a one-rank run, after which an unrelated process takes run.lock (issue
#     39): the lock file still names the dead training, so watch ends within 15 s with
#     status 1, naming the dead holder and the process that holds the lock (before: it
#     waited forever), and report calls the run killed, not running.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
BASE=(train --synthetic --model mnist_cnn --batch-size 16 --log-every 5)
TRAIN=("${BASE[@]}" --max-steps 100000)

# The training process of rank R of the run in DIR (not mpiexec, not a watch).
rank_pid() {
  local dir=$1 want=$2 p
  for p in $(pgrep -x cnnscale); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "cnnscale train .*--run-dir $dir" || continue
    [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = "$want" ] && echo "$p"
  done
}
# ended_case NAME HOW [EXTRA TRAIN ARGS]: starts the job, a watch beside it, ends the job
# HOW (kill_rank0, kill_rank1, sigterm); leaves the watch's status in $WATCH_ST.
ended_case() {
  local name=$1 how=$2 dir="$TMP/$1" pid
  shift 2
  local before
  before=$(cat "$dir/metrics.jsonl" 2>/dev/null | wc -l)  # a continued run appends
  timeout 300 $M -n 2 "$CNNSCALE" "${TRAIN[@]}" --run-dir "$dir" "$@" >"$TMP/$name.train.out" 2>&1 &
  local job=$!
  for _ in $(seq 1 300); do  # this job's first progress line
    tail -n +$((before + 1)) "$dir/metrics.jsonl" 2>/dev/null | grep -q '"loss"' && break
    sleep 0.1
  done
  "$CNNSCALE" watch "$dir" --interval 0.5 >"$TMP/$name.watch.out" 2>&1 &
  local w=$!
  sleep 1
  case $how in
    kill_rank0) pid=$(rank_pid "$dir" 0); kill -9 "$pid" ;;
    kill_rank1) pid=$(rank_pid "$dir" 1); kill -9 "$pid" ;;
    sigterm) pid=$(pgrep -P "$job" | head -1); kill -TERM "$pid" ;;  # mpiexec itself: `timeout` would signal its group
  esac
  expect_ne "$name: the process to signal was found" "" "$pid"
  wait "$job"
  for _ in $(seq 1 150); do kill -0 "$w" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$w" 2>/dev/null; then
    bad "$name: watch still waits 15 s after the job ended"
    kill "$w"
  fi
  wait "$w"
  WATCH_ST=$?
  expect_eq "$name: watch exit status 1 (not finished)" 1 "$WATCH_ST"
}
runjson() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d.get(sys.argv[2]); print(v if v is not None else "")' "$@"; }

# 1. kill -9 of rank 0: no record can be written; the lock says it.
ended_case kill_rank0 kill_rank0
expect_grep "kill_rank0: watch says the run ended without finishing" \
  "^ended without finishing: no process holds $TMP/kill_rank0/run.lock \(its last holder: pid [0-9]+ on .*\) and run.json records no end.* after step [0-9]+" \
  "$TMP/kill_rank0.watch.out"
expect_eq "kill_rank0: no run.json" "" "$(ls "$TMP/kill_rank0"/run.json 2>/dev/null)"

# 2. kill -9 of rank 1: rank 0 records which rank died.
ended_case kill_rank1 kill_rank1
expect_file "kill_rank1: run.json written by rank 0" "$TMP/kill_rank1/run.json"
expect_grep "kill_rank1: run.json ended: rank 1 died" '"ended": "rank 1 on [^ ]+ died or hung: no answer from it after SIGTERM following step [0-9]+' \
  "$TMP/kill_rank1/run.json"
expect_eq "kill_rank1: finished false" "False" "$(runjson "$TMP/kill_rank1/run.json" finished)"
expect_grep "kill_rank1: metrics.jsonl end line" '"event":"end"' "$TMP/kill_rank1/metrics.jsonl"
expect_grep "kill_rank1: watch says stopped: rank 1 died" "^stopped: rank 1 on .* died or hung" "$TMP/kill_rank1.watch.out"

# 3. SIGTERM without USR1: a checkpoint and a record with timings at the next boundary.
ended_case sigterm sigterm
n=$(runjson "$TMP/sigterm/run.json" steps)
expect_eq "sigterm: run.json ended: signal SIGTERM at step N" "signal SIGTERM at step $n" \
  "$(runjson "$TMP/sigterm/run.json" ended)"
expect_file "sigterm: checkpoint at that step" "$TMP/sigterm/checkpoints/step-$(printf %08d "${n:-0}").h5"
expect_eq "sigterm: planned steps recorded" 100000 "$(runjson "$TMP/sigterm/run.json" planned_steps)"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["images_per_s"] > 0 and d["step_ms"]["median"] > 0 else 1)' \
  "$TMP/sigterm/run.json"
expect_eq "sigterm: timings of the steps run" 0 "$?"
expect_grep "sigterm: the ranks exited 75 (checkpointed on a signal)" "stop signal received: checkpointed at step $n" \
  "$TMP/sigterm.train.out"
expect_grep "sigterm: watch says stopped: signal SIGTERM" "^stopped: signal SIGTERM at step $n \($n steps done\)" \
  "$TMP/sigterm.watch.out"

# report: each ended run named with its last step; none of them is a point.
"$CNNSCALE" report "$TMP/kill_rank0" "$TMP/kill_rank1" "$TMP/sigterm" --output "$TMP/rep0" >"$TMP/rep0.out" 2>&1
expect_eq "report without --allow-missing: exit status 2" 2 "$?"
expect_grep "report names the killed run and --allow-missing" \
  "cnnscale: error: '$TMP/kill_rank0' has no run.json: killed after step [0-9]+ .*no process holds run.lock" "$TMP/rep0.out"
timeout 120 "$CNNSCALE" train --synthetic --model mnist_cnn --batch-size 16 --max-steps 10 --run-dir "$TMP/done" \
  >"$TMP/done.out" 2>&1
"$CNNSCALE" report "$TMP/kill_rank0" "$TMP/kill_rank1" "$TMP/sigterm" "$TMP/done" --output "$TMP/rep" --allow-missing \
  >"$TMP/rep.out" 2>&1
expect_eq "report --allow-missing: exit status 0" 0 "$?"
expect_grep "report --allow-missing: kill -9 rank 0 listed with its last step" \
  "^skipped: '$TMP/kill_rank0' has no run.json: killed after step [0-9]+ \(metrics.jsonl's last progress line\)" "$TMP/rep.out"
expect_grep "report --allow-missing: kill -9 rank 1 listed with its last step" \
  "^skipped: '$TMP/kill_rank1' did not finish: stopped after step [0-9]+ of 100000: rank 1 on .* died or hung" "$TMP/rep.out"
expect_grep "report --allow-missing: SIGTERM listed with its last step" \
  "^skipped: '$TMP/sigterm' did not finish: stopped after step $n of 100000: signal SIGTERM at step $n" "$TMP/rep.out"
expect_grep "report --allow-missing: the skipped runs in report.md" "Skipped: '$TMP/kill_rank1' did not finish" "$TMP/rep/report.md"

# 3b. The stopped run continues and finishes; its segments keep how the first one ended.
timeout 300 $M -n 2 "$CNNSCALE" "${BASE[@]}" --run-dir "$TMP/sigterm" --resume auto --max-steps $((n + 10)) \
  >"$TMP/sigterm.resume.out" 2>&1
expect_eq "sigterm: --resume auto finishes" 0 "$?"
expect_eq "sigterm: run.json ended: finished" "finished" "$(runjson "$TMP/sigterm/run.json" ended)"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["segments"]; n=int(sys.argv[2])
sys.exit(0 if len(s) == 2 and s[0]["last_step"] == n and s[0]["ended"] == "signal SIGTERM at step %d" % n and "ended" not in s[1] else 1)' \
  "$TMP/sigterm/run.json" "$n"
expect_eq "sigterm: segments: the stopped one (with ended), then the finished one" 0 "$?"
"$CNNSCALE" watch "$TMP/sigterm" --once >"$TMP/once3.out" 2>&1
expect_eq "sigterm resumed: watch --once status 0" 0 "$?"

# 4. A finished run continued and stopped keeps its summary.
cp "$TMP/done/run.json" "$TMP/done.run.json"
ended_case done sigterm --resume auto
cmp -s "$TMP/done.run.json" "$TMP/done/run.json"
expect_eq "finished run continued, then SIGTERM: run.json unchanged" 0 "$?"
expect_grep "finished run continued: metrics.jsonl end line" '"ended":"signal SIGTERM at step [0-9]+","event":"end"' \
  "$TMP/done/metrics.jsonl"
expect_grep "finished run continued: watch says stopped" "^stopped: signal SIGTERM at step [0-9]+" "$TMP/done.watch.out"
"$CNNSCALE" report "$TMP/done" --output "$TMP/rep2" >"$TMP/rep2.out" 2>&1
expect_eq "finished run continued: report uses its finished summary" 0 "$?"

# 5. --once afterwards, and on a finished run.
"$CNNSCALE" watch "$TMP/kill_rank0" --once >"$TMP/once.out" 2>&1
expect_eq "--once on a killed run: status 1" 1 "$?"
expect_grep "--once on a killed run: says so" "^ended without finishing: " "$TMP/once.out"
"$CNNSCALE" watch "$TMP/kill_rank1" --once >"$TMP/once1.out" 2>&1
expect_eq "--once on a run whose rank 1 died: status 1" 1 "$?"
timeout 300 "$CNNSCALE" train --synthetic --model mnist_cnn --batch-size 16 --max-steps 10 --run-dir "$TMP/done2" \
  >"$TMP/done2.out" 2>&1
"$CNNSCALE" watch "$TMP/done2" --once >"$TMP/once2.out" 2>&1
expect_eq "--once on a finished run: status 0" 0 "$?"
expect_grep "--once on a finished run: finished" "^finished: 10 steps" "$TMP/once2.out"

# 6. Runs starting while a watch polls the lock.
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

# 7. A killed run whose lock another process took.
timeout 300 "$CNNSCALE" "${TRAIN[@]}" --run-dir "$TMP/squat" >"$TMP/squat.train.out" 2>&1 &
job=$!
for _ in $(seq 1 300); do grep -q '"loss"' "$TMP/squat/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$TMP/squat/run.lock")
kill -9 "$pid"
wait "$job"
flock "$TMP/squat/run.lock" sleep 120 >/dev/null 2>&1 &
squat=$!
for _ in $(seq 50); do flock -n "$TMP/squat/run.lock" true || break; sleep 0.1; done  # until it holds the lock
timeout 15 "$CNNSCALE" watch "$TMP/squat" --interval 0.5 >"$TMP/squat.watch.out" 2>&1
expect_eq "squatted lock: watch ends with status 1 (not 124: still waiting)" 1 "$?"
expect_grep "squatted lock: watch names the dead holder and the lock's holder" \
  "^ended without finishing: $TMP/squat/run.lock names pid $pid on $(hostname) as its holder, which no longer runs, and pid [0-9]+ \(flock\) holds the lock now.* after step [0-9]+" \
  "$TMP/squat.watch.out"
"$CNNSCALE" report "$TMP/squat" --output "$TMP/squat.rep" >"$TMP/squat.rep.out" 2>&1
expect_grep "squatted lock: report says killed" "^cnnscale: error: '$TMP/squat' has no run.json: killed after step [0-9]+" "$TMP/squat.rep.out"
kill $(pgrep -P "$squat") "$squat" 2>/dev/null  # flock and its sleep
wait "$squat" 2>/dev/null
finish
