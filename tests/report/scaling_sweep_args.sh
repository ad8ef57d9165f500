#!/usr/bin/env bash
# scripts/scaling-sweep.sh without running anything (--dry-run): per-rank batch for strong
# and weak scaling, the sbatch lines (held jobs, run directories, dependency of the report
# job), the local mpirun lines, and the argument errors.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
SWEEP="$CNNSCALE_SOURCE/scripts/scaling-sweep.sh"
cd "$TMP" || exit 1

bash "$SWEEP" --dry-run --nodes 4,1,2 --tasks-per-node 2 --global-batch 64 --template /dev/null --out "$TMP/s1" \
  --cnnscale /opt/cnnscale -- --synthetic --max-steps 5 >"$TMP/s1.out" 2>&1
expect_eq "slurm dry run exit status" 0 "$?"
# strong: 64 images over 2, 4, 8 ranks → 32, 16, 8 per rank
expect_grep "1 node: batch 32, held, 2 tasks" "^\+ CNNSCALE_TRAIN_ARGS=--synthetic\\\\ --max-steps\\\\ 5\\\\ --batch-size\\\\ 32 CNNSCALE_RUN_DIR=$TMP/s1/.slot-nodes-1 CNNSCALE_ALLREDUCE_DIR=$TMP/s1/.slot-nodes-1 sbatch --parsable --hold --nodes=1 --ntasks-per-node=2 " "$TMP/s1.out"
expect_grep "2 nodes: batch 16" '--batch-size\\ 16 .* --nodes=2 ' "$TMP/s1.out"
expect_grep "4 nodes: batch 8" '--batch-size\\ 8 .* --nodes=4 ' "$TMP/s1.out"
expect_grep "run dir named after count and job" "ln -sfn nodes-2-job-JOB_n2 $TMP/s1/.slot-nodes-2" "$TMP/s1.out"
expect_grep "report job depends on all (ascending counts)" 'sbatch --parsable --dependency=afterany:JOB_n1:JOB_n2:JOB_n4 ' "$TMP/s1.out"
expect_grep "report job runs cnnscale report over the run dirs" "/opt/cnnscale.*report.*--allow-missing.*nodes-1-job-JOB_n1.*nodes-4-job-JOB_n4.*--mode.*strong.*--output" "$TMP/s1.out"
expect_grep "each job measures the network into its run directory" 'CNNSCALE_ALLREDUCE_DIR=.*/s1/\.slot-nodes-2 sbatch' "$TMP/s1.out"
expect_grep "report job passes every measurement it finds" 'for f in .*nodes-2-job-JOB_n2/allreduce-cross\.json .*nodes-2-job-JOB_n2/allreduce-node\.json' "$TMP/s1.out"
expect_grep "report job runs the generated script" 'sbatch --parsable --dependency=afterany:JOB_n1:JOB_n2:JOB_n4 .* /.*/s1/report-job\.sh' "$TMP/s1.out"
bash -n "$TMP/s1/report-job.sh"
expect_eq "report-job.sh is valid bash" 0 "$?"
bash "$SWEEP" --dry-run --no-allreduce --nodes 1,2 --template /dev/null --out "$TMP/s1b" -- --synthetic >"$TMP/s1b.out" 2>&1
if grep -q 'CNNSCALE_ALLREDUCE_DIR=' "$TMP/s1b.out"; then bad "--no-allreduce still measures"; else ok "--no-allreduce: no measurement"; fi

bash "$SWEEP" --dry-run --mode weak --batch-per-rank 16 --nodes 1,2 --tasks-per-node 4 --template /dev/null \
  --out "$TMP/s2" -- --synthetic >"$TMP/s2.out" 2>&1
expect_eq "weak dry run exit status" 0 "$?"
expect_eq "weak: per-rank batch 16 at every count" 2 "$(grep -c -- '--batch-size\\ 16 ' "$TMP/s2.out")"

bash "$SWEEP" --dry-run --local --ranks 1,2 --global-batch 32 --out "$TMP/s3" --cnnscale /opt/cnnscale \
  -- --synthetic --max-steps 3 >"$TMP/s3.out" 2>&1
expect_eq "local dry run exit status" 0 "$?"
expect_grep "local: 2 ranks via mpirun, batch 16" "(mpirun|mpiexec) --oversubscribe --allow-run-as-root -n 2 /opt/cnnscale train --synthetic --max-steps 3 --batch-size 16 --run-dir $TMP/s3/ranks-2" "$TMP/s3.out"
expect_grep "local: report over both runs" "/opt/cnnscale report $TMP/s3/ranks-1 $TMP/s3/ranks-2 --mode strong --output $TMP/s3/report" "$TMP/s3.out"
expect_grep "local: intra-node allreduce at 2 ranks" "-n 2 /opt/cnnscale allreduce --level node .* --json $TMP/s3/ranks-2/allreduce-node.json" "$TMP/s3.out"
expect_grep "local: the report gets it" "report .* --allreduce $TMP/s3/ranks-2/allreduce-node.json" "$TMP/s3.out"

bash "$SWEEP" --dry-run --local --ranks 1,3 --global-batch 32 --out "$TMP/e1" -- --synthetic >"$TMP/e1.out" 2>&1
expect_eq "indivisible global batch: exit 2" 2 "$?"
expect_grep "indivisible global batch: message" 'global batch 32 is not divisible by 3 ranks' "$TMP/e1.out"
bash "$SWEEP" --dry-run --local --ranks 1,2 --out "$TMP/e2" -- --synthetic --batch-size 8 >"$TMP/e2.out" 2>&1
expect_eq "--batch-size after --: exit 2" 2 "$?"
expect_grep "--batch-size after --: message" 'do not pass --batch-size after --' "$TMP/e2.out"
bash "$SWEEP" --dry-run --nodes 1,x --out "$TMP/e3" >"$TMP/e3.out" 2>&1
expect_eq "bad node list: exit 2" 2 "$?"
expect_grep "bad node list: message" "'x' is not a positive integer" "$TMP/e3.out"
bash "$SWEEP" --dry-run --out "$TMP/e4" >"$TMP/e4.out" 2>&1
expect_eq "no counts: exit 2" 2 "$?"
bash "$SWEEP" --nodes 1,2 --template "$TMP/missing.slurm" --out "$TMP/e5" >"$TMP/e5.out" 2>&1
expect_eq "missing template: exit 2" 2 "$?"
expect_grep "missing template: message" "template '$TMP/missing.slurm' not found" "$TMP/e5.out"
bash "$SWEEP" --help >"$TMP/h.out" 2>&1
expect_grep "--help documents the template contract" 'CNNSCALE_RUN_DIR' "$TMP/h.out"
finish
