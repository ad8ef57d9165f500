#!/usr/bin/env bash
# test.sh — installs what is needed, builds, and runs every CTest label:
# unit, mpi, slurm, convergence, gpu (gpu tests SKIP without a CUDA device).
# Between build and tests, scripts/check-deps.sh proves that install-deps.sh installs
# every Debian package the build, the tests and the demo used (a fresh machine works);
# scripts/python-venv.sh then makes the PyPI-only test peers (a cached venv).
# Usage: scripts/test.sh [ctest arguments, e.g. -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/check-deps.sh
scripts/python-venv.sh  # PyPI-only test peers (torch for a real torchrun), cached outside the clone
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd build
ctest --output-on-failure --timeout 1200 "$@"
