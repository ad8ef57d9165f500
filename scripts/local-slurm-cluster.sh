#!/usr/bin/env bash
# local-slurm-cluster.sh — a real Slurm cluster on one Linux machine, for trying and
# testing cnnscale without a cluster (see docs/local-slurm.md).
#
#   local-slurm-cluster.sh up N     start munged, slurmctld and N slurmd "nodes"
#   local-slurm-cluster.sh status   nodes, partition and jobs (exit 3 when not up)
#   local-slurm-cluster.sh down     stop and remove everything `up` made
#   local-slurm-cluster.sh env      print the `export SLURM_CONF=...` line for your shell
#
# Each node cnK is a slurmd in its own network namespace (address 10.201.0.(10+K) on
# the bridge cnnscale-br0, whose own address 10.201.0.1 carries slurmctld), its own
# UTS namespace (hostname cnK) and its own mount namespace (private /tmp, /dev/shm
# and /etc/hosts). One partition `cpu` holds all nodes; MpiDefault=pmix, so
# `srun -N2 ...` runs real PMIx + Open MPI over TCP between the namespaces.
#
# Needs root (namespaces, bridge) and the Debian packages slurm-wlm, munge, iproute2,
# util-linux. Nothing outside $CNNSCALE_SLURM_DIR, the bridge, the veth pairs and the
# namespaces is created or changed: the system's /etc/slurm and /etc/munge are not
# used (clients find this cluster through SLURM_CONF, see `env`).
#
# Environment (defaults in brackets):
#   CNNSCALE_SLURM_DIR     state, config, logs, per-node /tmp   [/var/tmp/cnnscale-slurm]
#   CNNSCALE_SLURM_SUBNET  first three octets of a private /24  [10.201.0]
#   CNNSCALE_SLURM_CPUS    CPUs each node advertises            [16]
#   CNNSCALE_SLURM_PORT    slurmctld port; slurmd uses PORT+1    [6917]
#   CNNSCALE_SLURM_GPUS    GPUs each node declares as gres gpu [0: none, no gres]:
#                          auto = one per /dev/nvidiaN of this machine, or a count
#                          (/dev/nvidia0..count-1 must exist). Every node declares the
#                          same devices (they are this machine's), so a job uses them
#                          from one node at a time: for binding tests (srun -N1
#                          --gpus-per-task=1 / --gres=gpu:N), not for multi-node GPU runs.
#   CNNSCALE_SLURM_SHARE   colon-separated directories under /tmp that jobs need (a
#                          checkout or build tree there): the nodes' private /tmp would
#                          hide them, so they are bound into it at the same path. This
#                          script's own source tree and $CNNSCALE_SLURM_DIR always are.
set -euo pipefail

DIR=${CNNSCALE_SLURM_DIR:-/var/tmp/cnnscale-slurm}
SRC_TREE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NET=${CNNSCALE_SLURM_SUBNET:-10.201.0}
CPUS=${CNNSCALE_SLURM_CPUS:-16}
PORT=${CNNSCALE_SLURM_PORT:-6917}
BRIDGE=cnnscale-br0
CTL_ADDR=$NET.1
CTL_NAME=cnnscale-ctl
CONF=$DIR/etc/slurm.conf
STATE=$DIR/created          # one line per thing made: "netns NAME", "veth NAME", "bridge NAME", "pid PID what"
MAX_NODES=64
GPUS_REQ=${CNNSCALE_SLURM_GPUS:-0}

die() { echo "local-slurm-cluster: error: $*" >&2; exit 1; }
say() { echo "local-slurm-cluster: $*"; }
node_ns() { echo "cnnscale-cn$1"; }
node_addr() { echo "$NET.$((10 + $1))"; }
record() { echo "$*" >>"$STATE"; }

export SLURM_CONF=$CONF

# Serialise concurrent up/down/status, also between copies of this script (a source
# tree and an install): the lock is on the directory that holds $DIR, so nothing is
# created for it. Daemons are started with fd 9 closed, or they would hold it forever.
mkdir -p "$(dirname "$DIR")"
exec 9<"$(dirname "$DIR")"
flock -w 300 9 || die "another local-slurm-cluster.sh run holds the lock on $(dirname "$DIR")"

need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, a bridge, slurmd); try: sudo $0 $*"; }

check_tools() {
  local t missing=()
  for t in munged slurmctld slurmd sinfo scontrol ip nsenter unshare flock; do
    command -v "$t" >/dev/null 2>&1 || missing+=("$t")
  done
  [ ${#missing[@]} -eq 0 ] || die "missing programs: ${missing[*]} (install: apt-get install slurm-wlm munge iproute2 util-linux)"
}

is_up() { [ -f "$DIR/nodes.count" ] && [ -f "$STATE" ]; }

# pid_alive PID NAME: the process exists and is the named program (not a recycled pid).
pid_alive() {
  [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q -- "$2"
}

# gpu_devices: sets GPU_DEVS to the /dev/nvidiaN files the nodes declare as gres gpu
# (CNNSCALE_SLURM_GPUS); empty for none.
gpu_devices() {
  local k
  GPU_DEVS=()
  case $GPUS_REQ in
    0 | "") ;;
    auto)
      for k in /dev/nvidia[0-9]*; do
        if [[ $k =~ ^/dev/nvidia[0-9]+$ ]]; then GPU_DEVS+=("$k"); fi
      done
      if [ ${#GPU_DEVS[@]} -gt 0 ]; then mapfile -t GPU_DEVS < <(printf '%s\n' "${GPU_DEVS[@]}" | sort -V); fi ;;
    *)
      [[ $GPUS_REQ =~ ^[0-9]+$ ]] || die "CNNSCALE_SLURM_GPUS=$GPUS_REQ is not auto, 0 or a count of GPUs"
      for ((k = 0; k < GPUS_REQ; k++)); do
        [ -e "/dev/nvidia$k" ] || die "CNNSCALE_SLURM_GPUS=$GPUS_REQ but /dev/nvidia$k does not exist; use auto or a smaller count"
        GPU_DEVS+=("/dev/nvidia$k")
      done ;;
  esac
}

write_config() {
  local n=$1 i gres="" dev
  gpu_devices
  if [ ${#GPU_DEVS[@]} -gt 0 ]; then gres=" Gres=gpu:${#GPU_DEVS[@]}"; fi
  mkdir -p "$DIR/etc" "$DIR/ctl/state" "$DIR/munge"
  chmod 700 "$DIR/munge"
  {
    echo "# Generated by local-slurm-cluster.sh: a $n-node cluster in network namespaces."
    echo "ClusterName=cnnscale-local"
    echo "SlurmctldHost=$CTL_NAME($CTL_ADDR)"
    echo "SlurmctldPort=$PORT"
    echo "SlurmdPort=$((PORT + 1))"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    # cred_expire also bounds how long a requeued job waits before it may start again.
    echo "AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10"
    echo "StateSaveLocation=$DIR/ctl/state"
    echo "SlurmctldPidFile=$DIR/ctl/slurmctld.pid"
    echo "SlurmctldLogFile=$DIR/ctl/slurmctld.log"
    echo "SlurmdSpoolDir=$DIR/nodes/%n/spool"
    echo "SlurmdPidFile=$DIR/nodes/%n/slurmd.pid"
    echo "SlurmdLogFile=$DIR/nodes/%n/slurmd.log"
    echo "PlugStackConfig=$DIR/etc/plugstack.conf"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "SwitchType=switch/none"
    echo "MpiDefault=pmix"
    echo "SchedulerType=sched/backfill"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SlurmdParameters=config_overrides"
    echo "ReturnToService=2"
    echo "TaskProlog=$DIR/etc/task-prolog.sh"
    echo "KillWait=10"
    echo "MinJobAge=600"
    echo "SlurmdTimeout=60"
    echo "InactiveLimit=0"
    if [ -n "$gres" ]; then echo "GresTypes=gpu"; fi
    for ((i = 1; i <= n; i++)); do
      echo "NodeName=cn$i NodeAddr=$(node_addr "$i") NodeHostname=cn$i CPUs=$CPUS RealMemory=4096$gres State=UNKNOWN"
    done
    echo "PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$CONF"
  : >"$DIR/etc/plugstack.conf"
  # gres.conf sits beside slurm.conf (slurmd reads it from SLURM_CONF's directory):
  # one line per device, no NVML autodetection (slurmd may be built without it).
  if [ ${#GPU_DEVS[@]} -gt 0 ]; then
    {
      echo "# Generated by local-slurm-cluster.sh (CNNSCALE_SLURM_GPUS=$GPUS_REQ): this machine's GPUs on every node."
      echo "AutoDetect=off"
      local names="cn[1-$n]"
      if [ "$n" -eq 1 ]; then names=cn1; fi
      for dev in "${GPU_DEVS[@]}"; do echo "NodeName=$names Name=gpu File=$dev"; done
    } >"$DIR/etc/gres.conf"
  fi
  # The site part of "Open MPI over the right network": every task gets the bridge
  # subnet as its TCP interface (the namespaces only have lo and this link, but a
  # laptop's root namespace may run srun too).
  cat >"$DIR/etc/task-prolog.sh" <<EOF
#!/bin/sh
echo "export OMPI_MCA_btl_tcp_if_include=$NET.0/24"
echo "export OMPI_MCA_oob_tcp_if_include=$NET.0/24"
EOF
  chmod 755 "$DIR/etc/task-prolog.sh"
  {
    echo "127.0.0.1 localhost"
    echo "$CTL_ADDR $CTL_NAME"
    for ((i = 1; i <= n; i++)); do echo "$(node_addr "$i") cn$i"; done
  } >"$DIR/etc/hosts"
}

start_munge() {
  local key=$DIR/munge/munge.key
  if [ ! -s "$key" ]; then
    dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
    chmod 400 "$key"
  fi
  munged --socket="$DIR/munge/munge.socket" --key-file="$key" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
    --seed-file="$DIR/munge/munged.seed" --force 9<&-
  local i
  for ((i = 0; i < 50; i++)); do [ -s "$DIR/munge/munged.pid" ] && break; sleep 0.1; done
  record "pid $(cat "$DIR/munge/munged.pid") munged"
}

make_network() {
  local n=$1 i ns veth
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    record "bridge $BRIDGE"
  else
    die "bridge $BRIDGE exists but this script's state ($STATE) does not list it: another instance? remove it by hand (ip link del $BRIDGE) if it is stale"
  fi
  ip addr add "$CTL_ADDR/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((i = 1; i <= n; i++)); do
    ns=$(node_ns "$i")
    veth=cs-cn$i
    [ ! -e "/var/run/netns/$ns" ] || die "network namespace $ns exists but is not this script's; remove it (ip netns del $ns) if stale"
    ip netns add "$ns"
    record "netns $ns"
    ip link add "$veth" type veth peer name "$veth-n"
    record "veth $veth"
    ip link set "$veth-n" netns "$ns"
    ip -n "$ns" link set "$veth-n" name eth0
    ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip link set "$veth" master "$BRIDGE"
    ip link set "$veth" up
  done
}

start_slurmctld() {
  mkdir -p "$DIR/ctl"
  # Own UTS namespace, so the controller's name does not depend on this machine's hostname.
  unshare --uts bash -c "hostname $CTL_NAME && exec slurmctld -c" 9<&-
  local i
  for ((i = 0; i < 100; i++)); do [ -s "$DIR/ctl/slurmctld.pid" ] && break; sleep 0.1; done
  [ -s "$DIR/ctl/slurmctld.pid" ] || die "slurmctld did not start; see $DIR/ctl/slurmctld.log"
  record "pid $(cat "$DIR/ctl/slurmctld.pid") slurmctld"
}

start_slurmd() {
  local i=$1 ns node=cn$1 nd
  ns=$(node_ns "$i")
  nd=$DIR/nodes/$node
  mkdir -p "$nd/spool" "$nd/tmp"
  chmod 1777 "$nd/tmp"
  # Directories under /tmp that jobs need ($DIR, this source tree, CNNSCALE_SLURM_SHARE)
  # would be hidden by the node's private /tmp: bind each into the node's /tmp at the
  # same path first (the rbind below carries these submounts along). Shortest first,
  # skipping any that lie inside one already kept.
  local rel="" keep="" p kept=()
  while IFS= read -r p; do
    [ -n "$p" ] && [ -d "$p" ] || continue
    local inside=0 k2
    for k2 in "${kept[@]+"${kept[@]}"}"; do case $p/ in "$k2"/*) inside=1 ;; esac; done
    [ "$inside" = 1 ] && continue
    kept+=("$p")
    rel=${p#/tmp/}
    mkdir -p "$nd/tmp/$rel"
    keep+="mount --bind '$p' '$nd/tmp/$rel' && "
  done < <(for p in "$DIR" "$SRC_TREE" ${CNNSCALE_SLURM_SHARE:+${CNNSCALE_SLURM_SHARE//:/ }}; do
             p=$(realpath -m "$p"); case $p in /tmp/?*) echo "$p" ;; esac
           done | awk '{ print length($0) " " $0 }' | sort -n | cut -d' ' -f2- | uniq)
  # nsenter (not `ip netns exec`, which remounts /sys and hides the cgroup fs slurmd reads).
  nsenter --net="/var/run/netns/$ns" unshare --uts --mount --propagation private bash -c "
    set -e
    hostname $node
    $keep mount --rbind '$nd/tmp' /tmp
    mount -t tmpfs -o mode=1777 cnnscale-shm /dev/shm
    mount --bind '$DIR/etc/hosts' /etc/hosts
    exec slurmd -N $node" 9<&-
  local k
  for ((k = 0; k < 100; k++)); do [ -s "$nd/slurmd.pid" ] && break; sleep 0.1; done
  [ -s "$nd/slurmd.pid" ] || die "slurmd on $node did not start; see $nd/slurmd.log"
  record "pid $(cat "$nd/slurmd.pid") slurmd"
}

wait_idle() {
  local n=$1 t states
  for ((t = 0; t < 120; t++)); do
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null || true)
    if [ "$(grep -c ' idle$' <<<"$states" || true)" -eq "$n" ]; then return 0; fi
    # A node that registered as down (e.g. after an unclean stop) is put back.
    grep -E ' (down|drain|drng)\*?$' <<<"$states" | while read -r name _; do
      scontrol update nodename="$name" state=resume >/dev/null 2>&1 || true
    done
    sleep 0.5
  done
  sinfo -N -l >&2 || true
  die "nodes did not become idle within 60 s; logs: $DIR/ctl/slurmctld.log $DIR/nodes/*/slurmd.log"
}

cmd_up() {
  local n=${1:-}
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le $MAX_NODES ] || die "usage: $0 up N (1 <= N <= $MAX_NODES)"
  need_root up "$n"
  check_tools
  if is_up; then
    local have
    have=$(cat "$DIR/nodes.count")
    [ "$have" = "$n" ] || die "already up with $have nodes; run '$0 down' first"
    if cmd_status >/dev/null 2>&1; then
      say "already up with $n nodes"
      cmd_status
      return 0
    fi
    say "state in $DIR is stale (daemons gone): cleaning up first"
    cmd_down
  elif [ -e "$DIR" ]; then
    die "$DIR exists but holds no cluster state; remove it or set CNNSCALE_SLURM_DIR"
  fi
  mkdir -p "$DIR"
  chmod 755 "$DIR"
  : >"$STATE"
  trap 'echo "local-slurm-cluster: up failed; removing what was made" >&2; cmd_down >&2 || true' ERR
  write_config "$n"
  start_munge
  make_network "$n"
  start_slurmctld
  local i
  for ((i = 1; i <= n; i++)); do start_slurmd "$i"; done
  echo "$n" >"$DIR/nodes.count"
  wait_idle "$n"
  trap - ERR
  say "up: $n nodes (cn1..cn$n, partition cpu); use it with: export SLURM_CONF=$CONF"
  if [ -f "$DIR/etc/gres.conf" ]; then say "gres: every node declares gpu:$(grep -c '^NodeName=' "$DIR/etc/gres.conf") ($(sed -n 's/.*File=//p' "$DIR/etc/gres.conf" | paste -sd' '))"; fi
  cmd_status
}

cmd_status() {
  if ! is_up; then
    echo "local-slurm-cluster: not up (no state in $DIR)"
    return 3
  fi
  local bad=0 pid what
  while read -r kind pid what; do
    [ "$kind" = pid ] || continue
    if pid_alive "$pid" "$what"; then echo "$what: running (pid $pid)"; else echo "$what: NOT running (pid $pid)"; bad=1; fi
  done <"$STATE"
  echo "SLURM_CONF=$CONF"
  sinfo -o '%P %a %D %t %N %c' || bad=1
  squeue -o '%i %j %T %D %R' 2>/dev/null || true
  return $bad
}

# Kill a recorded daemon: TERM, wait, KILL.
stop_pid() {
  local pid=$1 what=$2 k
  pid_alive "$pid" "$what" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((k = 0; k < 50; k++)); do pid_alive "$pid" "$what" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_down() {
  need_root down
  if [ ! -f "$STATE" ]; then
    say "not up (nothing recorded in $STATE)"
    [ ! -e "$DIR" ] || rm -rf --one-file-system "$DIR"
    return 0
  fi
  # 1. Jobs: cancel them while the controller still runs.
  if pid_alive "$(cat "$DIR/ctl/slurmctld.pid" 2>/dev/null)" slurmctld; then
    scancel --quiet --full -u root 2>/dev/null || true
    timeout 10 scancel --quiet --state=PENDING 2>/dev/null || true
  fi
  # 2. Daemons, newest first: slurmds, slurmctld, munged.
  local pid what kind
  tac "$STATE" | while read -r kind pid what; do
    if [ "$kind" = pid ] && [ "$what" != munged ]; then stop_pid "$pid" "$what"; fi
  done
  # 3. Any process still inside one of our namespaces (slurmstepd, tasks): by pid.
  local ns
  for ns in $(awk '$1 == "netns" {print $2}' "$STATE"); do
    [ -e "/var/run/netns/$ns" ] || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  tac "$STATE" | while read -r kind pid what; do
    if [ "$kind" = pid ] && [ "$what" = munged ]; then stop_pid "$pid" "$what"; fi
  done
  # 4. Network: namespaces (their veth ends go with them), host veths, the bridge.
  tac "$STATE" | while read -r kind name _; do
    case $kind in
      netns) if [ -e "/var/run/netns/$name" ]; then ip netns del "$name" 2>/dev/null || true; fi ;;
      veth | bridge) if ip link show "$name" >/dev/null 2>&1; then ip link del "$name" 2>/dev/null || true; fi ;;
    esac
  done
  # 5. The directory (the nodes' mount namespaces died with their processes).
  rm -rf --one-file-system "$DIR"
  say "down: removed daemons, namespaces, links and $DIR"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 up N | down | status | env" >&2; exit 2 ;;
esac
