#!/usr/bin/env bash
# tests/slurm/gloo_nodes.sh — the Gloo backend between two "nodes" of the local cluster:
# two processes started by hand with torchrun's variables, one in each node's network
# namespace (own host name), MASTER_ADDR = node 1's address, so the rendezvous store and
# the ring allreduce cross the veth bridge over TCP. The same run under
# `srun -N2 --mpi=pmix` (MPI backend) must reach the same parameters and losses.
set -u
source "$CNNSCALE_SOURCE/tests/slurm/cluster_lib.sh"
cluster_up
STEPS=8
TRAIN=(train --synthetic --model mnist_cnn --batch-size 32 --max-steps $STEPS --log-every 1 --no-tensorboard)
losses() { sed -n 's/.*step \([0-9]*\)\/[0-9]* loss \([0-9.]*\).*/\1 \2/p' "$1"; }
NET_ADDR=$(awk '$2 == "cn1" { print $1 }' "${CNNSCALE_SLURM_DIR:-/var/tmp/cnnscale-slurm}/etc/hosts")
expect_ne "node 1's address from the cluster's hosts file" "" "$NET_ADDR"
PORT=$((29000 + RANDOM % 1000))
pids=()
for r in 0 1; do
  ip netns exec "cnnscale-cn$((r + 1))" env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
    MASTER_ADDR="$NET_ADDR" MASTER_PORT=$PORT \
    timeout 180 unshare -u sh -c "hostname cn$((r + 1)); exec \"\$0\" \"\$@\" --run-dir '$WORK/gloo'" \
    "$CNNSCALE" "${TRAIN[@]}" >"$WORK/gloo.$r.out" 2>&1 &
  pids+=($!)
done
st=0
for p in "${pids[@]}"; do wait "$p" || st=$?; done
expect_eq "gloo ranks in two network namespaces: exit status" 0 "$st"
expect_grep "gloo: 2 ranks on 2 nodes" "2 rank\(s\) on 2 node\(s\), backend gloo" "$WORK/gloo.0.out"
(cd "$WORK" && timeout 180 srun -N2 --ntasks-per-node=1 --mpi=pmix "$CNNSCALE" "${TRAIN[@]}" --run-dir "$WORK/mpi") \
  >"$WORK/mpi.out" 2>&1
expect_eq "srun -N2 (MPI) exit status" 0 "$?"
expect_grep "mpi: 2 ranks on 2 nodes" "2 rank\(s\) on 2 node\(s\), backend mpi" "$WORK/mpi.out"
ck=checkpoints/step-0000000$STEPS.h5
expect_ckpt_close "gloo across nodes == srun MPI" "$WORK/mpi/$ck" "$WORK/gloo/$ck"
expect_eq "the same loss at every step" "$(losses "$WORK/mpi.out")" "$(losses "$WORK/gloo.0.out")"
expect_eq "$STEPS losses logged" "$STEPS" "$(losses "$WORK/gloo.0.out" | wc -l)"
if [ "$_fail" -gt 0 ]; then show_out "$WORK/gloo.0.out"; show_out "$WORK/gloo.1.out"; show_out "$WORK/mpi.out"; echo "$CKPT_DIFF_OUT"; fi
finish
