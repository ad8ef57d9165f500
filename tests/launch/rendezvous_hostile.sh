#!/usr/bin/env bash
# rendezvous_hostile.sh — the rendezvous store on a shared network (issue 26 items 4, 6),
# with real cnnscale ranks started with torchrun's variables (no MPI job between them):
#  1. WORLD_SIZE=2000000000 on rank 0: refused at once naming the limit (it used to grow
#     rank 0 to 24 GB until the kernel killed it); WORLD_SIZE=99999999999: refused by name.
#  2. With --run-dir, rank 0 writes a token file (mode 0600) and serves only clients that
#     prove they hold it: a stranger that claims rank 1 (speaking the store's protocol,
#     without the token) is refused, and the real rank 1 then joins and both train; the
#     token file is gone after the run.
#  3. CNNSCALE_RENDEZVOUS_TOKEN: the same with the environment's token; a rank with a
#     different token, and one without any, each end with an error naming the variable.
#  4. A rank whose --run-dir is another directory (not shared with rank 0) cannot read the
#     token: it ends within --collective-timeout naming the token file and the fix.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CLEAN=(env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMIX_NAMESPACE -u PMIX_RANK -u SLURM_PROCID
  -u SLURM_NTASKS -u PMI_RANK -u PMI_FD -u TF_CONFIG -u CNNSCALE_RENDEZVOUS_TOKEN)
TRAIN=(train --synthetic --max-steps 3 --batch-size 16 --no-tensorboard)
rank() {  # RANK PORT OUT [VAR=VALUE...] -- ARGS...
  local r=$1 p=$2 out=$3
  shift 3
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  "${CLEAN[@]}" "${vars[@]}" RANK="$r" WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$p" \
    timeout 120 "$CNNSCALE" "$@" >"$out" 2>&1
}

# 1. Absurd world sizes.
port=$(free_port)
t0=$(date +%s)
"${CLEAN[@]}" RANK=0 WORLD_SIZE=2000000000 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 60 "$CNNSCALE" \
  "${TRAIN[@]}" >"$TMP/huge.out" 2>&1
expect_eq "WORLD_SIZE=2000000000: exit status 2" 2 "$?"
expect_eq "WORLD_SIZE=2000000000: refused within 10 s" 1 "$([ $(($(date +%s) - t0)) -lt 10 ] && echo 1)"
expect_grep "WORLD_SIZE=2000000000: names the limit" \
  "^cnnscale: error: WORLD_SIZE=2000000000: ranks that meet at a rendezvous store .* are limited to 4096" "$TMP/huge.out"
"${CLEAN[@]}" RANK=0 WORLD_SIZE=99999999999 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 60 "$CNNSCALE" \
  "${TRAIN[@]}" >"$TMP/wrap.out" 2>&1
expect_eq "WORLD_SIZE=99999999999: exit status 2" 2 "$?"
expect_grep "WORLD_SIZE=99999999999: names it" "^cnnscale: error: .*WORLD_SIZE=99999999999" "$TMP/wrap.out"

# A stranger on the network: speaks the store's protocol, has no token, claims rank 1.
cat >"$TMP/stranger.py" <<'PY'
import socket, struct, sys, time
port = int(sys.argv[1])
deadline = time.time() + 20
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        break
    except OSError:
        if time.time() > deadline:
            print("stranger: no store"); sys.exit(1)
        time.sleep(0.1)
s.sendall(b"CNSTORE2" + b"\0" + b"n" * 32)
back = b""
while len(back) < 41:
    back += s.recv(41 - len(back))
mode = back[8]
key, val = b"cnnscale/join/1", b"stranger\n2"
req = b"c" + struct.pack("<I", len(key)) + key + struct.pack("<I", len(val)) + val
s.sendall(b"x" * 32 + req)  # a made-up proof, then the claim
verdict = s.recv(1)
rest = s.recv(100)
print("stranger: mode=%d verdict=%r closed=%s" % (mode, verdict, rest == b""))
PY

# 2. The token file in --run-dir.
port=$(free_port)
rank 0 "$port" "$TMP/f0.out" -- "${TRAIN[@]}" --collective-timeout 20 --run-dir "$TMP/runf" &
r0=$!
python3 "$TMP/stranger.py" "$port" >"$TMP/stranger.out" 2>&1
expect_grep "token file: the stranger is asked for a proof and refused" \
  "stranger: mode=1 verdict=b'\\\\x00' closed=True" "$TMP/stranger.out"
perm=$(stat -c %a "$TMP/runf/.rendezvous-token" 2>/dev/null)
expect_eq "token file: mode 0600 while the store serves" 600 "$perm"
rank 1 "$port" "$TMP/f1.out" -- "${TRAIN[@]}" --run-dir "$TMP/runf"
expect_eq "token file: the real rank 1 joins and trains" 0 "$?"
wait $r0
expect_eq "token file: rank 0 trains" 0 "$?"
expect_grep "token file: rank 0 warned about the stranger" \
  "rendezvous store: refused a client at 127.0.0.1 that does not hold the job's rendezvous token" "$TMP/f0.out"
expect_grep "token file: 2 ranks trained" "2 rank\(s\) on 1 node\(s\)" "$TMP/f0.out"
expect_eq "token file: removed after the run" "" "$(ls -A "$TMP/runf" | grep rendezvous-token)"

# 3. CNNSCALE_RENDEZVOUS_TOKEN.
TOK=CNNSCALE_RENDEZVOUS_TOKEN=0123456789abcdef0123456789abcdef
port=$(free_port)
rank 0 "$port" "$TMP/e0.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 30 &
r0=$!
python3 "$TMP/stranger.py" "$port" >"$TMP/stranger2.out" 2>&1
expect_grep "env token: the stranger is refused" "stranger: mode=1 verdict=b'\\\\x00' closed=True" "$TMP/stranger2.out"
rank 1 "$port" "$TMP/e_wrong.out" CNNSCALE_RENDEZVOUS_TOKEN=not-the-jobs-token-at-all -- "${TRAIN[@]}" \
  --collective-timeout 3
expect_eq "env token: a wrong token, exit status 2" 2 "$?"
expect_grep "env token: a wrong token is named" "^cnnscale: error: .*refused this rank's CNNSCALE_RENDEZVOUS_TOKEN" \
  "$TMP/e_wrong.out"
rank 1 "$port" "$TMP/e_none.out" -- "${TRAIN[@]}" --collective-timeout 3
expect_eq "env token: no token, exit status 2" 2 "$?"
expect_grep "env token: no token is named" "^cnnscale: error: .*requires the job's token.*CNNSCALE_RENDEZVOUS_TOKEN" \
  "$TMP/e_none.out"
rank 1 "$port" "$TMP/e1.out" "$TOK" -- "${TRAIN[@]}"
expect_eq "env token: the real rank 1 joins and trains" 0 "$?"
wait $r0
expect_eq "env token: rank 0 trains" 0 "$?"
"${CLEAN[@]}" CNNSCALE_RENDEZVOUS_TOKEN=short RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
  timeout 60 "$CNNSCALE" "${TRAIN[@]}" >"$TMP/short.out" 2>&1
expect_eq "env token: a short token, exit status 2" 2 "$?"
expect_grep "env token: a short token is refused" "^cnnscale: error: CNNSCALE_RENDEZVOUS_TOKEN has 5 bytes; .*at least 16" \
  "$TMP/short.out"

# 4. A run directory that is not shared: the token cannot be read.
port=$(free_port)
rank 0 "$port" "$TMP/n0.out" -- "${TRAIN[@]}" --run-dir "$TMP/runA" --collective-timeout 4 &
r0=$!
rank 1 "$port" "$TMP/n1.out" -- "${TRAIN[@]}" --run-dir "$TMP/runB" --collective-timeout 4
expect_eq "unshared run dir: rank 1 exit status 2" 2 "$?"
expect_grep "unshared run dir: names the token file and the fix" \
  "^cnnscale: error: .*the token file $TMP/runB/.rendezvous-token did not appear .*a file system every node shares" "$TMP/n1.out"
wait $r0
expect_eq "unshared run dir: rank 0 exit status 2" 2 "$?"
finish
