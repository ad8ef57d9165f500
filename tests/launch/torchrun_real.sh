#!/usr/bin/env bash
# torchrun_real.sh — a real torchrun (PyPI torch ≥ 2, from the venv that
# scripts/python-venv.sh makes once under /var/cache/cnnscale; CNNSCALE_TORCH_PYTHON
# overrides) starts cnnscale as the PyTorch guides do (issue 26 items 1 and 2).
# torchrun ≥ 2.0 serves its own c10d TCPStore at MASTER_ADDR:MASTER_PORT and tells the
# workers so (TORCHELASTIC_USE_AGENT_STORE=True); cnnscale's ranks meet there as its
# clients instead of serving a store of their own on the same port (which failed every
# launch, "port already in use", before this):
#  1. `torchrun --standalone --nproc_per_node=2 --no-python cnnscale train` trains; the
#     same losses at every step as `mpiexec -n 2` and parameters within 1e-5 (Gloo and
#     MPI sum in different orders);
#  2. `python -m torch.distributed.run --master-addr/--master-port` (static rendezvous)
#     and two torchrun agents meeting with --rdzv-backend=c10d (--nnodes=2) train the
#     same losses;
#  3. `torchrun ... cnnscale env` prints one line per rank (launcher=torchrun);
#  4. --max-restarts 1 with rank 1 SIGKILLed after its first checkpoint: torchrun
#     restarts the group (TORCHELASTIC_RESTART_COUNT=1), which resumes from the run
#     directory, never reads the first group's keys, and ends bitwise equal (h5diff of
#     /model and /optimizer) to the uninterrupted run of part 1.
# Without torch ≥ 2 the test prints SKIP and exits 77 (it checks nothing then; CI fails).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
PY=${CNNSCALE_TORCH_PYTHON:-/var/cache/cnnscale/pypi-venv/bin/python}
if ! TV=$("$PY" -c 'import torch, torch.distributed.run; print(torch.__version__)' 2>/dev/null) ||
  [ "${TV%%.*}" -lt 2 ]; then
  echo "SKIP: no PyPI torch >= 2 at $PY (scripts/python-venv.sh makes it; or set CNNSCALE_TORCH_PYTHON)"
  exit 77
fi
echo "torch $TV at $PY"
TORCHRUN="$(dirname "$PY")/torchrun"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
STEPS=20
TRAIN=(train --synthetic --model mnist_cnn --max-steps $STEPS --batch-size 32 --lr 0.05 --momentum 0.9 --seed 7
  --log-every 1 --checkpoint-every 5)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
losses() { grep -Eo 'step [0-9]+/[0-9]+ loss [0-9.]+' "$1"; }
# torchrun's own launch lines (run.py warnings) stay out of the comparisons above.
export OMP_NUM_THREADS=1
LAST=checkpoints/step-000000$STEPS.h5

# 1. --standalone against mpiexec.
timeout 300 "$TORCHRUN" --standalone --nproc_per_node=2 --no-python "$CNNSCALE" "${TRAIN[@]}" --run-dir "$TMP/t1" \
  >"$TMP/t1.out" 2>&1
expect_eq "torchrun --standalone exit status" 0 "$?"
expect_grep "torchrun: 2 ranks over gloo" "2 rank\(s\) on 1 node\(s\), backend gloo" "$TMP/t1.out"
expect_eq "torchrun: $STEPS losses logged" "$STEPS" "$(losses "$TMP/t1.out" | wc -l)"
if grep -q "already in use" "$TMP/t1.out"; then bad "torchrun: a rank tried to serve on torchrun's port"; fi
timeout 300 $M -n 2 "$CNNSCALE" "${TRAIN[@]}" --run-dir "$TMP/m" >"$TMP/m.out" 2>&1
expect_eq "mpiexec -n 2 exit status" 0 "$?"
expect_eq "torchrun == mpiexec: the same loss at every step" "$(losses "$TMP/m.out")" "$(losses "$TMP/t1.out")"
expect_ckpt_close "torchrun == mpiexec" "$TMP/m/$LAST" "$TMP/t1/$LAST"
expect_eq "no token file left in the run directory" "" "$(ls -A "$TMP/t1" | grep rendezvous-token)"

# 2a. python -m torch.distributed.run with --master-addr/--master-port (static rendezvous).
port=$(free_port)
timeout 300 "$PY" -m torch.distributed.run --nproc_per_node=2 --master-addr=127.0.0.1 --master-port="$port" \
  --no-python "$CNNSCALE" "${TRAIN[@]}" --run-dir "$TMP/t2" >"$TMP/t2.out" 2>&1
expect_eq "python -m torch.distributed.run --master-port exit status" 0 "$?"
expect_eq "static rendezvous: the same losses" "$(losses "$TMP/t1.out")" "$(losses "$TMP/t2.out")"
# 2b. Two agents (--nnodes=2, one worker each) meeting at a c10d rendezvous endpoint.
port=$(free_port)
for n in 0 1; do
  timeout 300 "$TORCHRUN" --nnodes=2 --nproc_per_node=1 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$port \
    --rdzv-id=cnnscale-test --no-python "$CNNSCALE" "${TRAIN[@]}" --run-dir "$TMP/t3" >"$TMP/t3.$n.out" 2>&1 &
  eval "agent$n=$!"
done
wait "$agent0"
expect_eq "c10d agent 0 exit status" 0 "$?"
wait "$agent1"
expect_eq "c10d agent 1 exit status" 0 "$?"
expect_eq "c10d rendezvous, 2 agents: the same losses" "$(losses "$TMP/t1.out")" \
  "$(cat "$TMP/t3.0.out" "$TMP/t3.1.out" | losses /dev/stdin)"

# 3. env: one line per rank, as under srun.
timeout 120 "$TORCHRUN" --standalone --nproc_per_node=2 --no-python "$CNNSCALE" env >"$TMP/env.out" 2>"$TMP/env.err"
expect_eq "torchrun env exit status" 0 "$?"
expect_eq "torchrun env: one line per rank" "2" "$(grep -c '^launcher=torchrun rank=[01] size=2 ' "$TMP/env.out")"
expect_grep "torchrun env: rank 1's line" '^launcher=torchrun rank=1 size=2 local_rank=1 local_size=2 ' "$TMP/env.out"

# 4. A worker killed after the first checkpoint; torchrun restarts the group once.
cat >"$TMP/worker.sh" <<SH
#!/bin/sh
if [ "\$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "\$RANK" = 1 ]; then
  ( while [ ! -e "$TMP/t4/checkpoints/step-00000005.h5" ]; do sleep 0.05; done; kill -9 \$\$ ) &
fi
exec "$CNNSCALE" "\$@"
SH
chmod +x "$TMP/worker.sh"
timeout 600 "$TORCHRUN" --standalone --nproc_per_node=2 --max-restarts=1 --no-python "$TMP/worker.sh" "${TRAIN[@]}" \
  --run-dir "$TMP/t4" >"$TMP/t4.out" 2>&1
expect_eq "torchrun --max-restarts 1 exit status" 0 "$?"
# torchrun names the first failure its monitor sees: rank 1's kill, or rank 0's own error
# when rank 0 found its peer gone first (a Gloo write or read failing: never SIGPIPE's
# silent exitcode -13, which it was before cnnscale ignored SIGPIPE).
expect_grep "torchrun saw rank 1 killed, or rank 0 fail on its lost peer (then restarted the group)" \
  "failed \(exitcode: -9\) local_rank: 1|failed \(exitcode: [1-9][0-9]*\) local_rank: 0" "$TMP/t4.out"
expect_eq "no rank ended by SIGPIPE" 0 "$(grep -c 'exitcode: -13' "$TMP/t4.out")"
if grep -qE 'failed \(exitcode: [1-9][0-9]*\) local_rank: 0' "$TMP/t4.out"; then
  expect_grep "rank 0 said why it failed: a collective over Gloo" "^cnnscale: error: rank 0: .* over Gloo failed" "$TMP/t4.out"
fi
expect_grep "the restarted group resumed from the run directory" "resumed from .*step-000000[0-9][0-9]\.h5 at step" \
  "$TMP/t4.out"
expect_ckpt_bitwise "killed and restarted == uninterrupted" "$TMP/t1/$LAST" "$TMP/t4/$LAST"
finish
