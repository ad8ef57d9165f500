#!/usr/bin/env bash
# Errors found before MPI starts. A rank other than the launcher's rank 0 that has one
# (here: its node-local --config file is missing) prints it, prefixed with its rank
# and host, instead of exiting silently. An error every rank has alike (a bad option
# on the shared command line) is printed once, by rank 0.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$MPIEXEC --allow-run-as-root --oversubscribe --bind-to none"
printf 'synthetic = true\nmax-steps = 2\nmodel = conv(4,3) relu flatten linear(10)\n' >"$TMP/good.ini"

# 1. Only rank 1's config is missing (MPMD launch: rank 0 gets a readable one).
timeout 120 $M -n 1 "$CNNSCALE" train --config "$TMP/good.ini" : -n 1 "$CNNSCALE" train --config "$TMP/node-local.ini" \
  >"$TMP/local.out" 2>&1
expect_eq "rank-1-only error: status" 2 "$?"
expect_grep "rank 1 says what and where" \
  "cnnscale: error: rank 1 on $(hostname): cannot read --config file '$TMP/node-local.ini'" "$TMP/local.out"
expect_eq "printed once" 1 "$(grep -c 'cnnscale: error:' "$TMP/local.out")"

# 2. The same bad option on every rank: one line, from rank 0.
timeout 120 $M -n 2 "$CNNSCALE" train --synthetic --no-such-option >"$TMP/same.out" 2>&1
expect_eq "identical error: status" 2 "$?"
expect_grep "identical error named" "cnnscale: error: train: unrecognised option '--no-such-option'" "$TMP/same.out"
expect_eq "identical error printed once" 1 "$(grep -c 'cnnscale: error:' "$TMP/same.out")"
finish
