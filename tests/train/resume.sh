#!/usr/bin/env bash
# Checkpoint/resume (issue 5): bit-for-bit continuation, resume on other world sizes,
# a stop signal to one rank only, a damaged newest checkpoint, NaN, unwritable and
# full checkpoint directories.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
DIFF="$CNNSCALE_BUILD/tests/ckpt_diff"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
COMMON="--synthetic --model mnist_cnn --lr 0.05 --momentum 0.9 --seed 11 --no-eval"
ident() { "$DIFF" "$1" "$2" 2>&1 | grep -q 'identical 1'; }
close() { local r; r=$("$DIFF" "$1" "$2" | awk '{print $8}'); python3 -c "import sys; sys.exit(0 if float('$r') < 1e-5 else 1)"; }

# Reference: 2 ranks x 32, 12 steps uninterrupted.
timeout 300 $M -n 2 "$CNNSCALE" train $COMMON --batch-size 32 --max-steps 12 --checkpoint-every 4 --run-dir "$TMP/ref" >"$TMP/ref.out" 2>&1
expect_eq "reference run exit status" 0 "$?"
REF="$TMP/ref/checkpoints/step-00000012.h5"
expect_file "reference final checkpoint" "$REF"
expect_eq "latest names the newest" "step-00000012.h5" "$(cat "$TMP/ref/checkpoints/latest")"

# Interrupted at step k, resumed with --resume auto: bitwise identical at step 12.
for k in 3 7; do
  timeout 300 $M -n 2 "$CNNSCALE" train $COMMON --batch-size 32 --max-steps $k --run-dir "$TMP/k$k" >"$TMP/k$k.a" 2>&1
  timeout 300 $M -n 2 "$CNNSCALE" train $COMMON --batch-size 32 --max-steps 12 --resume auto --run-dir "$TMP/k$k" >"$TMP/k$k.b" 2>&1
  expect_eq "resume after step $k exit status" 0 "$?"
  expect_grep "resume after step $k says where" "resumed from .*step-0000000$k.h5 at step $k" "$TMP/k$k.b"
  ident "$REF" "$TMP/k$k/checkpoints/step-00000012.h5"
  expect_eq "stopped at $k and resumed == uninterrupted, bitwise" 0 "$?"
done

# The 2-rank checkpoint at step 3 resumed on 1 rank (x64) and on 4 ranks (x16): same global batch.
for W in 1 4; do
  mkdir -p "$TMP/w$W/checkpoints" && cp "$TMP/k3/checkpoints/step-00000003.h5" "$TMP/w$W/checkpoints/"
  timeout 300 $M -n $W "$CNNSCALE" train $COMMON --batch-size $((64 / W)) --max-steps 12 --run-dir "$TMP/w$W" >"$TMP/w$W.out" 2>&1
  expect_eq "resume a 2-rank checkpoint on $W rank(s) exit status" 0 "$?"
  close "$REF" "$TMP/w$W/checkpoints/step-00000012.h5"
  expect_eq "resumed on $W rank(s) matches within fp32 reduction-order tolerance" 0 "$?"
done

# A different global batch is allowed, with a warning.
mkdir -p "$TMP/gb/checkpoints" && cp "$TMP/k3/checkpoints/step-00000003.h5" "$TMP/gb/checkpoints/"
timeout 300 $M -n 2 "$CNNSCALE" train $COMMON --batch-size 16 --max-steps 6 --run-dir "$TMP/gb" >"$TMP/gb.out" 2>&1
expect_eq "resume with another global batch exit status" 0 "$?"
expect_grep "global batch change warned" 'warning: resuming a run with global batch 64 at global batch 32' "$TMP/gb.out"

# A truncated newest checkpoint is reported and skipped.
cp -r "$TMP/ref" "$TMP/trunc"
truncate -s 2000 "$TMP/trunc/checkpoints/step-00000012.h5"
timeout 300 $M -n 2 "$CNNSCALE" train $COMMON --batch-size 32 --max-steps 12 --run-dir "$TMP/trunc" >"$TMP/trunc.out" 2>&1
expect_eq "resume past a truncated checkpoint exit status" 0 "$?"
expect_grep "truncated checkpoint named" 'warning: skipping checkpoint: .*step-00000012.h5' "$TMP/trunc.out"
expect_grep "resumed from the previous one" 'resumed from .*step-00000008.h5 at step 8' "$TMP/trunc.out"
ident "$REF" "$TMP/trunc/checkpoints/step-00000012.h5"
expect_eq "after skipping the damaged one, the result is still bitwise identical" 0 "$?"

# A model that does not match the checkpoint names the first mismatching parameter.
timeout 120 "$CNNSCALE" train --synthetic --model "conv(8,3) relu flatten linear(10)" --batch-size 64 --max-steps 13 \
  --run-dir "$TMP/ref" >"$TMP/mm.out" 2>&1
expect_eq "model mismatch exit status" 2 "$?"
expect_grep "model mismatch explained" 'cnnscale: error: .*configured model' "$TMP/mm.out"

# Stop signal to ONE rank only: all ranks agree, checkpoint, exit 75; resume finishes bitwise equal.
timeout 300 $M -n 2 "$CNNSCALE" train $COMMON --batch-size 32 --max-steps 300 --log-every 1 --run-dir "$TMP/sigref" >"$TMP/sigref.out" 2>&1
( $M -n 2 "$CNNSCALE" train $COMMON --batch-size 32 --max-steps 300 --log-every 1 --run-dir "$TMP/sig" >"$TMP/sig.out" 2>&1; echo $? >"$TMP/sig.rc" ) &
for _ in $(seq 1 600); do grep -q 'step 5/300' "$TMP/sig.out" 2>/dev/null && break; sleep 0.1; done
victim=$(pgrep -f "cnnscale train .*$TMP/sig\$" | tail -1)
[ -n "$victim" ] && kill -USR1 "$victim"
wait
expect_eq "signalled run exit status (75 = checkpointed on signal)" 75 "$(cat "$TMP/sig.rc")"
expect_grep "signalled run says so" 'stop signal received: checkpointed at step' "$TMP/sig.out"
timeout 300 $M -n 2 "$CNNSCALE" train $COMMON --batch-size 32 --max-steps 300 --log-every 50 --run-dir "$TMP/sig" >"$TMP/sig2.out" 2>&1
expect_eq "resume after signal exit status" 0 "$?"
ident "$TMP/sigref/checkpoints/step-00000300.h5" "$TMP/sig/checkpoints/step-00000300.h5"
expect_eq "signal + resume == uninterrupted, bitwise" 0 "$?"

# NaN: an absurd learning rate stops with the step named; the last good checkpoint is untouched.
# (Another --lr is another configuration, which the reference's run directory refuses:
# the run starts from its checkpoint with --resume PATH in a directory of its own.)
sum_before=$(md5sum "$TMP/ref/checkpoints/step-00000012.h5" | cut -d' ' -f1)
timeout 300 $M -n 2 "$CNNSCALE" train --synthetic --model mnist_cnn --lr 1e12 --momentum 0.9 --seed 11 --log-every 1 --no-eval \
  --batch-size 32 --max-steps 40 --resume "$TMP/ref/checkpoints/step-00000012.h5" --run-dir "$TMP/nan" >"$TMP/nan.out" 2>&1
expect_eq "NaN run exit status" 2 "$?"
expect_grep "NaN step named" 'cnnscale: error: the training loss is not finite at step [0-9]+' "$TMP/nan.out"
expect_eq "last good checkpoint untouched" "$sum_before" "$(md5sum "$TMP/ref/checkpoints/step-00000012.h5" | cut -d' ' -f1)"
expect_eq "no newer checkpoint written" "" "$(ls "$TMP/nan/checkpoints" 2>/dev/null)"

# Unwritable checkpoint directory (a file is in the way; root ignores permission bits).
mkdir -p "$TMP/ro" && touch "$TMP/ro/checkpoints"
timeout 120 "$CNNSCALE" train $COMMON --batch-size 64 --max-steps 2 --run-dir "$TMP/ro" >"$TMP/ro.out" 2>&1
expect_eq "unwritable checkpoint dir exit status" 2 "$?"
expect_grep "unwritable checkpoint dir named" "cnnscale: error: cannot create checkpoint directory '$TMP/ro/checkpoints'" "$TMP/ro.out"

# Disk full: a 6 MiB tmpfs cannot hold a mnist_cnn checkpoint (parameters + momentum = 9.6 MB; root only).
if [ "$(id -u)" = 0 ] && mkdir -p "$TMP/full" && mount -t tmpfs -o size=6M tmpfs "$TMP/full" 2>/dev/null; then
  timeout 120 "$CNNSCALE" train $COMMON --batch-size 64 --max-steps 2 --checkpoint-every 1 --run-dir "$TMP/full/run" >"$TMP/full.out" 2>&1
  rc=$?
  expect_eq "disk full exit status" 2 "$rc"
  expect_grep "disk full explained" "cnnscale: error: cannot write '.*step-00000001.h5': No space left on device; the disk is full" "$TMP/full.out"
  expect_eq "no temporary checkpoint left behind" "" "$(ls "$TMP/full/run/checkpoints/" 2>/dev/null | grep tmp)"
  if [ -f "$TMP/full/run/checkpoints/latest" ]; then
    l=$(cat "$TMP/full/run/checkpoints/latest")
    "$DIFF" "$TMP/full/run/checkpoints/$l" "$TMP/full/run/checkpoints/$l" >/dev/null 2>&1
    expect_eq "the checkpoint latest names still reads" 0 "$?"
  fi
  umount "$TMP/full"
fi

# A checkpoint of another optimizer is a configuration mismatch, named as such (not "damaged").
"$CNNSCALE" train $COMMON --batch-size 32 --max-steps 13 --optimizer adamw --resume "$REF" --run-dir "$TMP/optmix" >"$TMP/optmix.out" 2>&1
expect_eq "resume with another optimizer: status" 2 "$?"
expect_grep "resume with another optimizer: named" "written with --optimizer sgd but this run uses adamw; use the same --optimizer" "$TMP/optmix.out"
if grep -q damaged "$TMP/optmix.out"; then bad "resume with another optimizer: called damage"; else ok "resume with another optimizer: not called damage"; fi
finish
