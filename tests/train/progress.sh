#!/usr/bin/env bash
# progress.sh — live progress (issue 19) on 2 ranks:
# 1. In a batch log (stdout and stderr files): plain progress lines with the slowest
#    rank's step time and ETA, no carriage return or terminal escape anywhere;
#    metrics.jsonl progress lines carry slowest_step_ms, total_steps and eta_s.
# 2. On a terminal (util-linux `script` gives the command a pseudo-terminal): one rank
#    alone (200 steps of batch 8) draws the per-epoch bar on stderr (auto); under mpiexec a rank's stderr is a
#    pipe, so auto draws nothing and --progress bar draws it; --progress lines never.
# 3. `cnnscale watch --once` on the finished run shows its rows and the end.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
ARGS=(--synthetic --model "conv(8,3) relu maxpool(2) flatten linear(10)" --batch-size 8 --synthetic-samples 800
  --epochs 2 --log-every 20)
ESC=$'\033'
CR=$'\r'

# ---- 1. batch log ----
timeout 300 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --run-dir "$TMP/run" >"$TMP/log.out" 2>"$TMP/log.err"
expect_eq "batch log: exit status" 0 "$?"
expect_grep "progress line with the slowest rank's step time and ETA" \
  '^epoch 1/2 step 20/100 loss [0-9.]+ lr [0-9.e-]+ [0-9.]+ img/s slowest rank [0-9]+\.[0-9] ms/step( input-bound [0-9]+%)? ETA [0-9]+:[0-9]{2}:[0-9]{2}$' "$TMP/log.out"
expect_eq "no carriage return or escape in stdout" 0 "$(grep -c "[$CR$ESC]" "$TMP/log.out")"
expect_eq "no carriage return or escape in stderr" 0 "$(grep -c "[$CR$ESC]" "$TMP/log.err")"
python3 - "$TMP/run/metrics.jsonl" >"$TMP/m.out" 2>&1 <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
prog = [r for r in rows if "event" not in r]
ok = prog and all(r["slowest_step_ms"] > 0 and r["total_steps"] == 100 and r["eta_s"] >= 0 for r in prog)
print("ok" if ok else "bad", len(prog), prog[-1] if prog else None)
PY
expect_grep "metrics.jsonl: slowest_step_ms, total_steps, eta_s on every progress line" "^ok 6 " "$TMP/m.out"

# ---- 2. terminal ----
if command -v script >/dev/null; then
  q() { printf '%q ' "$@"; }
  script -qfec "$(q "$CNNSCALE" train "${ARGS[@]}")" "$TMP/tty1" >/dev/null 2>&1
  expect_eq "1 rank on a terminal: exit status" 0 "$?"
  expect_grep "1 rank on a terminal: the bar is drawn in place" \
    "${CR}${ESC}\[Kepoch 2/2 \[=+\] 100% step 200/200 ETA" "$TMP/tty1"
  expect_grep "1 rank on a terminal: the bar is erased before the summary" "${CR}${ESC}\[Kdone: 200 steps" "$TMP/tty1"
  script -qfec "$(q timeout 300 $M -n 2 "$CNNSCALE" train "${ARGS[@]}")" "$TMP/tty2" >/dev/null 2>&1
  expect_eq "mpiexec on a terminal, auto: exit status" 0 "$?"
  expect_eq "mpiexec on a terminal, auto: no bar (a rank's stderr is a pipe)" 0 "$(grep -c "$ESC\[K" "$TMP/tty2")"
  script -qfec "$(q timeout 300 $M -n 2 "$CNNSCALE" train "${ARGS[@]}" --progress bar)" "$TMP/tty3" >/dev/null 2>&1
  expect_eq "mpiexec, --progress bar: exit status" 0 "$?"
  expect_grep "mpiexec, --progress bar: the bar" "${ESC}\[Kepoch 1/2 \[.*\] +[0-9]+% step [0-9]+/100" "$TMP/tty3"
  script -qfec "$(q "$CNNSCALE" train "${ARGS[@]}" --progress lines)" "$TMP/tty4" >/dev/null 2>&1
  expect_eq "--progress lines on a terminal: no bar" 0 "$(grep -c "$ESC\[K" "$TMP/tty4")"
else
  echo "no util-linux script: terminal checks skipped"
fi
"$CNNSCALE" train --synthetic --max-steps 1 --progress fancy >"$TMP/e1" 2>&1
expect_eq "--progress fancy: exit 2" 2 "$?"
expect_grep "--progress fancy: explained" "^cnnscale: error: --progress fancy is not supported; use auto, bar or lines" "$TMP/e1"

# ---- 3. watch the finished run ----
"$CNNSCALE" watch "$TMP/run" --once >"$TMP/w.out" 2>&1
expect_eq "watch --once: exit 0" 0 "$?"
expect_grep "watch --once: the end" "^finished: 100 steps in " "$TMP/w.out"
expect_eq "watch --once: the last rows" "20 40 50 60 80 100" "$(grep -E '^ +[0-9]+ +[12] ' "$TMP/w.out" | awk '{print $1}' | xargs)"
finish
