#!/usr/bin/env bash
# nan-guard-cost.sh — what the CPU model's NaN guard costs per step (issue 28 item 2):
# the scans of the tensors a ReLU/max-pool would drop a NaN from (nn/net.hpp) and of the
# summed gradients (train/trainer.cpp). Runs `cnnscale train --synthetic` with the guard
# on and with CNNSCALE_NAN_GUARD=off, alternating (on-off, off-on, ...), ROUNDS times each, and prints each
# run's median step time and the ratio of the medians over rounds.
# Usage: bench/nan-guard-cost.sh [--build DIR] [--rounds N] [--ranks N] -- TRAIN_ARGS...
#   e.g. bench/nan-guard-cost.sh --rounds 5 -- --model mnist_cnn --batch-size 64 --max-steps 200
set -euo pipefail
BUILD=build ROUNDS=5 RANKS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "nan-guard-cost: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
CNNSCALE="$BUILD/bin/cnnscale"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # GUARD TRAIN_ARGS... → median step ms
  local out g=$1
  shift
  out=$(CNNSCALE_NAN_GUARD=$g mpiexec --oversubscribe --bind-to none -x CNNSCALE_NAN_GUARD -n "$RANKS" \
    "$CNNSCALE" train --synthetic "$@" 2>&1 | grep '^done:') || { echo "nan-guard-cost: a run failed" >&2; exit 1; }
  sed -E 's/.* step ([0-9.]+) ms.*/\1/' <<<"$out"
}
echo "nan-guard-cost: cnnscale train --synthetic $* ($RANKS rank(s)), $ROUNDS alternating rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
on=() off=()
for ((r = 1; r <= ROUNDS; r++)); do  # ABBA: the order alternates, so a drift or a first-run cost cancels
  if ((r % 2)); then
    a=$(run on "$@")
    b=$(run off "$@")
  else
    b=$(run off "$@")
    a=$(run on "$@")
  fi
  on+=("$a") off+=("$b")
  echo "round $r: guard on $a ms/step, off $b ms/step"
done
python3 - "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
m_on, m_off = statistics.median(on), statistics.median(off)
print(f"median step: guard on {m_on:.3f} ms, off {m_off:.3f} ms: cost {100 * (m_on / m_off - 1):+.2f} % "
      f"(spread of the off runs: {100 * (max(off) - min(off)) / m_off:.1f} %)")
PY
