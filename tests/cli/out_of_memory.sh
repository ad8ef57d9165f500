#!/usr/bin/env bash
# Asking for more memory than a rank can get is one "cnnscale: error: out of memory
# while …" line naming the size asked, the real limit and a fix, found before any
# work, with status 2: never an abort with a backtrace (status 134). `ulimit -v` makes
# the limit the same on every machine.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
LIMIT_KB=3000000  # ~2.9 GiB of address space per process

# 1. The allreduce benchmark, one rank and two: -e 40G cannot fit.
( ulimit -v $LIMIT_KB; timeout 120 "$CNNSCALE" allreduce -b 40G -e 40G -c 0 >"$TMP/ar1.out" 2>&1; echo $? >"$TMP/ar1.rc" )
expect_eq "allreduce -e 40G, 1 rank: status" 2 "$(cat "$TMP/ar1.rc")"
expect_grep "names the size, the limit and the fix" \
  'cnnscale: error: out of memory while allocating the allreduce buffer for --maxbytes 40G: 40\.0 GiB asked, at most [0-9.]+ [GM]iB available \(ulimit -v 2\.9 GiB.*\); lower -e/--maxbytes' \
  "$TMP/ar1.out"
( ulimit -v $LIMIT_KB; timeout 120 $M -n 2 "$CNNSCALE" allreduce -b 40G -e 40G -c 0 >"$TMP/ar2.out" 2>&1; echo $? >"$TMP/ar2.rc" )
expect_eq "allreduce -e 40G, 2 ranks: status" 2 "$(cat "$TMP/ar2.rc")"
expect_grep "2 ranks: the rank and host are named" \
  "cnnscale: error: out of memory while allocating the allreduce buffer for --maxbytes 40G on rank [01] \($(hostname)\): 40\.0 GiB asked" \
  "$TMP/ar2.out"
expect_eq "2 ranks: said once" 1 "$(grep -c 'cnnscale: error:' "$TMP/ar2.out")"
for f in ar1 ar2; do
  if grep -Eq 'Aborted|Signal: |backtrace|bad_alloc' "$TMP/$f.out"; then bad "$f: no abort or backtrace"; sed 's/^/    | /' "$TMP/$f.out" | head; else ok "$f: no abort or backtrace"; fi
done

# 2. Training a model whose parameters cannot fit (linear(100000000) on 784 inputs:
#    78 G parameters): refused before the first step, with the size.
( ulimit -v $LIMIT_KB; timeout 120 "$CNNSCALE" train --synthetic --model "flatten linear(100000000) linear(10)" \
    --max-steps 1 >"$TMP/tr.out" 2>&1; echo $? >"$TMP/tr.rc" )
expect_eq "huge model: status" 2 "$(cat "$TMP/tr.rc")"
expect_grep "huge model: what, size and limit" \
  'cnnscale: error: out of memory while allocating the parameters and gradients of model .* \(79500000010 parameters\): 592\.[0-9] GiB asked, at most .* available \(ulimit -v.*\); choose a smaller --model' \
  "$TMP/tr.out"
finish
