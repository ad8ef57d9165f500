#!/usr/bin/env bash
# A run directory never loses or mixes results (issue 12):
#  1. temporary files of writers that died (a checkpoint killed mid-write) are removed
#     at the next start — only this host's, only when their pid is gone;
#  2. SIGTERM to the ranks (what srun and scancel deliver) is a stop at the next step
#     boundary: checkpoint, status 75, like SIGUSR1;
#  3. SIGTERM to mpirun reaches the ranks only after Open MPI's odls_base_sigkill_timeout
#     (docs/checkpoints.md): with that set, the checkpoint is written all the same;
#  4. metrics.jsonl lines that cannot be written (a full device: metrics.jsonl made with
#     mknod as /dev/full's twin; a link to /dev/full is refused since issue 48) are a
#     warning, a count in run.json and a non-zero status, never silent loss;
#  5. --threads 0 is an error, not a silent 1; without --threads, OMP_NUM_THREADS (what the
#     Slurm templates export from --cpus-per-task) is the thread count, and run.json says it.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
ARGS=(--synthetic --model "conv(4,3) relu maxpool(2) flatten linear(10)" --batch-size 8 --no-eval)
HOST=$(hostname)
dead_pid() { local p=4000000; while kill -0 $p 2>/dev/null; do p=$((p + 1)); done; echo $p; }  # above pid_max
wait_for() { for _ in $(seq 1 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# 1. Stale temporaries.
R="$TMP/stale"
mkdir -p "$R/checkpoints"
D=$(dead_pid)
echo x >"$R/checkpoints/step-00000004.h5.tmp.$HOST.$D"    # dead writer, this host: removed
echo x >"$R/checkpoints/step-00000005.h5.tmp.$D"          # cnnscale 0.1 name, dead: removed
echo x >"$R/run.json.tmp.$HOST.$D"                        # dead writer of run.json: removed
echo x >"$R/checkpoints/step-00000006.h5.tmp.$HOST.$$"    # live writer (this shell): kept
echo x >"$R/checkpoints/step-00000007.h5.tmp.other-node.$D" # another host's: kept
timeout 300 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --log-every 1 --max-steps 2 --run-dir "$R" >"$TMP/stale.out" 2>&1
expect_eq "run with stale temporaries: status" 0 "$?"
expect_eq "dead writers' files removed" "" "$(ls "$R/checkpoints/step-00000004.h5.tmp.$HOST.$D" "$R/checkpoints/step-00000005.h5.tmp.$D" "$R/run.json.tmp.$HOST.$D" 2>/dev/null)"
expect_file "a live writer's file is kept" "$R/checkpoints/step-00000006.h5.tmp.$HOST.$$"
expect_file "another host's file is kept" "$R/checkpoints/step-00000007.h5.tmp.other-node.$D"
expect_grep "removal is reported" "removed .*step-00000004.h5.tmp.$HOST.$D" "$TMP/stale.out"

# 2. SIGTERM to the ranks: checkpoint at the next step boundary, status 75.
R="$TMP/term"
timeout 300 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --log-every 1 --max-steps 1000000 --run-dir "$R" >"$TMP/term.out" 2>&1 &
job=$!
wait_for "$TMP/term.out" "step 3/" || bad "training did not start"
for p in $(pgrep -f "cnnscale train .*--run-dir $R"); do [ "$(ps -o comm= -p "$p")" = cnnscale ] && kill -TERM "$p"; done
wait $job
expect_eq "SIGTERM to the ranks: status" 75 "$?"
expect_grep "SIGTERM: checkpointed" "stop signal received: checkpointed at step [0-9]+" "$TMP/term.out"
step=$(sed -n 's/.*checkpointed at step \([0-9]*\).*/\1/p' "$TMP/term.out")
expect_eq "latest names that step" "$(printf 'step-%08d.h5' "$step")" "$(cat "$R/checkpoints/latest" 2>/dev/null)"

# 3. SIGTERM to mpirun, with a grace that lets the checkpoint finish. Not under
#    `timeout`: it signals its whole process group too, and a second SIGTERM makes
#    mpirun kill the ranks at once. Few output lines: while mpirun waits out its grace it
#    does not forward the ranks' output, and a rank with a full output pipe (a pty of a
#    few KiB) stalls, so the line that says it checkpointed never arrives. A long epoch
#    (no epoch-end lines) and a line per 10,000 steps keep it to ~1 line/s on a machine
#    that does 10,000 steps/s (at --log-every 1000 and 3,750-step epochs this failed).
R="$TMP/mpirun-term"
$M --mca odls_base_sigkill_timeout 20 -n 2 "$CNNSCALE" train "${ARGS[@]}" --synthetic-samples 16000000 \
  --log-every 10000 --max-steps 1000000 --run-dir "$R" >"$TMP/mterm.out" 2>&1 &
job=$!
( for _ in $(seq 1 300); do kill -0 $job 2>/dev/null || exit 0; sleep 1; done; kill -KILL $job ) >/dev/null 2>&1 &
wait_for "$TMP/mterm.out" "step 10000/" || bad "training did not start"
kill -TERM $job
wait $job
expect_grep "SIGTERM to mpirun: checkpointed" "stop signal received: checkpointed at step [0-9]+" "$TMP/mterm.out"
step=$(sed -n 's/.*checkpointed at step \([0-9]*\).*/\1/p' "$TMP/mterm.out")
expect_eq "latest names that step" "$(printf 'step-%08d.h5' "$step")" "$(cat "$R/checkpoints/latest" 2>/dev/null)"
expect_eq "no temporary file left" "" "$(find "$R/checkpoints" -name '*.tmp.*')"

# 4. metrics.jsonl on a full device.
R="$TMP/full"
mkdir -p "$R"
# metrics.jsonl is opened with O_NOFOLLOW and a run directory holding links is refused
# (issue 48): a device node of its own, as root; without mknod (not root) this part skips.
if ! mknod "$R/metrics.jsonl" c "0x$(stat -c '%t' /dev/full)" "0x$(stat -c '%T' /dev/full)" 2>/dev/null; then
  echo "note: part 4 (metrics on a full device) skipped: mknod needs root (CAP_MKNOD)"
else
  timeout 300 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --log-every 1 --max-steps 5 --run-dir "$R" >"$TMP/full.out" 2>&1
  expect_ne "lost metrics: non-zero status" 0 "$?"
  expect_grep "lost metrics: warned when it happened" "cnnscale: warning: cannot append to $R/metrics.jsonl: No space left on device" "$TMP/full.out"
  expect_grep "lost metrics: error at the end" "cnnscale: error: ([0-9]+) of \1 lines could not be written to $R/metrics.jsonl \(No space left on device\)" "$TMP/full.out"
  lost=$(sed -n 's/.*error: \([0-9]*\) of .*/\1/p' "$TMP/full.out")
  expect_eq "run.json counts them (at least the 5 step lines)" "$lost yes" \
    "$(python3 -c "import json; n = json.load(open('$R/run.json')).get('metrics_lines_lost'); print(n, 'yes' if (n or 0) >= 5 else 'no')" 2>&1)"
fi

# 5. --threads 0.
"$CNNSCALE" train --synthetic --max-steps 1 --threads 0 >"$TMP/t0.out" 2>&1
expect_eq "--threads 0: status" 2 "$?"
expect_grep "--threads 0: explained" "cnnscale: error: --threads 0 is not a thread count" "$TMP/t0.out"
threads_of() { python3 -c "import json; print(json.load(open('$1/run.json'))['threads_per_rank'])" 2>&1; }
OMP_NUM_THREADS=2 "$CNNSCALE" train "${ARGS[@]}" --max-steps 2 --run-dir "$TMP/omp2" >"$TMP/omp2.out" 2>&1
expect_eq "OMP_NUM_THREADS=2, no --threads: 2 threads" 2 "$(threads_of "$TMP/omp2")"
OMP_NUM_THREADS=2 "$CNNSCALE" train "${ARGS[@]}" --max-steps 2 --threads 1 --run-dir "$TMP/omp2t1" >"$TMP/omp2t1.out" 2>&1
expect_eq "--threads wins over OMP_NUM_THREADS" 1 "$(threads_of "$TMP/omp2t1")"
(unset OMP_NUM_THREADS; "$CNNSCALE" train "${ARGS[@]}" --max-steps 2 --run-dir "$TMP/omp0" >"$TMP/omp0.out" 2>&1)
expect_eq "neither: 1 thread" 1 "$(threads_of "$TMP/omp0")"

# 6. checkpoints/latest that names no checkpoint (issue 48 item 9): a name of 300 bytes
#    (an internal error before), 64 MiB of text (read whole before): a warning, and the
#    newest step-N.h5 of the folder resumes.
R="$TMP/latest"
"$CNNSCALE" train "${ARGS[@]}" --max-steps 2 --run-dir "$R" >"$TMP/latest0.out" 2>&1
expect_eq "latest: first run" 0 "$?"
n=2
for what in long huge; do
  if [ $what = long ]; then printf 'step-%0300d.h5\n' 3 >"$R/checkpoints/latest"; else head -c 67108864 /dev/zero | tr '\0' 7 >"$R/checkpoints/latest"; fi
  "$CNNSCALE" train "${ARGS[@]}" --max-steps $((n + 2)) --resume auto --run-dir "$R" >"$TMP/latest-$what.out" 2>&1
  expect_eq "latest ($what): resumed run status" 0 "$?"
  expect_grep "latest ($what): warned" "cnnscale: warning: $R/checkpoints/latest does not hold a checkpoint name \(step-N.h5\); ignoring it" "$TMP/latest-$what.out"
  expect_grep "latest ($what): resumed from the newest checkpoint" "resumed from $R/checkpoints/$(printf 'step-%08d.h5' $n) at step $n" "$TMP/latest-$what.out"
  expect_eq "latest ($what): trained on, latest rewritten" "$(printf 'step-%08d.h5' $((n + 2)))" "$(cat "$R/checkpoints/latest")"
  n=$((n + 2))
done
finish
