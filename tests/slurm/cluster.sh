#!/usr/bin/env bash
# The local cluster itself: nodes in separate namespaces, srun over PMIx between them,
# the bootstrap's error without PMIx, job exit states, idempotent up, and a down that
# removes everything it made.
source "$CNNSCALE_SOURCE/tests/slurm/cluster_lib.sh"
cluster_up

# up again: already up, same nodes, status ok
"$CLUSTER" up 2 >"$TMP/up2.log" 2>&1
expect_eq "second 'up 2' succeeds" 0 "$?"
expect_grep "second 'up 2' says it is already up" 'already up with 2 nodes' "$TMP/up2.log"
"$CLUSTER" up 3 >"$TMP/up3.log" 2>&1
expect_ne "'up 3' while up with 2 is refused" 0 "$?"
"$CLUSTER" status >"$TMP/status.log" 2>&1
expect_eq "status exit 0" 0 "$?"
expect_grep "status: both nodes idle in partition cpu" '^cpu\* up 2 idle cn\[1-2\]' "$TMP/status.log"

# every node is its own network/UTS namespace with its own /tmp
srun -N2 --ntasks-per-node=1 bash -c 'echo "$(hostname) $(ip -4 -o addr show eth0 | awk "{print \$4}") $(stat -c %i /tmp)"' \
  >"$TMP/nodes.txt" 2>&1
sort "$TMP/nodes.txt" >"$TMP/nodes.sorted"
expect_grep "cn1 has its own address" '^cn1 10\.201\.0\.11/24 ' "$TMP/nodes.sorted"
expect_grep "cn2 has its own address" '^cn2 10\.201\.0\.12/24 ' "$TMP/nodes.sorted"
expect_eq "each node has its own /tmp" 2 "$(awk '{print $3}' "$TMP/nodes.sorted" | sort -u | wc -l)"

# PMIx + Open MPI across the namespaces: 2 nodes x 2 ranks
cd "$WORK" || exit 1
timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$CNNSCALE" env >"$TMP/env.txt" 2>"$TMP/env.err"
expect_eq "srun --mpi=pmix -N2 -n4 cnnscale env exit status" 0 "$?"
sort -t= -k3 "$TMP/env.txt" >"$TMP/env.sorted"
expect_eq "four ranks" 4 "$(grep -c '^launcher=srun+pmix ' "$TMP/env.txt")"
for r in 0 1 2 3; do
  host=cn$((r / 2 + 1))
  expect_grep "rank $r: size 4, 2 nodes, node $((r / 2)), local rank $((r % 2)), on $host" \
    "^launcher=srun\+pmix rank=$r size=4 local_rank=$((r % 2)) .*node=$((r / 2)) nodes=2 host=$host " "$TMP/env.txt"
done
# the allreduce benchmark checks every element: a real exchange over TCP between nodes
timeout 180 srun --mpi=pmix -N2 --ntasks-per-node=1 "$CNNSCALE" allreduce -e 1M -n 5 -w 1 >"$TMP/ar.txt" 2>&1
expect_eq "allreduce across the two nodes exit status" 0 "$?"
expect_grep "allreduce across nodes: no wrong elements" '^# Out of bounds values : 0 OK' "$TMP/ar.txt"

# no PMIx: the bootstrap's clear error, non-zero, no hang
timeout 60 srun --mpi=none -N1 -n2 "$CNNSCALE" env >"$TMP/none.out" 2>"$TMP/none.err"
rc=$?
expect_ne "srun --mpi=none -n2 exit status" 0 "$rc"
expect_ne "srun --mpi=none -n2 did not time out" 124 "$rc"
expect_grep "srun --mpi=none: bootstrap error names the fix" \
  '^cnnscale: error: srun started 2 tasks .*srun --mpi=pmix' "$TMP/none.err"

# batch jobs: exit state of a good and a failing job (no accounting: scontrol)
cat >"$WORK/ok.sbatch" <<EOS
#!/bin/bash
#SBATCH -N2 --ntasks-per-node=1 -o ok-%j.out
srun "$CNNSCALE" env
EOS
cat >"$WORK/bad.sbatch" <<'EOS'
#!/bin/bash
#SBATCH -N1 -n1 -o bad-%j.out
exit 3
EOS
out=$(sbatch --parsable --wait "$WORK/ok.sbatch"); rc=$?
expect_eq "sbatch --wait of a good job returns 0" 0 "$rc"
expect_eq "good job state" COMPLETED "$(job_field "$out" JobState)"
expect_eq "good job exit code" 0:0 "$(job_field "$out" ExitCode)"
expect_eq "good job ran on both nodes" 2 "$(grep -c 'nodes=2' "$WORK/ok-$out.out")"
out=$(sbatch --parsable --wait "$WORK/bad.sbatch"); rc=$?
expect_eq "sbatch --wait of a failing job returns its status" 3 "$rc"
expect_eq "failing job state" FAILED "$(job_field "$out" JobState)"
expect_eq "failing job exit code" 3:0 "$(job_field "$out" ExitCode)"

# down removes everything it made (only when this test started the cluster)
if [ "$_we_started" = 1 ]; then
  dir=$(dirname "$(dirname "$SLURM_CONF")")
  pids=$(awk '$1 == "pid" {print $2}' "$dir/created")
  "$CLUSTER" down >"$TMP/down.log" 2>&1
  expect_eq "down exit status" 0 "$?"
  _we_started=0
  expect_eq "no namespaces left" "" "$(ip netns list | grep -o '^cnnscale-cn[0-9]*' || true)"
  expect_eq "no bridge left" "" "$(ip -o link show cnnscale-br0 2>/dev/null || true)"
  expect_eq "no veths left" "" "$(ip -o link | grep -o 'cs-cn[0-9]*' || true)"
  expect_eq "state directory removed" no "$([ -e "$dir" ] && echo yes || echo no)"
  # a daemon is gone when its pid is gone or a zombie (empty cmdline) awaiting its reaper
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    left=""
    for p in $pids; do [ -s "/proc/$p/cmdline" ] && left="$left $p"; done
    [ -z "$left" ] && break
    sleep 0.5
  done
  expect_eq "no daemon left" "" "$left"
  "$CLUSTER" status >/dev/null 2>&1
  expect_eq "status when down exits 3" 3 "$?"
  "$CLUSTER" down >"$TMP/down2.log" 2>&1
  expect_eq "down when down is a no-op" 0 "$?"
fi
finish
