#!/usr/bin/env bash
# allreduce_watchdog.sh — `cnnscale allreduce` has the training's --collective-timeout
# watchdog (issue 28 item 4): it used to wait forever for a rank that stopped.
#  1. rank 1 SIGSTOPped in the middle of a long sweep (-n 200000 of 1 MiB): rank 0 names
#     rank 1 ("went silent") within the timeout plus a few seconds, the job ends with
#     status 3;
#  2. a sweep that as a whole takes longer than --collective-timeout finishes (each sum
#     is watched on its own).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
$M -n 2 "$CNNSCALE" allreduce -b 1M -e 1M -n 200000 --collective-timeout 4 >"$TMP/stop.out" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do  # rank 1: the cnnscale allreduce process that is not the lower pid's
  pids=$(for p in $(pgrep -x cnnscale); do tr '\0' ' ' <"/proc/$p/cmdline" | grep -q "cnnscale allreduce -b 1M" && echo "$p"; done | sort -n)
  [ "$(wc -w <<<"$pids")" = 2 ] && grep -q "size(B)" "$TMP/stop.out" && victim=$(tail -1 <<<"$pids") && break
  sleep 0.1
done
expect_ne "both ranks running" "" "$victim"
sleep 1
kill -STOP "$victim"
t0=$(date +%s)
for _ in $(seq 1 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
t1=$(date +%s)
kill -CONT "$victim" 2>/dev/null
kill -9 "$victim" 2>/dev/null
wait "$job"
st=$?
expect_eq "a stopped rank ends the job within 15 s ($((t1 - t0)) s)" 1 "$([ $((t1 - t0)) -lt 15 ] && echo 1)"
expect_ne "exit status not 0" 0 "$st"
expect_grep "rank 0 names the silent rank" \
  "^cnnscale: error: rank 0 on .* waited [0-9]+ s in the allreduce benchmark's sums .*rank 1 on .* went silent" "$TMP/stop.out"

t0=$(date +%s)
timeout 300 $M -n 2 "$CNNSCALE" allreduce -b 4M -e 4M -n 3000 --collective-timeout 2 >"$TMP/long.out" 2>&1
expect_eq "a sweep longer than the timeout: exit status 0" 0 "$?"
t1=$(date +%s)
echo "the sweep took $((t1 - t0)) s (timeout 2 s)"
expect_grep "a sweep longer than the timeout: its row, no wrong element" "^ +4194304 +1048576 +float .* 0$" "$TMP/long.out"
finish
