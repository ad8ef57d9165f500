#!/usr/bin/env bash
# test.sh — installs what is needed, builds, and runs every CTest label:
# unit, mpi, slurm, convergence, gpu (gpu tests SKIP without a CUDA device).
# Between build and tests, scripts/check-deps.sh proves that install-deps.sh installs
# every Debian package the build, the tests and the demo used (a fresh machine works);
# install-deps.sh --tests adds the references the cross-checks compare with (Debian's
# torch, torchvision, h5py) and scripts/python-venv.sh the PyPI-only ones (a cached venv:
# TensorBoard's reader, torch ≥ 2 for a real torchrun).
# At the end, every test that SKIPped is listed: a gpu test without a GPU as "skipped
# (no GPU)", any other as "NOT CHECKED" with its reason. With CI=true a NOT CHECKED test
# fails the run: a cross-check that did not run checked nothing.
# Usage: scripts/test.sh [ctest arguments, e.g. -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests  # and the references the tests cross-check against
scripts/build.sh
scripts/check-deps.sh
scripts/python-venv.sh  # PyPI-only test peers, cached outside the clone
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd build
mkdir -p Testing  # a fresh build tree has none before ctest's first run
set +e
ctest --output-on-failure --timeout 1200 "$@" 2>&1 | tee Testing/test-sh.log
status=${PIPESTATUS[0]}
set -e
cp Testing/Temporary/LastTest.log Testing/test-sh.outputs.log 2>/dev/null || : >Testing/test-sh.outputs.log  # ctest -N overwrites it
mapfile -t skipped < <(sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) \(Skipped\)$/\1/p' Testing/test-sh.log)
gpu_tests=" $(ctest -N -L gpu | sed -nE 's/^[[:space:]]*Test[[:space:]]+#[0-9]+: ([^ ]+)$/\1/p' | tr '\n' ' ') "
# Tests of the CUDA build itself (label cuda_build: the GPU kit) in a build without the toolkit.
cuda_build_tests=""
readelf -d bin/cnnscale 2>/dev/null | grep -q libcudart ||
  cuda_build_tests=" $(ctest -N -L cuda_build | sed -nE 's/^[[:space:]]*Test[[:space:]]+#[0-9]+: ([^ ]+)$/\1/p' | tr '\n' ' ') "
not_checked=0
for t in "${skipped[@]+"${skipped[@]}"}"; do
  # The test's own SKIP line says why (CTest keeps every test's output in LastTest.log).
  why=$(awk -v t="$t" '$0 ~ "^[0-9]+/[0-9]+ Test: " t "$" {on = 1; next} on && /^[0-9]+\/[0-9]+ Test: / {on = 0}
                       on && /SKIP/ {sub(/^.*SKIP:? */, ""); print; exit}' Testing/test-sh.outputs.log)
  if [[ "$gpu_tests" == *" $t "* ]]; then
    echo "skipped (no GPU): $t${why:+ — $why}"
  elif [[ "$cuda_build_tests" == *" $t "* ]]; then
    echo "skipped (CPU-only build, no CUDA toolkit): $t${why:+ — $why}"
  else
    echo "NOT CHECKED: $t${why:+ — $why}"
    not_checked=$((not_checked + 1))
  fi
done
if [ "$not_checked" -gt 0 ]; then
  echo "test.sh: $not_checked test(s) outside the gpu label did not run: what they check is NOT CHECKED on this machine"
  if [ "${CI:-}" = true ] && [ "$status" -eq 0 ]; then
    echo "test.sh: CI=true: failing, as a skipped cross-check checks nothing"
    status=1
  fi
fi
exit "$status"
