#!/usr/bin/env bash
# A rank that stops or dies must not leave the others hanging: within
# --collective-timeout the survivors stop with "cnnscale: error:" naming the rank and
# host that went silent, and a non-zero status. The test must finish in seconds.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
ARGS=(--synthetic --model "conv(8,3) relu maxpool(2) flatten linear(10)" --batch-size 16 --max-steps 1000000 --log-every 1 --no-eval)

wait_for_step() { for _ in $(seq 1 300); do grep -q "step $2/" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
rank_pid() {  # PID of the cnnscale process whose OMPI_COMM_WORLD_RANK is $1 (run tagged by $2)
  for p in $(pgrep -f "cnnscale train .*$2"); do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo $p; return; }
  done
}

# 1. A rank stops (SIGSTOP: alive to the OS, silent to MPI): rank 0's watchdog names it.
start=$(date +%s)
( timeout 120 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --collective-timeout 3 --run-dir "$TMP/stop" >"$TMP/stop.out" 2>&1; echo $? >"$TMP/stop.rc" ) &
wait_for_step "$TMP/stop.out" 5
victim=$(rank_pid 1 "$TMP/stop")
expect_ne "found rank 1's process" "" "$victim"
kill -STOP "$victim"
wait
elapsed=$(( $(date +%s) - start ))
kill -KILL "$victim" 2>/dev/null
expect_ne "stopped-rank run exit status" 0 "$(cat "$TMP/stop.rc")"
expect_ne "not killed by the test's 120 s timeout" 124 "$(cat "$TMP/stop.rc")"
expect_grep "the silent rank and host are named" "cnnscale: error: rank 0 on .* waited [0-9]+ s in the .* rank 1 on $(hostname) \(no heartbeat for [0-9]+ s\) went silent" "$TMP/stop.out"
python3 -c "import sys; sys.exit(0 if $elapsed < 40 else 1)"
expect_eq "stopped within seconds of the 3 s timeout (took ${elapsed}s incl. start-up)" 0 "$?"

# 2. A rank is killed (SIGKILL): the job ends promptly with a non-zero status and a
#    message naming the rank (mpirun's or ours, whichever is first).
start=$(date +%s)
( timeout 120 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --collective-timeout 3 --run-dir "$TMP/kill" >"$TMP/kill.out" 2>&1; echo $? >"$TMP/kill.rc" ) &
wait_for_step "$TMP/kill.out" 5
victim=$(rank_pid 1 "$TMP/kill")
kill -KILL "$victim"
wait
elapsed=$(( $(date +%s) - start ))
expect_ne "killed-rank run exit status" 0 "$(cat "$TMP/kill.rc")"
expect_ne "not killed by the test's 120 s timeout" 124 "$(cat "$TMP/kill.rc")"
expect_grep "the dead rank is named" '(rank 1 .*went silent|process rank 1 .*(exited|signal))' "$TMP/kill.out"
python3 -c "import sys; sys.exit(0 if $elapsed < 40 else 1)"
expect_eq "ended within seconds (took ${elapsed}s incl. start-up)" 0 "$?"

# 3. Bad values are errors, not warnings.
"$CNNSCALE" train --synthetic --collective-timeout 0 --max-steps 1 >"$TMP/bad.out" 2>&1
expect_eq "--collective-timeout 0 exit status" 2 "$?"
expect_grep "--collective-timeout 0 explained" 'cnnscale: error: --collective-timeout must be positive' "$TMP/bad.out"
finish
