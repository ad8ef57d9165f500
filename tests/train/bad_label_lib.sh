# shellcheck shell=bash
# tests/train/bad_label_lib.sh — one rank's data set holds a label outside [0, classes):
# shared by bad_label.sh (CPU, MPI, label mpi) and bad_label_gpu.sh (2 GPUs, NCCL).
# A real prepped data set (the HDF5 fixture, 1×8×8, 10 classes) and a copy of it in
# which sample 3 of train shard 1 has label 10 (tests/data/fixture_tool set-label). An
# MPMD launch gives the failing rank the bad copy (as a node-local copy of the data
# would), the other rank the good one. load_dataset() checks every label when the rank
# opens its data, so the failing rank stops with the shard, sample and range named,
# while its peer has gone on to the parameter broadcast (NCCL: on the device); the job
# must end within seconds with that message and status 2, not at the peer's
# --collective-timeout (60 s), not with a crash.
# Caller sets: M (mpiexec command), TRAIN_ARGS (array), BACKEND_RE (start-line regex
# the good rank's output must show; empty: not checked), LIMIT_S.

bad_label_main() {
  local TOOL="$CNNSCALE_BUILD/tests/cnnscale_fixture_tool" host
  host=$(hostname)
  "$TOOL" write "$TMP/fx.h5" 500 120 10 && "$CNNSCALE" prep --format hdf5 --input "$TMP/fx.h5" --images /x --labels /y \
    --test-images /tx --test-labels /ty --output "$TMP/good" --shards 3 --test-shards 2 --chunk 16 >"$TMP/prep.out" 2>&1
  expect_eq "fixture prepped" 0 "$?"
  rm -rf "$TMP/bad" && cp -r "$TMP/good" "$TMP/bad" && "$TOOL" set-label "$TMP/bad/train-00001-of-00003.h5" 3 10
  "$CNNSCALE" prep --verify "$TMP/bad" >"$TMP/verify.out" 2>&1
  expect_grep "the bad copy really holds label 10 (prep --verify)" 'label 10 of sample 3 .* is outside \[0, 10\)' "$TMP/verify.out"
  # The good data set trains on both ranks (the failure below is the label, nothing else).
  timeout 300 $M -n 2 "$CNNSCALE" train "${TRAIN_ARGS[@]}" --data "$TMP/good" --max-steps 3 >"$TMP/ok.out" 2>&1
  expect_eq "good data on both ranks: exit status" 0 "$?"
  [ -n "$BACKEND_RE" ] && expect_grep "good data: $BACKEND_RE" "$BACKEND_RE" "$TMP/ok.out"
  local r rc start elapsed d0 d1 prefix
  for r in 1 0; do
    d0=good d1=bad; [ "$r" = 0 ] && d0=bad d1=good
    start=$(date +%s)
    timeout 300 $M -n 1 "$CNNSCALE" train "${TRAIN_ARGS[@]}" --data "$TMP/$d0" --max-steps 1000 \
      : -n 1 "$CNNSCALE" train "${TRAIN_ARGS[@]}" --data "$TMP/$d1" --max-steps 1000 >"$TMP/r$r.out" 2>&1
    rc=$?
    elapsed=$(( $(date +%s) - start ))
    # rank 0 says it plainly; another rank names itself and its host (cli/main.cpp)
    prefix=""; [ "$r" != 0 ] && prefix="rank $r on $host: "
    expect_eq "bad label on rank $r: status 2 (a user error)" 2 "$rc"
    expect_grep "bad label on rank $r: its message, shard, sample and range named" \
      "cnnscale: error: $prefix""shard $TMP/bad/train-00001-of-00003.h5: label 10 of sample 3 \(global index [0-9]+\) is outside \[0, 10\)" \
      "$TMP/r$r.out"
    grep "cnnscale: error:" "$TMP/r$r.out"
    expect_eq "bad label on rank $r: said once" 1 "$(grep -c 'cnnscale: error:' "$TMP/r$r.out")"
    if grep -Eq 'waited [0-9]+ s in|Segmentation|Signal: |terminate called' "$TMP/r$r.out"; then
      bad "bad label on rank $r: no watchdog report or crash"; sed 's/^/    | /' "$TMP/r$r.out" | head -20
    else ok "bad label on rank $r: no watchdog report or crash"; fi
    python3 -c "import sys; sys.exit(0 if $elapsed < $LIMIT_S else 1)"
    expect_eq "bad label on rank $r: ended within seconds, before the 60 s watchdog (took ${elapsed}s incl. start-up)" 0 "$?"
  done
}
