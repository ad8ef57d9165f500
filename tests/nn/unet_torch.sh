#!/usr/bin/env bash
# unet_torch.sh — cnnscale's built-in `unet(D,W)` against the U-Net as PyTorch users write it
# (tests/nn/unet_reference.py: milesial/Pytorch-UNet's layout, bilinear=False) (issue 50):
# - its freshly initialised checkpoint loads STRICTLY into UNet(C, K, D, W) (the same names and
#   shapes), with PyTorch's default initialisation (every conv and transposed conv weight within
#   its kaiming-uniform(a=√5) bound 1/√fan_in with std bound/√3 within 10 % where it has 2000+
#   values; batch norms 1 and 0);
# - eval-mode logits (K×H×W per sample) equal the module's in float64 (rel 1e-5);
# - one training step (batch statistics, per-pixel cross-entropy over N×H×W label maps) from
#   that checkpoint against the module in float64 and float32 (tests/nn/torch_reference.py unet:
#   the loss 1e-5, every gradient as close to float64's as torch fp32's, the running
#   statistics 1e-4, ReLU and max-pool decisions followed only at float32 ties);
# for unet(2,8) at 32×48 and 20×28 and unet(2,32) at 16×24 (its 64- and 128-channel 3×3
# convolutions take cnnscale's own Winograd kernels where oneDNN's are AVX2: docs/models.md),
# with this CPU's oneDNN kernels and a forced other ISA (lib.sh onednn_isas); and the module
# exported by scripts/export-onnx.py trains as --model FILE.onnx exactly as unet(2,8) does, and
# `cnnscale export` writes unet(2,8) as ONNX that ONNX Runtime runs to cnnscale's logits.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "torch, h5py" "python3-torch python3-h5py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
onednn_isas

check() {  # check ISA MODEL C H W CLASSES
  local isa=$1 m=$2 c=$3 h=$4 w=$5 k=$6
  local name="$m-${h}x$w" d="$TMP/$1-$2-${h}x$w"
  mkdir -p "$d/cap"
  with_isa "$isa" "$TOOL" init "$m" "$c" "$h" "$w" "$k" 5 "$d/ck" --segmentation >"$d/init.txt" 2>&1
  expect_eq "$isa $name: init checkpoint" 0 "$?"
  cp "$d/ck/step-00000000.h5" "$d/ckpt.h5"
  "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, $c, $h, $w).astype(np.float32).tofile('$d/x.f32')"
  "$PY" -c "import numpy as np; np.random.seed(12); np.random.randint(0, $k, (3, $h, $w)).astype(np.int32).tofile('$d/y.i32')"
  with_isa "$isa" "$TOOL" eval "$m" "$c" "$h" "$w" "$k" "$d/ckpt.h5" "$d/x.f32" 3 "$d/eval.f32" --segmentation \
    >"$d/eval.txt" 2>&1
  expect_eq "$isa $name: eval" 0 "$?"
  "$PY" - "$d" "$m" "$c" "$h" "$w" "$k" >"$d/module.txt" 2>&1 <<'PYEOF'
import math
import os
import sys

import h5py
import numpy as np
import torch

d, m = sys.argv[1], sys.argv[2]
C, H, W, K = (int(v) for v in sys.argv[3:7])
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/nn")
from unet_reference import UNet  # noqa: E402

depth, width = (int(v) for v in m[5:-1].split(","))
net = UNet(C, K, depth, width)
sd = {k: torch.as_tensor(np.array(v[()])) for k, v in h5py.File(f"{d}/ckpt.h5", "r")["model"].items()}


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


missing, unexpected = net.load_state_dict(sd, strict=False)
report(f"the checkpoint's {len(sd)} tensors load strictly into UNet({C}, {K}, {depth}, {width})",
       not missing and not unexpected, f"missing {missing[:3]}, unexpected {unexpected[:3]}")
bad = []
for name, mod in net.named_modules():
    if isinstance(mod, (torch.nn.Conv2d, torch.nn.ConvTranspose2d)):
        w = mod.weight.detach().double()
        fan_in = w.shape[1] * w.shape[2] * w.shape[3]  # ConvTranspose2d: torch's fan_in is its dim 1 too
        bound = 1 / math.sqrt(fan_in)
        if w.abs().max() > bound * (1 + 1e-6) or (w.numel() >= 2000 and abs(w.std() / (bound / math.sqrt(3)) - 1) > 0.1):
            bad.append(f"{name} max {float(w.abs().max()):.3g} std {float(w.std()):.3g} bound {bound:.3g}")
    if isinstance(mod, torch.nn.BatchNorm2d) and not (bool((mod.weight == 1).all()) and bool((mod.bias == 0).all())):
        bad.append(f"{name} not 1/0")
report("initialisation: PyTorch's defaults (kaiming-uniform a=√5 conv and transposed-conv weights, batch norms 1/0)",
       not bad, "; ".join(bad[:3]))
net = net.double().eval()
x = torch.from_numpy(np.fromfile(f"{d}/x.f32", np.float32).reshape(3, C, H, W).astype(np.float64))
with torch.no_grad():
    ref = net(x).numpy()
ours = np.fromfile(f"{d}/eval.f32", np.float32).reshape(ref.shape)
err = float(np.abs(ours - ref).max() / np.abs(ref).max())
report(f"eval logits {K}x{H}x{W} per sample equal the module's in float64 (rel {err:.1e} <= 1e-5)", err <= 1e-5)
PYEOF
  expect_eq "$isa $name: the module check ran" 0 "$?"
  report_lines "$d/module.txt" "$isa $name: "
  with_isa "$isa" "$TOOL" grad "$m" "$c" "$h" "$w" "$k" "$d/ckpt.h5" "$d/x.f32" 3 "$d/grad.f32" "$d/y.i32" \
    --segmentation --capture "$d/cap" >"$d/grad.txt" 2>"$d/grad.err"
  expect_eq "$isa $name: training step with --capture" 0 "$?"
  (cd "$CNNSCALE_SOURCE/tests/nn" && "$PY" torch_reference.py unet "$m" "$c" "$h" "$w" "$k" "$d") >"$d/result" 2>&1
  expect_eq "$isa $name: torch reference ran" 0 "$?"
  report_lines "$d/result" "$isa $name: "
}

for isa in "${ISAS[@]}"; do
  if [ "$isa" != native ]; then
    got=$(with_isa "$isa" "$TOOL" isa)
    expect_eq "ONEDNN_MAX_CPU_ISA=$isa: oneDNN runs that ISA" "$(tr '[:upper:]' '[:lower:]' <<<"$isa")" "$got"
  fi
  check "$isa" "unet(2,8)" 3 32 48 5
  check "$isa" "unet(2,8)" 2 20 28 3
  check "$isa" "unet(2,32)" 3 16 24 4
done

# The same module exported by scripts/export-onnx.py trains as --model FILE.onnx: the imported
# graph has unet(2,8)'s 66 parameter names and shapes, and a training step of each from the
# ONNX file's weights (mapped by name into the built-in's flat layout) gives the same loss and
# gradients (rel 1e-6).
d="$TMP/onnx"
mkdir -p "$d"
x="$TMP/native-unet(2,8)-32x48"
"$PY" "$CNNSCALE_SOURCE/scripts/export-onnx.py" "$CNNSCALE_SOURCE/tests/nn/unet_reference.py:UNet" "$d/unet.onnx" \
  --kwargs '{"n_channels": 3, "n_classes": 5, "depth": 2, "width": 8}' --input-shape 3,32,48 --seed 5 \
  >"$d/export.log" 2>&1
expect_eq "export-onnx.py unet_reference.py:UNet" 0 "$?"
"$TOOL" init "$d/unet.onnx" 3 32 48 5 7 "$d/oi" --segmentation >"$d/oi.log" 2>&1 &&
  "$TOOL" dump "$d/unet.onnx" 3 32 48 5 "$d/oi/step-00000000.h5" "$d/onnx.f32" --segmentation >"$d/onnx-params.txt" &&
  "$TOOL" init "unet(2,8)" 3 32 48 5 1 "$d/bi" --segmentation >"$d/bi.log" &&
  "$TOOL" dump "unet(2,8)" 3 32 48 5 "$d/bi/step-00000000.h5" "$d/builtin0.f32" --segmentation >"$d/builtin-params.txt"
expect_eq "both models' parameters dumped" 0 "$?"
"$PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" map "$d" U-Net 66 >"$d/map.txt" 2>&1
expect_eq "the parameter map ran" 0 "$?"
report_lines "$d/map.txt"
"$TOOL" grad "$d/unet.onnx" 3 32 48 5 "$d/oi/step-00000000.h5" "$x/x.f32" 3 "$d/grad-onnx.f32" "$x/y.i32" \
  --segmentation >"$d/grad-onnx.txt" 2>&1
expect_eq "a training step of --model unet.onnx" 0 "$?"
"$TOOL" grad "unet(2,8)" 3 32 48 5 "$d/bi/step-00000000.h5" "$x/x.f32" 3 "$d/grad-builtin.f32" "$x/y.i32" \
  --segmentation --params "$d/builtin.f32" >"$d/grad-builtin.txt" 2>&1
expect_eq "a training step of unet(2,8) from the ONNX file's weights" 0 "$?"
"$PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" compare "$d" >"$d/cmp.txt" 2>&1
expect_eq "the ONNX comparison ran" 0 "$?"
report_lines "$d/cmp.txt"

# And out again: `cnnscale export` writes the checkpoint as ONNX with a dense output
# (logits N×K×H×W), which ONNX Runtime runs to cnnscale's eval logits (rel 1e-5).
"$CNNSCALE" export "$x/ckpt.h5" --onnx "$d/out.onnx" --input-shape 3,32,48 --classes 5 >"$d/export-out.log" 2>&1
expect_eq "cnnscale export of unet(2,8)" 0 "$?"
ort_python
expect_eq "a python that imports onnxruntime (scripts/python-venv.sh)" 1 "$([ -n "$ORT_PY" ] && echo 1 || echo 0)"
if [ -n "$ORT_PY" ]; then
  "$ORT_PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" ort "$d/out.onnx" "$x" 3,32,48 5,32,48 output >"$d/ort.txt" 2>&1
  expect_eq "the ONNX Runtime check ran" 0 "$?"
  report_lines "$d/ort.txt"
fi
finish
