#!/usr/bin/env bash
# mobilenet_torchvision.sh — cnnscale's built-in mobilenet_v2 (src/nn/models_mobilenet.cpp,
# issue 49) against torchvision.models.mobilenet_v2 itself:
# - trainable parameters at 1000 classes equal torchvision's (computed from torchvision);
# - checkpoints right after init and after 2 SGD steps of `cnnscale train --synthetic`
#   (3×64×64, 5 classes) load STRICTLY into torchvision.models.mobilenet_v2(num_classes=5)
#   and give cnnscale's eval logits (max |diff| ≤ 1e-4 × max |logit|);
# - initialisation as torchvision's: every conv (depthwise too) N(0, 2/fan_out) with
#   torch's fan_out = out·k² (std within 5 % for the convs of 4096+ weights, pooled over
#   the depthwise ones), batch norms 1/0/0/1/0, classifier.1 N(0, 0.01²) and bias 0;
# - one training step from the 2-step checkpoint (batch statistics, the classifier's
#   dropout as cnnscale draws it) against torch's functional ops over cnnscale's graph in
#   float64 and float32 (tests/nn/torch_reference.py graph: loss, every gradient, running
#   statistics; ReLU6 decisions followed at ties as ReLU's) at 64×64 and 45×53, under this
#   CPU's oneDNN ISA and a forced one. The gradients' additive floor is 3e-4 here, not 1e-4:
#   through MobileNet's 52 layers the forced SSE4.1 kernels put the first batch norm's weight
#   gradient 1.9e-4 from float64 (torch fp32 2.9e-5), rounding of a deeper sum.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "torchvision, h5py" "python3-torchvision python3-h5py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
M=mobilenet_v2

ours=$("$TOOL" init $M 3 224 224 1000 1 - | awk '/^params/ {print $4}')
theirs=$("$PY" -c "import torchvision; print(sum(p.numel() for p in torchvision.models.$M().parameters()))")
expect_eq "$M (1000 classes): trainable parameters as torchvision's" "$theirs" "$ours"

d="$TMP/load"
mkdir -p "$d"
"$TOOL" init $M 3 64 64 5 7 "$d/init" >"$d/init.log" 2>&1
expect_eq "init checkpoint written" 0 "$?"
"$CNNSCALE" train --synthetic --model $M --image-size 64 --channels 3 --classes 5 --batch-size 4 \
  --synthetic-samples 16 --max-steps 2 --lr 0.05 --seed 3 --run-dir "$d/run" >"$d/train.log" 2>&1
expect_eq "cnnscale train --synthetic 2 steps" 0 "$?"
"$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, 3, 64, 64).astype(np.float32).tofile('$d/x.f32')"
for ck in "$d/init/step-00000000.h5" "$d/run/checkpoints/step-00000002.h5"; do
  "$TOOL" eval $M 3 64 64 5 "$ck" "$d/x.f32" 3 "$ck.logits" >>"$d/eval.log" 2>&1
  expect_eq "eval of $(basename "$ck")" 0 "$?"
done
"$PY" - "$d" >"$d/result" 2>&1 <<'PYEOF'
import math
import os
import sys

import numpy as np
import torch
import torchvision

d = sys.argv[1]
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/nn")
from torch_reference import _state as state  # noqa: E402  (the checkpoint's model/ group by name)


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


x = torch.from_numpy(np.fromfile(f"{d}/x.f32", np.float32).reshape(3, 3, 64, 64))
for tag, ck in (("init", f"{d}/init/step-00000000.h5"), ("2 steps", f"{d}/run/checkpoints/step-00000002.h5")):
    net = torchvision.models.mobilenet_v2(num_classes=5)
    sd = state(ck)
    try:
        net.load_state_dict(sd)  # strict: every name and shape
        report(f"{tag}: strict load_state_dict", True)
    except RuntimeError as e:
        report(f"{tag}: strict load_state_dict", False, str(e)[:400])
        continue
    if tag == "2 steps":
        report(f"{tag}: batch-norm running statistics were updated",
               float(sd["features.0.1.num_batches_tracked"]) == 2 and abs(float(sd["features.0.1.running_var"].mean()) - 1) > 1e-6)
    net.eval()
    with torch.no_grad():
        ref = net(x).numpy()
    ours = np.fromfile(ck + ".logits", np.float32).reshape(3, 5)
    err = float(np.abs(ours - ref).max() / np.abs(ref).max())
    report(f"{tag}: logits equal torchvision's (max |diff| / max |logit| = {err:.2e} <= 1e-4)", err <= 1e-4)

ours = state(f"{d}/init/step-00000000.h5")
convs = {n: v for n, v in ours.items() if v.dim() == 4}
z = {n: v.double() / math.sqrt(2.0 / (v.shape[0] * v.shape[2] * v.shape[3])) for n, v in convs.items()}
big = [float(v.std()) for v in z.values() if v.numel() >= 4096]
worst = max(abs(s - 1) for s in big)
report(f"conv weights std / sqrt(2/fan_out) within 5% ({len(big)} convs, worst {worst:.3f})", worst < 0.05)
dw = torch.cat([v.reshape(-1) for n, v in z.items() if convs[n].shape[1] == 1])
report(f"depthwise conv weights (pooled, {dw.numel()}) std / sqrt(2/(out·k²)) within 5% ({float(dw.std()):.3f})",
       abs(float(dw.std()) - 1) < 0.05)
bn_ok = all(torch.all(v == (1 if n.endswith((".weight", "running_var")) else 0))
            for n, v in ours.items() if v.dim() <= 1 and not n.startswith("classifier"))
report("batch-norm weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0", bn_ok)
cw = ours["classifier.1.weight"].double()
report(f"classifier.1.weight N(0, 0.01²) (std {float(cw.std()):.5f})", abs(float(cw.std()) - 0.01) < 0.0005)
report("classifier.1.bias 0", bool(torch.all(ours["classifier.1.bias"] == 0)))
PYEOF
expect_eq "python check ran" 0 "$?"
report_lines "$d/result" "$M 64x64: "

onednn_isas
for isa in "${ISAS[@]}"; do
  for sz in 64x64 45x53; do
    h=${sz%x*} w=${sz#*x} g="$TMP/grad-$isa-$sz"
    mkdir -p "$g/cap"
    with_isa "$isa" "$CNNSCALE" train --synthetic --model $M --image-size "$sz" --channels 3 --classes 5 \
      --batch-size 4 --synthetic-samples 16 --max-steps 2 --lr 0.05 --momentum 0.9 --seed 3 --run-dir "$g/run" \
      >"$g/train.log" 2>&1
    expect_eq "$isa $sz: cnnscale train --synthetic 2 steps" 0 "$?"
    cp "$g/run/checkpoints/step-00000002.h5" "$g/ckpt.h5"
    "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, 3, $h, $w).astype(np.float32).tofile('$g/x.f32')"
    "$PY" -c "import numpy as np; np.random.seed(12); np.random.randint(0, 5, 3).astype(np.int32).tofile('$g/y.i32')"
    with_isa "$isa" "$TOOL" grad $M 3 "$h" "$w" 5 "$g/ckpt.h5" "$g/x.f32" 3 "$g/grad.f32" "$g/y.i32" \
      --capture "$g/cap" >"$g/grad.txt" 2>"$g/grad.err"
    expect_eq "$isa $sz: training step with --capture" 0 "$?"
    "$PY" "$CNNSCALE_SOURCE/tests/nn/torch_reference.py" graph $M 3 "$h" "$w" 5 "$g" 3e-4 >"$g/result" 2>&1
    expect_eq "$isa $sz: torch reference ran" 0 "$?"
    report_lines "$g/result" "$isa $M $sz: "
  done
done
finish
