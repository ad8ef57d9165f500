#!/usr/bin/env bash
# stop_at_startup.sh — a stop signal while a rank waits at the rendezvous store ends it
# within a second or two with a message (issue 26 item 3: a SIGTERM there was ignored until
# the 300 s timeout; under torchrun that is a 30 s wait and a SIGKILL on every failed
# start). Ranks started with torchrun's variables (no MPI job between them):
#  - rank 1 alone, still connecting to rank 0's store: SIGTERM → exit 2 within 5 s,
#    "stopped by SIGTERM while connecting to the rendezvous store";
#  - rank 0 alone, serving the store and waiting for rank 1: SIGTERM → the same, "while
#    waiting for the other ranks at the rendezvous store";
#  - SIGUSR1 likewise (Slurm's --signal=USR1@T before a time limit);
#  - rank 1 connected to a program that accepts and never answers (another program took the
#    port, CI once: the handshake's 5 s receive timeout held a SIGUSR1 for 5.15 s): the same.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CLEAN=(env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMIX_NAMESPACE -u PMIX_RANK -u SLURM_PROCID
  -u SLURM_NTASKS -u PMI_RANK -u PMI_FD -u TF_CONFIG)
stop_one() {  # NAME RANK SIGNAL WANT-REGEX [PORT]
  local name=$1 rank=$2 sig=$3 port=${5:-} t0 t1 st
  [ -n "$port" ] || port=$(free_port)
  "${CLEAN[@]}" RANK="$rank" WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    "$CNNSCALE" train --synthetic --max-steps 5 --no-tensorboard --run-dir "$TMP/$name" >"$TMP/$name.out" 2>&1 &
  local pid=$!
  sleep 3
  kill -0 "$pid" 2>/dev/null
  expect_eq "$name: still waiting after 3 s" 0 "$?"
  t0=$(date +%s%N)
  kill -"$sig" "$pid"
  wait "$pid"
  st=$?
  t1=$(date +%s%N)
  expect_eq "$name: exit status 2 (a cnnscale error)" 2 "$st"
  expect_eq "$name: ended within 5 s of the signal ($(((t1 - t0) / 1000000)) ms)" 1 "$([ $(((t1 - t0) / 1000000)) -lt 5000 ] && echo 1)"
  expect_grep "$name: says why" "$4" "$TMP/$name.out"
}
stop_one rank1_term 1 TERM "^cnnscale: error: .*stopped by SIGTERM while connecting to the rendezvous store"
stop_one rank0_term 0 TERM "^cnnscale: error: .*stopped by SIGTERM while waiting for the other ranks at the rendezvous store"
stop_one rank1_usr1 1 USR1 "^cnnscale: error: .*stopped by SIGUSR1 while connecting to the rendezvous store"
# A mute listener: accepts every connection, reads nothing, answers nothing.
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])
' >"$TMP/mute.port" &
mute=$!
for _ in $(seq 50); do [ -s "$TMP/mute.port" ] && break; sleep 0.1; done
stop_one rank1_mute 1 USR1 "^cnnscale: error: .*stopped by SIGUSR1 while connecting to the rendezvous store" "$(cat "$TMP/mute.port")"
kill "$mute" 2>/dev/null
finish
