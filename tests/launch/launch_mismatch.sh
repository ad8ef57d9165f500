#!/usr/bin/env bash
# A launcher environment that disagrees with MPI must stop every task at once with
# one "cnnscale: error:" line and a non-zero status, never a silent world of 1.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"

# 1. srun -n4 without PMIx, simulated: four tasks, each with Slurm's variables and no PMI.
pids=()
for r in 0 1 2 3; do
  env -u PMIX_NAMESPACE -u PMIX_RANK SLURM_PROCID=$r SLURM_NTASKS=4 SLURM_STEP_ID=0 SLURM_LOCALID=$r \
    "$CNNSCALE" env >"$TMP/task$r.out" 2>"$TMP/task$r.err" & pids+=($!)
done
for i in 0 1 2 3; do
  wait "${pids[$i]}"; rc=$?
  expect_eq "task $i exit status" 2 "$rc"
done
expect_grep "task 0 names the fix" 'cnnscale: error: srun started 4 tasks .*srun --mpi=pmix' "$TMP/task0.err"
expect_eq "task 0 prints exactly one line" 1 "$(wc -l <"$TMP/task0.err")"
expect_eq "task 3 stays quiet (rank 0 speaks)" 0 "$(wc -l <"$TMP/task3.err")"

# 2. A torchrun-style environment claiming 2 ranks: `env` meets the others at the
#    rendezvous store as train does (issue 26 item 2), so without MASTER_ADDR it names
#    that; with --backend mpi, MPI's world of 1 disagrees with WORLD_SIZE.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RANK=0 WORLD_SIZE=2 \
  timeout 60 "$CNNSCALE" env >"$TMP/tr.out" 2>"$TMP/tr.err"
expect_eq "torchrun env without MASTER_ADDR exit status" 2 "$?"
expect_grep "torchrun env names MASTER_ADDR" 'cnnscale: error: rank 0 of 2 \(launcher: torchrun\) has no rendezvous address: MASTER_ADDR is not set' "$TMP/tr.err"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RANK=0 WORLD_SIZE=2 \
  timeout 60 "$CNNSCALE" env --backend mpi >"$TMP/tr.out" 2>"$TMP/tr.err"
expect_eq "torchrun mismatch (--backend mpi) exit status" 2 "$?"
expect_grep "torchrun mismatch explained" 'cnnscale: error: the torchrun environment says 2 ranks .*MPI sees a world of 1' "$TMP/tr.err"

# 3. Under a real 2-rank mpiexec, give each rank a clean environment (no PMIx, so
#    its MPI is a singleton) in which Slurm variables with a PMI-2 marker claim a
#    2-task step: this passes the pre-MPI check and must be caught after MPI_Init.
timeout 120 "$MPIEXEC" --allow-run-as-root --oversubscribe -n 2 \
  bash -c 'exec env -i PATH="$PATH" HOME="$HOME" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    SLURM_PROCID=$OMPI_COMM_WORLD_RANK SLURM_NTASKS=2 PMI_RANK=$OMPI_COMM_WORLD_RANK "$0" env' "$CNNSCALE" \
  >"$TMP/mpi.out" 2>"$TMP/mpi.err"
rc=$?
expect_ne "stripped-PMIx mpiexec exit status" 0 "$rc"
expect_grep "stripped-PMIx mismatch explained" 'cnnscale: error: srun started 2 tasks .*MPI sees a world of 1' "$TMP/mpi.err"

# 4. Malformed values.
SLURM_PROCID=abc SLURM_NTASKS=2 "$CNNSCALE" env >"$TMP/bad.out" 2>"$TMP/bad.err"
expect_eq "malformed SLURM_PROCID exit status" 2 "$?"
expect_grep "malformed SLURM_PROCID named" 'cnnscale: error: environment variable SLURM_PROCID=abc' "$TMP/bad.err"
RANK=3 WORLD_SIZE=2 "$CNNSCALE" env >"$TMP/bad2.out" 2>"$TMP/bad2.err"
expect_eq "rank >= size exit status" 2 "$?"
expect_grep "rank >= size named" 'cnnscale: error: rank 3 \(RANK\) is not below the job size 2' "$TMP/bad2.err"

finish
