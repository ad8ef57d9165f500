#!/usr/bin/env bash
# python-venv.sh — the PyPI-only Python tools the tests cross-check against, in a venv
# cached outside the clone (made once per machine, ~5 GB, ~1 min from PyPI):
#   /var/cache/cnnscale/torch-venv  torch (torchrun ≥ 2.0 and its agent store: tests/launch/torchrun_real.sh)
# Python torch is a test peer only, never a build or runtime dependency of cnnscale.
# Without PyPI it says so and returns 0: the tests that need it then SKIP loudly.
# Usage: scripts/python-venv.sh [VENV_DIR]
set -uo pipefail
VENV=${1:-${CNNSCALE_TORCH_VENV:-/var/cache/cnnscale/torch-venv}}
TORCH_VERSION=2.15.0
have() { "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') else 1)" \
  >/dev/null 2>&1; }
if have; then
  echo "python-venv: torch $TORCH_VERSION already in $VENV"
  exit 0
fi
echo "python-venv: installing torch $TORCH_VERSION from PyPI into $VENV (once per machine, ~5 GB)"
mkdir -p "$(dirname "$VENV")"
if ! { [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"; } ||
  ! "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" numpy; then
  echo "python-venv: WARNING: could not install torch from PyPI; tests/launch/torchrun_real.sh will SKIP" >&2
  exit 0
fi
have && echo "python-venv: torch $TORCH_VERSION ready in $VENV"
exit 0
