# shellcheck shell=bash
# tests/train/overlap_lib.sh — the overlap stress comparison shared by overlap_stress.sh
# (CPU, MPI backend, label mpi) and overlap_stress_gpu.sh (2 GPUs, NCCL, label gpu).
#
# Claim: how gradients are cut into buckets and when their sums start cannot change the
# result. With 2 ranks every element of a summed gradient is a0 + a1, and IEEE addition
# is commutative, so any allreduce algorithm (ring, tree, node-shared memory, one
# bucket or hundreds, started early or late) yields the same bits on both ranks; the
# runs below must therefore end BITWISE equal (model and optimiser state, h5diff), with
# bitwise equal losses at every step. (With 3+ ranks the association order of the sum
# may legitimately change with the algorithm, so this bitwise claim is for 2 ranks.)
#
#   ref:   one huge bucket (--bucket-mb 1000): every sum starts after backward ends;
#   late1: tiny buckets (~1 KiB: one per layer with parameters) and rank 1 sleeps in every
#          gradient-ready callback (CNNSCALE_INJECT_DELAY_MS=1:MS), so rank 0 starts
#          its buckets long before rank 1 and waits inside them while rank 1's
#          backward is still running;
#   late0: the same with rank 0 the late one (plus $OVERLAP_LATE0_ENV, e.g. the MPI
#          allreduce instead of node-shared memory on the CPU).
# Not vacuous: the bucket counts are read from the start line (1 vs many), the hook's
# line is required from the delayed rank, --check-replicas 1 holds in every run, and the
# parameters moved between step 2 and the last step.
#
# Caller sets: M (mpiexec command), TRAIN_ARGS (array), DELAY_MS, STEPS, OVERLAP_LATE0_ENV,
# MIN_BUCKETS (the tiny-bucket runs must have at least this many: a bucket never splits
# one layer's gradient, so it is about the number of layers with parameters).

overlap_buckets() { sed -n 's/.* \([0-9][0-9]*\) gradient bucket(s) summed by .*/\1/p' "$1" | head -n 1; }

overlap_run() {  # NAME BUCKET_MB DELAY_SPEC [ENV=VALUE...]
  local name=$1 mb=$2 delay=$3; shift 3
  local envs=() xs=() e
  [ -n "$delay" ] && envs+=("CNNSCALE_INJECT_DELAY_MS=$delay") && xs+=(-x CNNSCALE_INJECT_DELAY_MS)
  for e in "$@"; do envs+=("$e"); xs+=(-x "${e%%=*}"); done
  env "${envs[@]+"${envs[@]}"}" timeout 600 $M -n 2 "${xs[@]+"${xs[@]}"}" "$CNNSCALE" train "${TRAIN_ARGS[@]}" \
    --max-steps "$STEPS" --bucket-mb "$mb" --first-bucket-mb "$mb" --check-replicas 1 --log-every 1 \
    --checkpoint-every 2 --keep-checkpoints 100 --no-tensorboard --run-dir "$TMP/$name" >"$TMP/$name.out" 2>&1
  expect_eq "$name: exit status" 0 "$?"
  expect_grep "$name: replicas bitwise identical after every step" "replicas identical at all $STEPS check" "$TMP/$name.out"
}

overlap_compare() {  # NAME: bitwise equal to ref
  local name=$1 last
  last=$(printf 'checkpoints/step-%08d.h5' "$STEPS")
  expect_ckpt_bitwise "$name == ref" "$TMP/ref/$last" "$TMP/$name/$last"
  expect_grep "$name == ref: ckpt_diff says identical" 'identical 1' <("$CNNSCALE_BUILD/tests/ckpt_diff" "$TMP/ref/$last" "$TMP/$name/$last" 2>&1)
  metrics_losses "$TMP/$name/metrics.jsonl" >"$TMP/$name.losses"
  expect_eq "$name: $STEPS losses recorded" "$STEPS" "$(wc -l <"$TMP/$name.losses")"
  expect_eq "$name == ref: the same loss bits at every step" "$(cat "$TMP/ref.losses")" "$(cat "$TMP/$name.losses")"
}

overlap_main() {
  command -v h5diff >/dev/null || { echo "FAIL: h5diff missing (apt-get install hdf5-tools)"; exit 1; }
  overlap_run ref 1000 ""
  overlap_run late1 0.001 "1:$DELAY_MS"
  # shellcheck disable=SC2086
  overlap_run late0 0.001 "0:$DELAY_MS" $OVERLAP_LATE0_ENV
  local nref n1 n0
  nref=$(overlap_buckets "$TMP/ref.out"); n1=$(overlap_buckets "$TMP/late1.out"); n0=$(overlap_buckets "$TMP/late0.out")
  expect_eq "ref: one gradient bucket" 1 "${nref:-?}"
  python3 -c "import sys; sys.exit(0 if int('${n1:-0}') >= $MIN_BUCKETS and int('${n0:-0}') >= $MIN_BUCKETS else 1)"
  expect_eq "late runs: many gradient buckets (${n1:-?}, ${n0:-?} >= $MIN_BUCKETS)" 0 "$?"
  expect_grep "late1: rank 1 ran the delay hook" "\[rank 1\].*CNNSCALE_INJECT_DELAY_MS: sleeping $DELAY_MS ms" "$TMP/late1.out"
  expect_grep "late0: rank 0 ran the delay hook" "\[rank 0\].*CNNSCALE_INJECT_DELAY_MS: sleeping $DELAY_MS ms" "$TMP/late0.out"
  if grep -q 'CNNSCALE_INJECT_DELAY_MS' "$TMP/ref.out"; then bad "ref: no delay hook"; else ok "ref: no delay hook"; fi
  metrics_losses "$TMP/ref/metrics.jsonl" >"$TMP/ref.losses"
  expect_eq "ref: $STEPS losses recorded" "$STEPS" "$(wc -l <"$TMP/ref.losses")"
  "$CNNSCALE_BUILD/tests/ckpt_diff" "$TMP/ref/checkpoints/step-00000002.h5" \
    "$TMP/ref/$(printf 'checkpoints/step-%08d.h5' "$STEPS")" >"$TMP/moved.txt" 2>&1
  expect_grep "ref: the parameters moved between step 2 and step $STEPS" 'identical 0' "$TMP/moved.txt"
  overlap_compare late1
  overlap_compare late0
  if [ "$_fail" -gt 0 ]; then
    for f in ref late1 late0; do echo "    --- $f.out"; sed 's/^/    | /' "$TMP/$f.out" | tail -15; done
    head -n 20 "$TMP/h5diff.log" 2>/dev/null
  fi
}
