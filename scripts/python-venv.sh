#!/usr/bin/env bash
# python-venv.sh — the PyPI-only Python packages the tests check against (what Debian 12
# lacks), in one venv cached outside the clone, made once per machine (~5.5 GB, about a
# minute from PyPI; a second run only checks it):
#   torch 2.15      a real torchrun ≥ 2.0 and its agent store (tests/launch/torchrun_real.sh)
#   tensorboard     TensorBoard's own reader of our event files (tests/train/tensorboard.sh)
#   onnxruntime     runs `cnnscale export --onnx` files (tests/nn/onnx_export.sh)
# check-deps: optional python onnxruntime (PyPI only, in this venv; onnx_export.sh SKIPs without it)
# Debian's torch/torchvision/h5py (1.13/0.14) are the other cross-checks' references
# (install-deps.sh --tests). Python torch is a test peer only, never a build or runtime
# dependency of cnnscale. Without PyPI it warns and returns 0: the tests that need the
# venv then SKIP, which scripts/test.sh reports as NOT CHECKED (and CI fails).
# Usage: scripts/python-venv.sh [VENV_DIR]   (default $CNNSCALE_PYPI_VENV or /var/cache/cnnscale/pypi-venv)
set -uo pipefail
VENV=${1:-${CNNSCALE_PYPI_VENV:-/var/cache/cnnscale/pypi-venv}}
PINS=("torch==2.15.0" "tensorboard==2.21.0" "onnxruntime==1.32.0" numpy)
have() {
  "$VENV/bin/python" - >/dev/null 2>&1 <<'PY'
import sys, torch, torch.distributed.run, tensorboard, onnxruntime
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
sys.exit(0 if torch.__version__.startswith("2.15.0") and tensorboard.__version__ == "2.21.0" and
         onnxruntime.__version__ == "1.32.0" else 1)
PY
}
if have; then
  echo "python-venv: torch 2.15.0, tensorboard 2.21.0 and onnxruntime 1.32.0 already in $VENV"
  exit 0
fi
echo "python-venv: installing ${PINS[*]} from PyPI into $VENV (once per machine, ~5.5 GB)"
mkdir -p "$(dirname "$VENV")"
if ! { [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"; } ||
  ! "$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"; then
  echo "python-venv: WARNING: could not install ${PINS[*]} from PyPI into $VENV; the tests that need them SKIP" >&2
  exit 0
fi
if have; then echo "python-venv: ready in $VENV"; else echo "python-venv: WARNING: $VENV does not import what it should" >&2; fi
exit 0
