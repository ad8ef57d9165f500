#!/usr/bin/env bash
# unet_torch.sh — cnnscale's built-in `unet(D,W)` against the U-Net as PyTorch users write it
# (tests/nn/unet_reference.py: milesial/Pytorch-UNet's layout, bilinear=False) (issue 50):
# - its freshly initialised checkpoint loads STRICTLY into UNet(C, K, D, W) (the same names and
#   shapes), with PyTorch's default initialisation (every conv and transposed conv weight within
#   its kaiming-uniform(a=√5) bound 1/√fan_in, fan_in the product of its dims 1.., with std
#   bound/√3 within 10 % where it has 2000+ values and its largest within 5 % of the bound where
#   it has 256+; batch norms 1 and 0);
# - eval-mode logits (K×H×W per sample) equal the module's in float64 (rel 1e-5);
# - one training step (batch statistics, per-pixel cross-entropy over N×H×W label maps) from
#   that checkpoint against the module in float64 and float32 (tests/nn/torch_reference.py unet:
#   the loss 1e-5, every gradient as close to float64's as torch fp32's, the running
#   statistics 1e-4, ReLU and max-pool decisions followed only at float32 ties);
# for unet(2,8) at 32×48 and 20×28 and unet(2,32) at 16×24 (its 64- and 128-channel 3×3
# convolutions take cnnscale's own Winograd kernels where oneDNN's are AVX2: docs/models.md),
# and, on volumes (--depth), the same three checks of the 3-D U-Net against UNet(..., dims=3)
# (Conv3d, BatchNorm3d, MaxPool3d, ConvTranspose3d; logits K×D×H×W, per-voxel cross-entropy
# over N×D×H×W label maps, torch_reference.py unet --depth) for unet(2,4) on 2×16³ with 3
# classes and unet(1,8) on 1×8×12×16 (D, H and W unequal: a swapped axis shows) with 4,
# with this CPU's oneDNN kernels and a forced other ISA (lib.sh onednn_isas); and the module
# exported by scripts/export-onnx.py trains as --model FILE.onnx exactly as unet(2,8) does, and
# `cnnscale export` writes unet(2,8) as ONNX that ONNX Runtime runs to cnnscale's logits; the
# same for the 3-D unet(2,4): UNet(dims=3) exported with --input-shape 2,16,16,16 trains as
# --model FILE.onnx with unet(2,4)'s 66 parameter names and sizes, its loss and gradients
# (rel 1e-6), and `cnnscale export --input-shape 2,16,16,16` of its checkpoint runs in ONNX
# Runtime to cnnscale's eval logits N×3×16×16×16 (rel 1e-5).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "torch, h5py" "python3-torch python3-h5py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
onednn_isas

check() {  # check ISA MODEL C H W CLASSES [DEPTH]: DEPTH given, the samples are C×DEPTH×H×W volumes
  local isa=$1 m=$2 c=$3 h=$4 w=$5 k=$6 dd=${7:-0}
  local size="${h}x$w" V=()
  if [ "$dd" -gt 0 ]; then size="${dd}x$size" V=(--depth "$dd"); fi
  local sp="${size//x/, }"  # the spatial dims as numpy's shape takes them
  local name="$m-$size" d="$TMP/$1-$2-$size"
  mkdir -p "$d/cap"
  with_isa "$isa" "$TOOL" init "$m" "$c" "$h" "$w" "$k" 5 "$d/ck" --segmentation "${V[@]}" >"$d/init.txt" 2>&1
  expect_eq "$isa $name: init checkpoint" 0 "$?"
  cp "$d/ck/step-00000000.h5" "$d/ckpt.h5"
  "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, $c, $sp).astype(np.float32).tofile('$d/x.f32')
np.random.seed(12); np.random.randint(0, $k, (3, $sp)).astype(np.int32).tofile('$d/y.i32')"
  with_isa "$isa" "$TOOL" eval "$m" "$c" "$h" "$w" "$k" "$d/ckpt.h5" "$d/x.f32" 3 "$d/eval.f32" --segmentation \
    "${V[@]}" >"$d/eval.txt" 2>&1
  expect_eq "$isa $name: eval" 0 "$?"
  "$PY" - "$d" "$m" "$c" "$h" "$w" "$k" "$dd" >"$d/module.txt" 2>&1 <<'PYEOF'
import math
import os
import sys

import h5py
import numpy as np
import torch

d, m = sys.argv[1], sys.argv[2]
C, H, W, K, DD = (int(v) for v in sys.argv[3:8])
spatial = [DD, H, W] if DD else [H, W]  # DD > 0: volumes, the 3-D U-Net
dims = len(spatial)
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/nn")
from unet_reference import UNet  # noqa: E402

depth, width = (int(v) for v in m[5:-1].split(","))
net = UNet(C, K, depth, width, dims=dims)
sd = {k: torch.as_tensor(np.array(v[()])) for k, v in h5py.File(f"{d}/ckpt.h5", "r")["model"].items()}


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


missing, unexpected = net.load_state_dict(sd, strict=False)
report(f"the checkpoint's {len(sd)} tensors load strictly into UNet({C}, {K}, {depth}, {width}"
       + (", dims=3)" if dims == 3 else ")"),
       not missing and not unexpected, f"missing {missing[:3]}, unexpected {unexpected[:3]}")
nn = torch.nn
convs = (nn.Conv3d, nn.ConvTranspose3d) if dims == 3 else (nn.Conv2d, nn.ConvTranspose2d)
bns = nn.BatchNorm3d if dims == 3 else nn.BatchNorm2d
bad, seen = [], 0
for name, mod in net.named_modules():
    if isinstance(mod, convs):
        seen += 1
        w = mod.weight.detach().double()
        fan_in = math.prod(w.shape[1:])  # ConvTranspose: torch's fan_in is its dim 1 (× the window) too
        bound = 1 / math.sqrt(fan_in)
        # and where it has 256+ values its largest within 5 % of the bound (uniform: 0.95^256 = 2e-6 odds
        # of less), which a transposed conv's fan_in taken from the wrong dim (×√2 off here) fails
        if w.abs().max() > bound * (1 + 1e-6) or (w.numel() >= 2000 and abs(w.std() / (bound / math.sqrt(3)) - 1) > 0.1) \
                or (w.numel() >= 256 and w.abs().max() < 0.95 * bound):
            bad.append(f"{name} max {float(w.abs().max()):.3g} std {float(w.std()):.3g} bound {bound:.3g}")
    if isinstance(mod, bns) and not (bool((mod.weight == 1).all()) and bool((mod.bias == 0).all())):
        bad.append(f"{name} not 1/0")
want = 4 * depth + 2 + depth + 1  # two convs per DoubleConv (inc, down1..D, up1..D), D transposed, outc
report(f"initialisation: PyTorch's defaults (kaiming-uniform a=√5 conv and transposed-conv weights, batch norms "
       f"1/0; {seen} {dims}-D convs)", not bad and seen == want,
       "; ".join(bad[:3]) or ("" if seen == want else f"expected {want} convs"))
net = net.double().eval()
x = torch.from_numpy(np.fromfile(f"{d}/x.f32", np.float32).reshape([3, C] + spatial).astype(np.float64))
with torch.no_grad():
    ref = net(x).numpy()
ours = np.fromfile(f"{d}/eval.f32", np.float32)
shape = "x".join(map(str, [K] + spatial))
if ours.size == ref.size:
    err = float(np.abs(ours.reshape(ref.shape) - ref).max() / np.abs(ref).max())
    report(f"eval logits {shape} per sample equal the module's in float64 (rel {err:.1e} <= 1e-5)", err <= 1e-5)
else:
    report(f"eval logits {shape} per sample equal the module's in float64 ({ours.size} floats, expected {ref.size})",
           False)
PYEOF
  expect_eq "$isa $name: the module check ran" 0 "$?"
  report_lines "$d/module.txt" "$isa $name: "
  with_isa "$isa" "$TOOL" grad "$m" "$c" "$h" "$w" "$k" "$d/ckpt.h5" "$d/x.f32" 3 "$d/grad.f32" "$d/y.i32" \
    --segmentation "${V[@]}" --capture "$d/cap" >"$d/grad.txt" 2>"$d/grad.err"
  expect_eq "$isa $name: training step with --capture" 0 "$?"
  (cd "$CNNSCALE_SOURCE/tests/nn" && "$PY" torch_reference.py unet "$m" "$c" "$h" "$w" "$k" "$d" "${V[@]}") \
    >"$d/result" 2>&1
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
  check "$isa" "unet(2,4)" 2 16 16 3 16
  check "$isa" "unet(1,8)" 1 12 16 4 8
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

# The 3-D U-Net the same way: UNet(dims=3) exported by scripts/export-onnx.py (--input-shape
# C,D,H,W: Conv, BatchNormalization, MaxPool, ConvTranspose and Concat on 5-D tensors) trains as
# --model FILE.onnx exactly as unet(2,4) does on 2×16³ volumes (its 66 parameter names and
# sizes; the same loss and gradients, rel 1e-6), and `cnnscale export --input-shape C,D,H,W`
# writes unet(2,4) as ONNX that ONNX Runtime runs to cnnscale's eval logits (N×3×16×16×16).
d="$TMP/onnx3d"
mkdir -p "$d"
x="$TMP/native-unet(2,4)-16x16x16"
V=(--segmentation --depth 16)
"$PY" "$CNNSCALE_SOURCE/scripts/export-onnx.py" "$CNNSCALE_SOURCE/tests/nn/unet_reference.py:UNet" "$d/unet3.onnx" \
  --kwargs '{"n_channels": 2, "n_classes": 3, "depth": 2, "width": 4, "dims": 3}' --input-shape 2,16,16,16 --seed 5 \
  >"$d/export.log" 2>&1
expect_eq "export-onnx.py unet_reference.py:UNet dims=3" 0 "$?"
"$TOOL" init "$d/unet3.onnx" 2 16 16 3 7 "$d/oi" "${V[@]}" >"$d/oi.log" 2>&1 &&
  "$TOOL" dump "$d/unet3.onnx" 2 16 16 3 "$d/oi/step-00000000.h5" "$d/onnx.f32" "${V[@]}" >"$d/onnx-params.txt" &&
  "$TOOL" init "unet(2,4)" 2 16 16 3 1 "$d/bi" "${V[@]}" >"$d/bi.log" &&
  "$TOOL" dump "unet(2,4)" 2 16 16 3 "$d/bi/step-00000000.h5" "$d/builtin0.f32" "${V[@]}" >"$d/builtin-params.txt"
expect_eq "3-D: both models' parameters dumped" 0 "$?"
"$PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" map "$d" "3-D U-Net" 66 >"$d/map.txt" 2>&1
expect_eq "3-D: the parameter map ran" 0 "$?"
report_lines "$d/map.txt" "3-D: "
"$TOOL" grad "$d/unet3.onnx" 2 16 16 3 "$d/oi/step-00000000.h5" "$x/x.f32" 3 "$d/grad-onnx.f32" "$x/y.i32" \
  "${V[@]}" >"$d/grad-onnx.txt" 2>&1
expect_eq "3-D: a training step of --model unet3.onnx" 0 "$?"
"$TOOL" grad "unet(2,4)" 2 16 16 3 "$d/bi/step-00000000.h5" "$x/x.f32" 3 "$d/grad-builtin.f32" "$x/y.i32" \
  "${V[@]}" --params "$d/builtin.f32" >"$d/grad-builtin.txt" 2>&1
expect_eq "3-D: a training step of unet(2,4) from the ONNX file's weights" 0 "$?"
"$PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" compare "$d" >"$d/cmp.txt" 2>&1
expect_eq "3-D: the ONNX comparison ran" 0 "$?"
report_lines "$d/cmp.txt" "3-D: "
"$CNNSCALE" export "$x/ckpt.h5" --onnx "$d/out.onnx" --input-shape 2,16,16,16 --classes 3 >"$d/export-out.log" 2>&1
expect_eq "cnnscale export of the 3-D unet(2,4)" 0 "$?"
if [ -n "$ORT_PY" ]; then
  "$ORT_PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" ort "$d/out.onnx" "$x" 2,16,16,16 3,16,16,16 output \
    >"$d/ort.txt" 2>&1
  expect_eq "3-D: the ONNX Runtime check ran" 0 "$?"
  report_lines "$d/ort.txt" "3-D: "
fi
finish
