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
#  5. Issue 39 item 2: 100 strangers that start a handshake, never finish it and reconnect
#     at once when closed (they used to hold all 72 connections a world of 2 may have, and
#     both ranks failed blaming the address or WORLD_SIZE): with the token set, rank 1
#     still joins and both train; rank 0 warns about the strangers.
#  7. (run before 6) Issue 48 item 4: 900 connections that never send a byte, reconnecting
#     when dropped: rank 1 joins within seconds (silent ones make room after 0.25 s).
#  6. Issue 39 items 2, 3: rank 0 alone, met by a rank 1 with another token, one without a
#     token, and a flood of strangers: it warns about each as it happens, and its final
#     error names each (with the address) before the advice about WORLD_SIZE.
#  8. Issue 48 item 14: a holder of the job's token claims rank 1 as host 'impostor' from this
#     host, before the real rank 1 (rank 0 used to blame MASTER_ADDR alone and exit at once,
#     and the real rank 1 then waited out its timeout): rank 0 serves 5 s more, the real rank 1
#     gets "joined twice" within seconds, naming the first claim's host; rank 0 warns at once
#     and its error names both claims (host and address), not MASTER_ADDR. Alone (no real
#     rank 1), rank 0's loopback error also names the claim and what it may be.
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
key, val = b"cnnscale/join/1", b"stranger\n2"
req = b"c" + struct.pack("<I", len(key)) + key + struct.pack("<I", len(val)) + val
s.sendall(b"CNSTORE3" + b"\1" + b"n" * 32 + b"x" * 32 + req)  # claims a token (a made-up proof), then rank 1
back = b""
while len(back) < 41:
    got = s.recv(41 - len(back))
    if not got:
        break
    back += got
mode = back[8] if len(back) == 41 else -1
rest = s.recv(100)
print("stranger: mode=%d closed=%s" % (mode, rest == b""))
PY
# Strangers that start a handshake and never finish it: N connections, each reconnecting
# at once when the store closes it, until killed; READY_FILE is written once all are open.
cat >"$TMP/flood.py" <<'PY'
import selectors, socket, sys, time
port, n, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
silent = len(sys.argv) > 4 and sys.argv[4] == "silent"  # not a byte, ever
sel = selectors.DefaultSelector()
def half_open():
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if not silent:
                s.sendall(b"CNSTORE")  # the start of a hello, never the rest
            sel.register(s, selectors.EVENT_READ)
            return
        except OSError:  # the store is not up yet
            time.sleep(0.05)
for _ in range(n):
    half_open()
open(ready, "w").write("open\n")
while True:
    for key, _ in sel.select():
        try:
            data = key.fileobj.recv(100)
        except OSError:
            data = b""
        if not data:
            sel.unregister(key.fileobj)
            key.fileobj.close()
            half_open()
PY
wait_for() { for _ in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.1; done; }

# 2. The token file in --run-dir.
port=$(free_port)
rank 0 "$port" "$TMP/f0.out" -- "${TRAIN[@]}" --collective-timeout 20 --run-dir "$TMP/runf" &
r0=$!
python3 "$TMP/stranger.py" "$port" >"$TMP/stranger.out" 2>&1
expect_grep "token file: the stranger is refused at its hello" "stranger: mode=2 closed=True" "$TMP/stranger.out"
perm=$(stat -c %a "$TMP/runf/.rendezvous-token" 2>/dev/null)
expect_eq "token file: mode 0600 while the store serves" 600 "$perm"
rank 1 "$port" "$TMP/f1.out" -- "${TRAIN[@]}" --run-dir "$TMP/runf"
expect_eq "token file: the real rank 1 joins and trains" 0 "$?"
wait $r0
expect_eq "token file: rank 0 trains" 0 "$?"
expect_grep "token file: rank 0 warned about the stranger" \
  "rendezvous store: refused a client at 127.0.0.1 that presented another rendezvous token" "$TMP/f0.out"
expect_grep "token file: 2 ranks trained" "2 rank\(s\) on 1 node\(s\)" "$TMP/f0.out"
expect_eq "token file: removed after the run" "" "$(ls -A "$TMP/runf" | grep rendezvous-token)"

# 3. CNNSCALE_RENDEZVOUS_TOKEN.
TOK=CNNSCALE_RENDEZVOUS_TOKEN=0123456789abcdef0123456789abcdef
port=$(free_port)
rank 0 "$port" "$TMP/e0.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 30 &
r0=$!
python3 "$TMP/stranger.py" "$port" >"$TMP/stranger2.out" 2>&1
expect_grep "env token: the stranger is refused" "stranger: mode=2 closed=True" "$TMP/stranger2.out"
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
expect_grep "env token: rank 0 warned about the rank with another token" \
  "^cnnscale: warning: rendezvous store: refused a client at 127.0.0.1 that presented another rendezvous token" "$TMP/e0.out"
expect_grep "env token: rank 0 warned about the rank without a token" \
  "^cnnscale: warning: rendezvous store: refused a client at 127.0.0.1 that presented no rendezvous token" "$TMP/e0.out"
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

# 5. A flood of half-open handshakes with the token set: rank 1 still joins.
port=$(free_port)
rank 0 "$port" "$TMP/h0.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 20 &
r0=$!
python3 "$TMP/flood.py" "$port" 100 "$TMP/flood5.ready" >"$TMP/flood5.out" 2>&1 &
flood=$!
wait_for "$TMP/flood5.ready"
rank 1 "$port" "$TMP/h1.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 20
expect_eq "flood: rank 1 joins and trains" 0 "$?"
wait $r0
expect_eq "flood: rank 0 trains" 0 "$?"
kill $flood
wait $flood 2>/dev/null
expect_grep "flood: 2 ranks trained" "2 rank\(s\) on 1 node\(s\)" "$TMP/h0.out"
expect_grep "flood: rank 0 warned about the strangers" \
  "^cnnscale: warning: rendezvous store: dropped a connection from 127.0.0.1 that did not prove the job's rendezvous token within 2 s" \
  "$TMP/h0.out"

# 7. Issue 48 item 4: 900 connections that never send a byte and reconnect at once when
#    dropped (the 64-slot handshake pool served the kernel's queue in order, 2 s a slot, and
#    1,000 of them kept rank 1 out past --collective-timeout 30): rank 1 joins within
#    seconds, both train, and rank 0 says what it dropped.
port=$(free_port)
rank 0 "$port" "$TMP/s0.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 30 &
r0=$!
python3 "$TMP/flood.py" "$port" 900 "$TMP/flood7.ready" silent >"$TMP/flood7.out" 2>&1 &
flood=$!
wait_for "$TMP/flood7.ready"
t0=$(date +%s)
rank 1 "$port" "$TMP/s1.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 30
expect_eq "silent flood: rank 1 joins and trains" 0 "$?"
took=$(($(date +%s) - t0))
wait $r0
expect_eq "silent flood: rank 0 trains" 0 "$?"
kill $flood
wait $flood 2>/dev/null
expect_eq "silent flood: rank 1 was in and done within 20 s (took $took s)" 1 "$([ "$took" -le 20 ] && echo 1)"
expect_grep "silent flood: rank 0 says what it dropped" \
  "^cnnscale: warning: rendezvous store: dropped a connection from 127.0.0.1 that sent nothing for 250 ms while others waited" \
  "$TMP/s0.out"

# 8. Issue 48 item 14: a token holder claims rank 1 first. The impostor speaks the store's
#    protocol with the token (HMAC handshake), creates rank 1's join key as host 'impostor'
#    and holds its connection.
cat >"$TMP/impostor.py" <<'PY'
import hashlib, hmac, os, socket, struct, sys, time
port, token = int(sys.argv[1]), sys.argv[2].encode()
mac = lambda label, a, b: hmac.new(token, label + a + b, hashlib.sha256).digest()
deadline = time.time() + 20
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        break
    except OSError:
        if time.time() > deadline:
            print("impostor: no store"); sys.exit(1)
        time.sleep(0.1)
def recv(n):
    b = b""
    while len(b) < n:
        got = s.recv(n - len(b))
        if not got: raise SystemExit("impostor: closed")
        b += got
    return b
cn = os.urandom(32)
s.sendall(b"CNSTORE3\1" + cn + mac(b"cnnscale-hello", cn, bytes(32)))
back = recv(41)
assert back[8] == 1, "impostor: mode %d" % back[8]
sn = back[9:41]
s.sendall(mac(b"cnnscale-client", sn, cn))
assert recv(1) == b"\1" and recv(32) == mac(b"cnnscale-server", cn, sn)
key, val = b"cnnscale/join/1", b"impostor\n2"
s.sendall(b"c" + struct.pack("<I", len(key)) + key + struct.pack("<I", len(val)) + val)
print("impostor: claimed rank 1, reply %d" % recv(1)[0], flush=True)
time.sleep(60)
PY
port=$(free_port)
rank 0 "$port" "$TMP/i0.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 20 &
r0=$!
python3 "$TMP/impostor.py" "$port" "${TOK#*=}" >"$TMP/impostor.out" 2>&1 &
imp=$!
for _ in $(seq 100); do grep -q "claimed" "$TMP/impostor.out" && break; sleep 0.1; done
expect_grep "impostor: holds the token and claimed rank 1" "impostor: claimed rank 1, reply 1" "$TMP/impostor.out"
sleep 1  # rank 0 has seen every rank join
t0=$(date +%s)
rank 1 "$port" "$TMP/i1.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 20
expect_eq "impostor: the real rank 1 exit status" 2 "$?"
took=$(($(date +%s) - t0))
expect_eq "impostor: the real rank 1 is told within 5 s (took $took s)" 1 "$([ "$took" -le 5 ] && echo 1)"
expect_grep "impostor: the real rank 1 gets 'joined twice', naming the first claim's host" \
  "^cnnscale: error: rank 1 joined the rendezvous at 127.0.0.1:$port .* twice: a process on host 'impostor' had already joined as rank 1" \
  "$TMP/i1.out"
wait $r0
expect_eq "impostor: rank 0 exit status" 2 "$?"
kill $imp 2>/dev/null
wait $imp 2>/dev/null
H=$(hostname)
expect_grep "impostor: rank 0 warned at once, naming both claims" \
  "^cnnscale: warning: rendezvous store: rank 1 was claimed again, by host '$H' at 127.0.0.1; it had joined from host 'impostor' at 127.0.0.1" \
  "$TMP/i0.out"
expect_grep "impostor: rank 0's error names the claim and the second one, not MASTER_ADDR" \
  "^cnnscale: error: rank 1 joined the rendezvous at .* as host 'impostor' from 127.0.0.1 \(an address of this host, $H\), then a second process claimed rank 1 as host '$H' from 127.0.0.1 \(refused: \"joined twice\"\). Two processes were started as rank 1, or the first is not this job's" \
  "$TMP/i0.out"
expect_eq "impostor: rank 0 does not blame MASTER_ADDR" 0 "$(grep -c 'set MASTER_ADDR' "$TMP/i0.out")"
# Alone: no real rank 1 comes; rank 0 names the claim at its timeout.
port=$(free_port)
rank 0 "$port" "$TMP/j0.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 4 &
r0=$!
python3 "$TMP/impostor.py" "$port" "${TOK#*=}" >"$TMP/impostor2.out" 2>&1 &
imp=$!
wait $r0
expect_eq "impostor alone: rank 0 exit status" 2 "$?"
kill $imp 2>/dev/null
wait $imp 2>/dev/null
expect_grep "impostor alone: rank 0's loopback error names the claim and what it may be" \
  "^cnnscale: error: rank 0 on $H reaches the rendezvous store .* through the loopback address 127.0.0.1.*\. Yet rank 1 joined as host 'impostor' from 127.0.0.1 \(this host\): if no rank of this job runs here under that name, a process that holds the job's rendezvous token claimed it" \
  "$TMP/j0.out"

# 6. Rank 0 alone: a rank 1 with another token, one without, strangers; rank 0 names each.
port=$(free_port)
rank 0 "$port" "$TMP/a0.out" "$TOK" -- "${TRAIN[@]}" --collective-timeout 12 &
r0=$!
python3 "$TMP/flood.py" "$port" 10 "$TMP/flood6.ready" >"$TMP/flood6.out" 2>&1 &
flood=$!
rank 1 "$port" "$TMP/a_wrong.out" CNNSCALE_RENDEZVOUS_TOKEN=not-the-jobs-token-at-all -- "${TRAIN[@]}" \
  --collective-timeout 10
expect_eq "rank 0 alone: a rank 1 with another token ends" 2 "$?"
rank 1 "$port" "$TMP/a_none.out" -- "${TRAIN[@]}" --collective-timeout 10
expect_eq "rank 0 alone: a rank 1 without a token ends" 2 "$?"
wait $r0
expect_eq "rank 0 alone: exit status 2" 2 "$?"
kill $flood
wait $flood 2>/dev/null
expect_grep "rank 0 alone: warned about the other token at once" \
  "^cnnscale: warning: rendezvous store: refused a client at 127.0.0.1 that presented another rendezvous token" "$TMP/a0.out"
expect_grep "rank 0 alone: warned about the missing token at once" \
  "^cnnscale: warning: rendezvous store: refused a client at 127.0.0.1 that presented no rendezvous token" "$TMP/a0.out"
expect_grep "rank 0 alone: its error names the other token, the address and the fix" \
  "^cnnscale: error: rank 0: rank\(s\) 1 of 2 .* did not join .*; meanwhile rank 0's rendezvous store refused 1 client\(s\) that presented another rendezvous token \(from 127.0.0.1\): set CNNSCALE_RENDEZVOUS_TOKEN to the same value on every rank" \
  "$TMP/a0.out"
expect_grep "rank 0 alone: its error names the missing token" \
  "^cnnscale: error: .*refused 1 client\(s\) that presented no rendezvous token \(from 127.0.0.1\)" "$TMP/a0.out"
expect_grep "rank 0 alone: its error names the strangers" \
  "^cnnscale: error: .*dropped [0-9]+ connection\(s\) that did not prove the job's rendezvous token within 2 s \(or sent nothing for 0.25 s while others waited\) \(the last from 127.0.0.1\): strangers are connecting" \
  "$TMP/a0.out"
finish
