#!/usr/bin/env bash
# onnx_torchvision.sh MODEL — `--model FILE.onnx` (issue 49 item 3) on torchvision's MODEL as a
# user would bring it: scripts/export-onnx.py torchvision:MODEL (seed 5, 5 classes, any height and
# width) and then
# - the initial checkpoint of the imported model holds exactly torchvision's weights: every
#   tensor equal to the file's initializer and to torchvision.models.MODEL(num_classes=5) built
#   with the same seed (torch's weights through ONNX into cnnscale), and it loads STRICTLY into
#   that module; cnnscale's eval logits equal torchvision's (max |diff| ≤ 1e-4 × max |logit|) at
#   64×64 and at 45×53 (the export's height and width are dynamic; VGG: 224×224 only, its export
#   fixes the size, and another size is refused);
# - each batch norm's momentum and eps, and each dropout's p, as torchvision's modules have them
#   (PyTorch's momentum from ONNX's 1 − m);
# - the imported network is cnnscale's built-in MODEL, layer for layer: the same graph (ops,
#   shapes, kernels, groups, activations, momentum, eps, p, parameters, in the same order),
#   and one training step from the same weights gives bitwise the same loss and gradients —
#   so the built-in model's torch float64 step check (zoo_torchvision.sh) holds for the import
#   too. Models with stochastic depth (EfficientNet, ConvNeXt) export without it (torch cannot
#   export its draw) and differ there; for them one training step at 45×53 from the 2-step checkpoint
#   below is checked against torch's functional ops in float64 instead (as zoo_torchvision.sh) (tests/nn/torch_reference.py graph);
# - `cnnscale train --model FILE.onnx` runs 2 SGD steps and its checkpoint loads strictly into
#   torchvision with equal eval logits.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "torchvision, onnx, h5py" "python3-torchvision python3-onnx python3-h5py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
M=${1:?usage: onnx_torchvision.sh MODEL}
# S: the size the checks run at. VGG's adaptive pool to 7×7 makes torch fix the export's size
# (the smallest that reaches it: 224) and cnnscale refuse others, which is checked instead of a
# second size (DYN=0).
S=64 DYN=1
case $M in vgg*) S=224 DYN=0 ;; esac
d="$TMP/onnx"
mkdir -p "$d/capA" "$d/capB"
F="$d/$M.onnx"
"$PY" "$CNNSCALE_SOURCE/scripts/export-onnx.py" "torchvision:$M" "$F" --classes 5 --input-shape 3,$S,$S --seed 5 \
  >"$d/export.log" 2>&1
expect_eq "scripts/export-onnx.py torchvision:$M" 0 "$?"
"$TOOL" init "$F" 3 $S $S 5 7 "$d/init" >"$d/init.log" 2>&1
expect_eq "init checkpoint of the imported model written" 0 "$?"
"$PY" -c "
import numpy as np
np.random.seed(11); np.random.randn(3, 3, $S, $S).astype(np.float32).tofile('$d/x64.f32')
np.random.seed(13); np.random.randn(3, 3, 45, 53).astype(np.float32).tofile('$d/x45.f32')
np.random.seed(12); np.random.randint(0, 5, 3).astype(np.int32).tofile('$d/y.i32')"
"$TOOL" eval "$F" 3 $S $S 5 "$d/init/step-00000000.h5" "$d/x64.f32" 3 "$d/init64.logits" >>"$d/eval.log" 2>&1
expect_eq "eval ${S}x$S" 0 "$?"
if [ $DYN = 1 ]; then
  "$TOOL" eval "$F" 3 45 53 5 "$d/init/step-00000000.h5" "$d/x45.f32" 3 "$d/init45.logits" >>"$d/eval.log" 2>&1
  expect_eq "eval 45x53 (dynamic height and width)" 0 "$?"
else
  "$CNNSCALE" train --synthetic --model "$F" --image-size 64 --channels 3 --classes 5 --batch-size 2 \
    --synthetic-samples 4 --max-steps 1 --run-dir "$d/run64" >"$d/train64.log" 2>&1
  expect_eq "another size than the fixed export's: exit status 2" 2 "$?"
  expect_grep "another size than the fixed export's: both sizes named" "^cnnscale: error: .*224.*64|^cnnscale: error: .*64.*224" "$d/train64.log"
fi
"$CNNSCALE" train --synthetic --model "$F" --image-size $S --channels 3 --classes 5 --batch-size 4 \
  --synthetic-samples 16 --max-steps 2 --lr 0.002 --momentum 0.9 --seed 3 --run-dir "$d/run" >"$d/train.log" 2>&1
expect_eq "cnnscale train --model $M.onnx, 2 steps" 0 "$?"
case $M in
  efficientnet* | convnext*)
    expect_grep "start-up says the file has no stochastic depth" "^note: .*$M.onnx was exported with its [0-9]+ stochastic-depth layers off" "$d/train.log" ;;
  *) expect_eq "no stochastic-depth note" 0 "$(grep -c 'stochastic-depth layers off' "$d/train.log")" ;;
esac
"$TOOL" eval "$F" 3 $S $S 5 "$d/run/checkpoints/step-00000002.h5" "$d/x64.f32" 3 "$d/step2.logits" >>"$d/eval.log" 2>&1
expect_eq "eval of the 2-step checkpoint" 0 "$?"
# One training step of the import, with --capture (its graph).
"$TOOL" grad "$F" 3 $S $S 5 "$d/init/step-00000000.h5" "$d/x64.f32" 3 "$d/gradA.f32" "$d/y.i32" \
  --capture "$d/capA" >"$d/gradA.txt" 2>"$d/gradA.err"
expect_eq "training step of the import" 0 "$?"

"$PY" - "$d" "$M" "$F" "$S" "$DYN" >"$d/result" 2>&1 <<'PYEOF'
import collections
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper

d, M, F = sys.argv[1:4]
S, DYN = int(sys.argv[4]), sys.argv[5] == "1"
sys.path.insert(0, os.environ["CNNSCALE_SOURCE"] + "/tests/nn")
from torch_reference import _state as state  # noqa: E402


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


torch.manual_seed(5)
ref = getattr(torchvision.models, M)(num_classes=5)
sd_ref = ref.state_dict()
inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(F).graph.initializer}
ours = state(f"{d}/init/step-00000000.h5")
bad = [k for k, v in sd_ref.items() if k.endswith("num_batches_tracked") is False and
       (k not in ours or not np.array_equal(ours[k].numpy(), v.numpy()) or
        k not in inits or not np.array_equal(inits[k], v.numpy()))]
report(f"init: {len(sd_ref)} tensors equal the file's initializers and torchvision's (seed 5) exactly",
       not bad and len(ours) == len(sd_ref), ", ".join(bad[:5]))


def load(ck, tag):
    net = getattr(torchvision.models, M)(num_classes=5)
    sd = collections.OrderedDict(state(ck))
    sd._metadata = net.state_dict()._metadata
    try:
        net.load_state_dict(sd)
        report(f"{tag}: strict load_state_dict into torchvision.models.{M}", True)
    except RuntimeError as e:
        report(f"{tag}: strict load_state_dict into torchvision.models.{M}", False, str(e)[:300])
        return None
    return net.eval()


def logits(net, x_file, h, w, ours_file, tag):
    x = torch.from_numpy(np.fromfile(x_file, np.float32).reshape(3, 3, h, w))
    with torch.no_grad():
        r = net(x).numpy()
    o = np.fromfile(ours_file, np.float32).reshape(3, 5)
    err = float(np.abs(o - r).max() / max(np.abs(r).max(), 1e-30))
    report(f"{tag}: eval logits equal torchvision's (max |diff| / max |logit| = {err:.2e} <= 1e-4)",
           bool(np.isfinite(o).all()) and err <= 1e-4)


net = load(f"{d}/init/step-00000000.h5", "init")
if net is not None:
    logits(net, f"{d}/x64.f32", S, S, f"{d}/init64.logits", f"init {S}x{S}")
    if DYN:
        logits(net, f"{d}/x45.f32", 45, 53, f"{d}/init45.logits", "init 45x53")
net = load(f"{d}/run/checkpoints/step-00000002.h5", "2 steps")
if net is not None:
    logits(net, f"{d}/x64.f32", S, S, f"{d}/step2.logits", f"2 steps {S}x{S}")

# Batch-norm momentum / eps and dropout p per module, from the import's graph.
mods = dict(ref.named_modules())
checked, wrong = 0, []
for line in open(f"{d}/capA/graph.txt"):
    w = line.split()
    f = dict(kv.split("=", 1) for kv in w[2:])
    params = [p for p in f["params"].split(",") if p]
    if w[1] == "bn":
        m = mods[params[0].rsplit(".", 1)[0]]
        checked += 1
        if abs(float(f["momentum"]) - m.momentum) > 1e-12 or abs(float(f["eps"]) - m.eps) > 1e-15:
            wrong.append(f"{params[0]}: {f['momentum']}/{f['eps']} vs {m.momentum}/{m.eps}")
ps = sorted(m.p for m in ref.modules() if isinstance(m, torch.nn.Dropout))
ours_p = sorted(float(line.split("p=")[1].split()[0]) for line in open(f"{d}/capA/graph.txt") if line.split()[1] == "dropout")
report(f"{checked} batch norms: momentum and eps as torchvision's modules", not wrong, "; ".join(wrong[:3]))
report(f"dropout p as torchvision's ({ps})", ps == ours_p, f"ours {ours_p}")
PYEOF
expect_eq "python check ran" 0 "$?"
report_lines "$d/result" "$M.onnx: "

case $M in
  efficientnet* | convnext*)
    # No built-in twin (stochastic depth): the step at an odd size against torch in float64.
    g="$TMP/grad45"
    mkdir -p "$g/cap"
    cp "$d/run/checkpoints/step-00000002.h5" "$g/ckpt.h5"
    "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, 3, 45, 53).astype(np.float32).tofile('$g/x.f32')"
    cp "$d/y.i32" "$g/y.i32"
    "$TOOL" grad "$F" 3 45 53 5 "$g/ckpt.h5" "$g/x.f32" 3 "$g/grad.f32" "$g/y.i32" --capture "$g/cap" \
      >"$g/grad.txt" 2>"$g/grad.err"
    expect_eq "45x53: training step of the import with --capture" 0 "$?"
    "$PY" "$CNNSCALE_SOURCE/tests/nn/torch_reference.py" graph "$F" 3 45 53 5 "$g" 3e-4 >"$g/result" 2>&1
    expect_eq "45x53: torch reference ran" 0 "$?"
    report_lines "$g/result" "$M.onnx 45x53: "
    ;;
  *)
    # The built-in twin from the import's weights (the flat layouts must agree to hand them over).
    "$TOOL" init "$M" 3 $S $S 5 7 "$d/builtin" >/dev/null 2>&1
    "$TOOL" dump "$F" 3 $S $S 5 "$d/init/step-00000000.h5" "$d/p.f32" >"$d/dump.txt" 2>&1
    expect_eq "dump of the import's parameters" 0 "$?"
    "$TOOL" grad "$M" 3 $S $S 5 "$d/builtin/step-00000000.h5" "$d/x64.f32" 3 "$d/gradB.f32" "$d/y.i32" \
      --params "$d/p.f32" --capture "$d/capB" >"$d/gradB.txt" 2>"$d/gradB.err"
    expect_eq "training step of the built-in $M from the import's weights" 0 "$?"
    expect_eq "parameter names, offsets and sizes as the built-in $M's" "$(grep ^param "$d/gradB.txt")" \
      "$(grep ^param "$d/dump.txt")"
    diff "$d/capA/graph.txt" "$d/capB/graph.txt" >"$d/graph.diff"
    expect_eq "graph as the built-in $M's ($(wc -l <"$d/capA/graph.txt") layers; diff: $d/graph.diff)" 0 "$?"
    expect_eq "loss as the built-in $M's, bitwise" "$(grep ^loss "$d/gradB.txt")" "$(grep ^loss "$d/gradA.txt")"
    cmp -s "$d/gradA.f32" "$d/gradB.f32"
    expect_eq "gradients and updated running statistics as the built-in $M's, bitwise" 0 "$?"
    ;;
esac
finish
