#!/usr/bin/env bash
# cosmoflow_torch.sh — cnnscale's built-in `cosmoflow(W,K)` (3-D convolutions over C×D×H×W
# volumes, regression of K float targets under MSE) against the MLPerf HPC CosmoFlow network as
# a PyTorch module (tests/nn/cosmoflow_reference.py: conv1..conv5 Conv3d(padding='same') +
# LeakyReLU(0.3) + MaxPool3d(2), fc1 128, fc2 64 with dropout 0.5, fc3, tanh · 1.2):
# - `cosmoflow` (W=32, K=2) on MLPerf's 4×128³ volumes with 4 targets has the reference's
#   5,597,604 parameters;
# - the freshly initialised checkpoint loads STRICTLY into CosmoFlow(C, targets, W, K, D×H×W)
#   (names and shapes), with PyTorch's default initialisation (every Conv3d and Linear weight
#   within its kaiming-uniform(a=√5) bound 1/√fan_in, std bound/√3 within 10 % where it has
#   2000+ values; biases within 1/√fan_in and not constant);
# - the graph the tool captures is CosmoFlow's, node by node (3-D conv with pad and pad_end,
#   padding='same' of the kernel; leaky ReLU 0.3; 2×2×2 max-pool; flatten; linears; dropout
#   0.5; tanh; scale 1.2), each tensor's shape the module's, and the captured head computes
#   tanh(fc3) and 1.2 · that;
# - eval-mode outputs (K per sample, dropout off) equal the module's in float64 (rel 1e-5);
# - one training step (dropout masks drawn by cnnscale, recomputed from their definition; loss
#   F.mse_loss over the N×K outputs) from that checkpoint against the graph in torch's
#   functional ops and against the module itself, each in float64 and float32
#   (tests/nn/torch_reference.py graph / cosmoflow --depth D, targets in y.f32: the loss 1e-5,
#   every gradient as close to float64's as torch fp32's, leaky-ReLU and max-pool decisions
#   followed only at float32 ties);
# for cosmoflow(4,2) on 4×32³ (kernel 2: padding 0 before, 1 after) and cosmoflow(4,3) on
# 2×64×96×40 (kernel 3: padding 1; it ends at 2×3×1, so the flatten order counts, and the
# pools floor 5 to 2), with this CPU's oneDNN kernels and a forced other ISA (lib.sh onednn_isas);
# - the module exported by scripts/export-onnx.py (its explicit_pad form: torch 1.13 cannot
#   export padding='same') trains as --model FILE.onnx exactly as cosmoflow(4,2) does, and
#   `cnnscale export` writes cosmoflow(4,2) as ONNX that ONNX Runtime runs to cnnscale's outputs.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "torch, h5py" "python3-torch python3-h5py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
onednn_isas

# MLPerf's CosmoFlow: 4 channels of 128³, 4 targets (the counts only: DIR "-").
"$TOOL" init cosmoflow 4 128 128 4 5 - --depth 128 --regression >"$TMP/counts.txt" 2>&1
expect_eq "cosmoflow on 4x128^3 with 4 targets: init" 0 "$?"
expect_eq "cosmoflow on 4x128^3 with 4 targets: MLPerf CosmoFlow's parameter count" \
  "params 5597604 trainable 5597604" "$(grep '^params ' "$TMP/counts.txt")"

check() {  # check ISA MODEL C D H W TARGETS
  local isa=$1 m=$2 c=$3 dd=$4 h=$5 w=$6 k=$7
  local name="$m-$c:${dd}x${h}x$w" d="$TMP/$1-$2-${dd}x${h}x$w"
  mkdir -p "$d/cap"
  with_isa "$isa" "$TOOL" init "$m" "$c" "$h" "$w" "$k" 5 "$d/ck" --depth "$dd" --regression >"$d/init.txt" 2>&1
  expect_eq "$isa $name: init checkpoint" 0 "$?"
  cp "$d/ck/step-00000000.h5" "$d/ckpt.h5"
  "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, $c, $dd, $h, $w).astype(np.float32).tofile('$d/x.f32')"
  "$PY" -c "import numpy as np; np.random.seed(12); np.random.uniform(-1, 1, (3, $k)).astype(np.float32).tofile('$d/y.f32')"
  with_isa "$isa" "$TOOL" eval "$m" "$c" "$h" "$w" "$k" "$d/ckpt.h5" "$d/x.f32" 3 "$d/eval.f32" --depth "$dd" \
    --regression >"$d/eval.txt" 2>&1
  expect_eq "$isa $name: eval" 0 "$?"
  with_isa "$isa" "$TOOL" grad "$m" "$c" "$h" "$w" "$k" "$d/ckpt.h5" "$d/x.f32" 3 "$d/grad.f32" "$d/y.f32" \
    --depth "$dd" --regression --capture "$d/cap" >"$d/grad.txt" 2>"$d/grad.err"
  expect_eq "$isa $name: training step with --capture" 0 "$?"
  "$PY" - "$d" "$m" "$c" "$dd" "$h" "$w" "$k" >"$d/module.txt" 2>&1 <<'PYEOF'
import math
import os
import sys

import h5py
import numpy as np
import torch

d, m = sys.argv[1], sys.argv[2]
C, D, H, W, K = (int(v) for v in sys.argv[3:8])
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/nn")
from cosmoflow_reference import CONVS, SCALE, SLOPE, CosmoFlow, parse_model, same_padding  # noqa: E402
from torch_reference import Capture  # noqa: E402

torch.set_num_threads(1)
width, kern = parse_model(m)
net = CosmoFlow(C, K, width, kern, (D, H, W))
sd = {k: torch.as_tensor(np.array(v[()])) for k, v in h5py.File(f"{d}/ckpt.h5", "r")["model"].items()}


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


missing, unexpected = net.load_state_dict(sd, strict=False)
report(f"the checkpoint's {len(sd)} tensors load strictly into CosmoFlow({C}, {K}, {width}, {kern}, {D}x{H}x{W})",
       not missing and not unexpected, f"missing {missing[:3]}, unexpected {unexpected[:3]}")
bad = []
for name, mod in net.named_modules():
    if isinstance(mod, (torch.nn.Conv3d, torch.nn.Linear)):
        w = mod.weight.detach().double()
        bound = 1 / math.sqrt(w[0].numel())  # fan_in: in × k³ (Conv3d), in (Linear)
        if w.abs().max() > bound * (1 + 1e-6) or (w.numel() >= 2000 and abs(w.std() / (bound / math.sqrt(3)) - 1) > 0.1):
            bad.append(f"{name}.weight max {float(w.abs().max()):.3g} std {float(w.std()):.3g} bound {bound:.3g}")
        b = mod.bias.detach().double()
        if b.abs().max() > bound * (1 + 1e-6) or (b.numel() >= 32 and b.abs().max() < 0.5 * bound):
            bad.append(f"{name}.bias max {float(b.abs().max()):.3g} bound {bound:.3g}")
report("initialisation: PyTorch's defaults (kaiming-uniform a=√5 Conv3d and Linear weights, biases U(±1/√fan_in))",
       not bad, "; ".join(bad[:3]))

# The captured graph is CosmoFlow's, node by node, each shape the module's.
net = net.double().eval()
x = torch.from_numpy(np.fromfile(f"{d}/x.f32", np.float32).reshape(3, C, D, H, W).astype(np.float64))
shapes = []
with torch.no_grad():
    t = x
    for i in range(1, CONVS + 1):
        t = getattr(net, f"conv{i}")(t)
        shapes += [list(t.shape[1:])] * 2
        t = torch.nn.functional.max_pool3d(t, 2)
        shapes.append(list(t.shape[1:]))
    flat = t.flatten(1).shape[1]
before, after = same_padding(kern)
want = []
for i in range(1, CONVS + 1):
    want += [("conv", dict(kernel=[kern, kern], stride=1, pad=before, pad_end=after - before),
              [f"conv{i}.weight", f"conv{i}.bias"]),
             ("act", dict(act="leaky_relu", slope=SLOPE), []),
             ("maxpool", dict(kernel=[2, 2], stride=2, pad=0, ceil=False), [])]
want.append(("flatten", {}, []))
shapes.append([flat])
for j, f in ((1, 128), (2, 64)):
    want += [("linear", {}, [f"fc{j}.weight", f"fc{j}.bias"]), ("act", dict(act="leaky_relu", slope=SLOPE), []),
             ("dropout", dict(p=0.5), [])]
    shapes += [[f]] * 3
want += [("linear", {}, ["fc3.weight", "fc3.bias"]), ("act", dict(act="tanh"), []),
         ("act", dict(act="scale", slope=SCALE), [])]
shapes += [[K]] * 3
cap = Capture(f"{d}/cap", 3, [C, D, H, W])
diffs = []
if len(cap.nodes) != len(want):
    diffs.append(f"{len(cap.nodes)} nodes, CosmoFlow has {len(want)}: "
                 + " ".join(nd["op"] + (":" + nd["act"] if nd["op"] == "act" else "") for nd in cap.nodes))
for nd, (op, fields, params), shape in zip(cap.nodes, want, shapes):
    got = {f: nd[f] for f in fields}
    ok = nd["op"] == op and nd["params"] == params and nd["out"] == shape and nd["inputs"] == [nd["index"]] and all(
        abs(got[f] - v) <= 1e-6 * abs(v) if isinstance(v, float) else got[f] == v for f, v in fields.items())
    if not ok and len(diffs) < 3:
        diffs.append(f"node {nd['index']}: {nd['op']} {got} params={nd['params']} out={nd['out']} inputs={nd['inputs']}"
                     f", want {op} {fields} params={params} out={shape} inputs={[nd['index']]}")
report(f"the captured graph is CosmoFlow's ({len(want)} nodes: conv kernel {kern} pad {before} pad_end "
       f"{after - before}, leaky ReLU {SLOPE}, max-pool 2, flatten {flat}, fc1 128, fc2 64, dropout 0.5, fc3 {K}, "
       f"tanh, scale {SCALE}), each shape the module's", not diffs, "; ".join(diffs))
if not diffs:
    z, th, sc = (cap.output(k) for k in range(len(want) - 3, len(want)))
    e1 = float((th - torch.tanh(z)).abs().max())
    e2 = float((sc - SCALE * th).abs().max() / max(float(sc.abs().max()), 1e-30))
    report(f"the captured head is tanh(fc3) (|err| {e1:.1e} <= 1e-6) times {SCALE} (rel {e2:.1e} <= 1e-6)",
           e1 <= 1e-6 and e2 <= 1e-6)

with torch.no_grad():
    ref = net(x).numpy()
ours = np.fromfile(f"{d}/eval.f32", np.float32)
good = ours.size == ref.size
if good:
    ours = ours.reshape(ref.shape)
    err = float(np.abs(ours - ref).max() / np.abs(ref).max())
    good = err <= 1e-5
report(f"eval outputs ({K} per sample, dropout off) equal the module's in float64 "
       + (f"(rel {err:.1e} <= 1e-5)" if ours.size == ref.size else f"({ours.size} floats, expected {ref.size})"), good)
PYEOF
  expect_eq "$isa $name: the module check ran" 0 "$?"
  report_lines "$d/module.txt" "$isa $name: "
  "$PY" "$CNNSCALE_SOURCE/tests/nn/torch_reference.py" graph "$m" "$c" "$h" "$w" "$k" "$d" --depth "$dd" \
    >"$d/result-graph" 2>&1
  expect_eq "$isa $name: torch reference (graph) ran" 0 "$?"
  report_lines "$d/result-graph" "$isa $name graph: "
  "$PY" "$CNNSCALE_SOURCE/tests/nn/torch_reference.py" cosmoflow "$m" "$c" "$h" "$w" "$k" "$d" --depth "$dd" \
    >"$d/result-module" 2>&1
  expect_eq "$isa $name: torch reference (module) ran" 0 "$?"
  report_lines "$d/result-module" "$isa $name module: "
  [ "$_fail" -eq 0 ] || { tail -n 3 "$d/init.txt" "$d/eval.txt" "$d/grad.err" | sed 's/^/    | /'; }
}

for isa in "${ISAS[@]}"; do
  if [ "$isa" != native ]; then
    got=$(with_isa "$isa" "$TOOL" isa)
    expect_eq "ONEDNN_MAX_CPU_ISA=$isa: oneDNN runs that ISA" "$(tr '[:upper:]' '[:lower:]' <<<"$isa")" "$got"
  fi
  check "$isa" "cosmoflow(4,2)" 4 32 32 32 4
  check "$isa" "cosmoflow(4,3)" 2 64 96 40 3
done

# The same module exported by scripts/export-onnx.py trains as --model FILE.onnx. torch 1.13
# cannot export Conv3d(padding='same') (aten::_convolution_mode), so the module is exported in
# its explicit_pad form: F.pad(x, (0, 1) * 3) before an unpadded Conv3d, the same network, which
# torch writes as a Pad (its pads computed by Shape/ConstantOfShape/Reshape/Slice/Transpose of
# constants) and a Conv; cnnscale reads them as the one padded conv. The imported graph has
# cosmoflow(4,2)'s 16 parameter names and sizes, and a training step of each from the ONNX
# file's weights (dropout masks included) gives the same loss and gradients (rel 1e-6).
d="$TMP/onnx"
mkdir -p "$d"
x="$TMP/native-cosmoflow(4,2)-32x32x32"
"$PY" "$CNNSCALE_SOURCE/scripts/export-onnx.py" "$CNNSCALE_SOURCE/tests/nn/cosmoflow_reference.py:CosmoFlow" \
  "$d/cf.onnx" --kwargs '{"in_channels": 4, "targets": 4, "width": 4, "kernel": 2, "input_size": 32, "explicit_pad": true}' \
  --input-shape 4,32,32,32 --seed 5 >"$d/export.log" 2>&1
expect_eq "export-onnx.py cosmoflow_reference.py:CosmoFlow (explicit_pad)" 0 "$?"
R=(--depth 32 --regression)
"$TOOL" init "$d/cf.onnx" 4 32 32 4 7 "$d/oi" "${R[@]}" >"$d/oi.log" 2>&1 &&
  "$TOOL" dump "$d/cf.onnx" 4 32 32 4 "$d/oi/step-00000000.h5" "$d/onnx.f32" "${R[@]}" >"$d/onnx-params.txt" &&
  "$TOOL" init "cosmoflow(4,2)" 4 32 32 4 1 "$d/bi" "${R[@]}" >"$d/bi.log" &&
  "$TOOL" dump "cosmoflow(4,2)" 4 32 32 4 "$d/bi/step-00000000.h5" "$d/builtin0.f32" "${R[@]}" >"$d/builtin-params.txt"
expect_eq "both models' parameters dumped" 0 "$?"
"$PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" map "$d" CosmoFlow 16 >"$d/map.txt" 2>&1
expect_eq "the parameter map ran" 0 "$?"
report_lines "$d/map.txt"
"$TOOL" grad "$d/cf.onnx" 4 32 32 4 "$d/oi/step-00000000.h5" "$x/x.f32" 3 "$d/grad-onnx.f32" "$x/y.f32" "${R[@]}" \
  >"$d/grad-onnx.txt" 2>&1
expect_eq "a training step of --model cf.onnx" 0 "$?"
"$TOOL" grad "cosmoflow(4,2)" 4 32 32 4 "$d/bi/step-00000000.h5" "$x/x.f32" 3 "$d/grad-builtin.f32" "$x/y.f32" \
  "${R[@]}" --params "$d/builtin.f32" >"$d/grad-builtin.txt" 2>&1
expect_eq "a training step of cosmoflow(4,2) from the ONNX file's weights" 0 "$?"
"$PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" compare "$d" >"$d/cmp.txt" 2>&1
expect_eq "the ONNX comparison ran" 0 "$?"
report_lines "$d/cmp.txt"

# And out again: `cnnscale export` writes the checkpoint as ONNX (Conv with pads 0,0,0,1,1,1,
# MaxPool 3-D, Tanh, Mul by 1.2), which ONNX Runtime runs to cnnscale's eval outputs (rel 1e-5).
"$CNNSCALE" export "$x/ckpt.h5" --onnx "$d/out.onnx" --input-shape 4,32,32,32 --classes 4 >"$d/export-out.log" 2>&1
expect_eq "cnnscale export of cosmoflow(4,2)" 0 "$?"
ort_python
expect_eq "a python that imports onnxruntime (scripts/python-venv.sh)" 1 "$([ -n "$ORT_PY" ] && echo 1 || echo 0)"
if [ -n "$ORT_PY" ]; then
  "$ORT_PY" "$CNNSCALE_SOURCE/tests/nn/onnx_builtin_step.py" ort "$d/out.onnx" "$x" 4,32,32,32 4 input >"$d/ort.txt" 2>&1
  expect_eq "the ONNX Runtime check ran" 0 "$?"
  report_lines "$d/ort.txt"
fi
finish
