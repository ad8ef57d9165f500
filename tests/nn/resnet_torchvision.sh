#!/usr/bin/env bash
# resnet_torchvision.sh — cnnscale's torchvision ResNets against torchvision itself:
# - trainable parameter counts equal torchvision's (resnet18/50 at 1000 classes:
#   11,689,512 and 25,557,032 there; computed from torchvision here, not written in);
# - a checkpoint of resnet18 (3×70×100: the padded max-pool gets 35×50, odd, and the
#   final average pool 3×4, non-square) and of resnet50 (3×32×32, the CIFAR case: 1×1
#   at the end) loads STRICTLY with
#   torchvision.models.resnetXX(num_classes=N).load_state_dict, right after init and
#   after 2 SGD steps of `cnnscale train --synthetic` (batch-norm running statistics
#   no longer 0/1), and gives cnnscale's eval logits on the same input (fp32, max
#   |difference| ≤ 1e-4 × max |logit|);
# - one training forward/backward from a 2-step checkpoint (batch statistics, mean
#   cross-entropy), for resnet18 and resnet50 at two input sizes each and under two oneDNN
#   ISAs (this CPU's and a forced one: lib.sh, onednn_isas): the loss and the updated
#   running statistics (1e-4) equal torchvision's, and every parameter's gradient is as
#   close to torchvision's in float64 as torchvision's own float32 gradient is (per
#   tensor, max |diff| / max |grad| at most 3 × torch fp32's + 1e-4: after 2 steps at lr
#   0.05 resnet50's logits are large and fp32 itself is off by a few % in deep layers, for
#   torch as for cnnscale), the float64 reference following cnnscale's ReLU/max-pool
#   decisions only where float64 is within 1e-4 of a tie (tests/nn/torch_reference.py:
#   issue 47's wrong-looking resnet18 gradients on an AMD EPYC were one such tie);
# - initialisation statistics as torchvision's: conv weights N(0, 2/fan_out) (std within
#   5 % and the share inside ±1σ within 0.02 of 0.6827, as for torchvision's own init),
#   batch-norm 1/0/0/1/0, fc uniform(±1/√fan_in); --zero-init-residual zeroes exactly
#   the batch-norm weights torchvision's zero_init_residual=True zeroes.
# SKIP (77) without torchvision.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_resnet_tool"
require_python "torchvision, h5py" "python3-torchvision python3-h5py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

# Parameter counts at 1000 classes.
for m in resnet18 resnet50; do
  ours=$("$TOOL" init $m 3 224 224 1000 1 - | awk '/^params/ {print $4}')
  theirs=$("$PY" -c "import torchvision; print(sum(p.numel() for p in torchvision.models.$m().parameters()))")
  expect_eq "$m (1000 classes): trainable parameters as torchvision's" "$theirs" "$ours"
done

check() {  # check MODEL H W CLASSES
  local m=$1 h=$2 w=$3 k=$4 d="$TMP/$1"
  mkdir -p "$d"
  "$TOOL" init "$m" 3 "$h" "$w" "$k" 7 "$d/init" >"$d/init.log" 2>&1
  expect_eq "$m: init checkpoint written" 0 "$?"
  "$TOOL" init "$m" 3 "$h" "$w" "$k" 7 "$d/zero" --zero-init-residual >"$d/zero.log" 2>&1
  expect_eq "$m: --zero-init-residual checkpoint written" 0 "$?"
  "$CNNSCALE" train --synthetic --model "$m" --image-size "${h}x$w" --channels 3 --classes "$k" --batch-size 4 \
    --synthetic-samples 16 --max-steps 2 --lr 0.05 --seed 3 --run-dir "$d/run" >"$d/train.log" 2>&1
  expect_eq "$m: cnnscale train --synthetic 2 steps" 0 "$?"
  "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn(3, 3, $h, $w).astype(np.float32).tofile('$d/x.f32')"
  "$PY" -c "import numpy as np; np.random.seed(12); np.random.randint(0, $k, 3).astype(np.int32).tofile('$d/y.i32')"
  local ck
  for ck in "$d/init/step-00000000.h5" "$d/run/checkpoints/step-00000002.h5"; do
    "$TOOL" eval "$m" 3 "$h" "$w" "$k" "$ck" "$d/x.f32" 3 "$ck.logits" >>"$d/eval.log" 2>&1
    expect_eq "$m: eval of $(basename "$ck")" 0 "$?"
  done
  "$PY" - "$m" "$h" "$w" "$k" "$d" >"$d/result" 2>&1 <<'PYEOF'
import math
import sys

import h5py
import numpy as np
import torch
import torchvision

m, H, W, K, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.manual_seed(0)


def state(path):
    with h5py.File(path, "r") as f:
        return {n: torch.as_tensor(np.array(f["model"][n][()])) for n in f["model"]}


def report(name, good, detail=""):
    print(("ok " if good else "FAIL ") + name + (f" ({detail})" if detail else ""))


x = torch.from_numpy(np.fromfile(f"{d}/x.f32", np.float32).reshape(3, 3, H, W))
for tag, ck in (("init", f"{d}/init/step-00000000.h5"), ("2 steps", f"{d}/run/checkpoints/step-00000002.h5")):
    net = getattr(torchvision.models, m)(num_classes=K)
    sd = state(ck)
    try:
        net.load_state_dict(sd)  # strict: every name and shape
        report(f"{tag}: strict load_state_dict", True)
    except RuntimeError as e:
        report(f"{tag}: strict load_state_dict", False, str(e)[:400])
        continue
    if tag == "2 steps":
        rv = [v for n, v in sd.items() if n.endswith("running_var")]
        report(f"{tag}: batch-norm running statistics were updated",
               all(abs(float(v.mean()) - 1) > 1e-6 for v in rv[:3]) and float(sd["bn1.num_batches_tracked"]) == 2)
    net.eval()
    with torch.no_grad():
        ref = net(x).numpy()
    ours = np.fromfile(ck + ".logits", np.float32).reshape(3, K)
    err = float(np.abs(ours - ref).max() / np.abs(ref).max())
    report(f"{tag}: logits equal torchvision's (max |diff| / max |logit| = {err:.2e} <= 1e-4)", err <= 1e-4)

# Initialisation statistics, ours and torchvision's side by side.
ours = state(f"{d}/init/step-00000000.h5")
tv = getattr(torchvision.models, m)(num_classes=K).state_dict()


def conv_stats(sd):
    out = []
    for n, v in sd.items():
        if v.dim() == 4 and v.numel() >= 4096:
            fan_out = v.shape[0] * v.shape[2] * v.shape[3]
            z = v.double() / math.sqrt(2.0 / fan_out)
            out.append((n, float(z.std()), float(z.mean()), float((z.abs() <= 1).double().mean())))
    return out


for who, sd in (("cnnscale", ours), ("torchvision", tv)):
    st = conv_stats(sd)
    worst = max(abs(s - 1) for _, s, _, _ in st)
    report(f"{who}: conv weight std / sqrt(2/fan_out) within 5% ({len(st)} convs, worst {worst:.3f})", worst < 0.05)
    inside = np.mean([w for *_, w in st])
    report(f"{who}: share of conv weights inside ±1 std {inside:.4f} (normal: 0.6827)", abs(inside - 0.6827) < 0.02)
    report(f"{who}: conv weight means ~ 0", max(abs(mu) for _, _, mu, _ in st) < 0.1)
bn_ok = all(
    torch.all(ours[n] == (1 if n.endswith((".weight", "running_var")) else 0))
    for n in ours if (".bn" in n or n.startswith("bn1") or "downsample.1" in n))
report("batch-norm weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0", bn_ok)
fan_in = ours["fc.weight"].shape[1]
b = 1 / math.sqrt(fan_in)
fw, fb = ours["fc.weight"].double(), ours["fc.bias"].double()
report("fc.weight uniform(±1/sqrt(fan_in)) as nn.Linear",
       float(fw.abs().max()) <= b and abs(float(fw.std()) - b / math.sqrt(3)) < 0.05 * b / math.sqrt(3)
       and abs(float(tv["fc.weight"].double().std()) - b / math.sqrt(3)) < 0.05 * b / math.sqrt(3))
report("fc.bias uniform(±1/sqrt(fan_in))", float(fb.abs().max()) <= b and float(fb.abs().max()) > 0)
zero = state(f"{d}/zero/step-00000000.h5")
tvz = getattr(torchvision.models, m)(num_classes=K, zero_init_residual=True).state_dict()
zeros_ours = sorted(n for n, v in zero.items() if n.endswith(".weight") and v.numel() and torch.all(v == 0))
zeros_tv = sorted(n for n, v in tvz.items() if n.endswith(".weight") and v.numel() and torch.all(v == 0))
report(f"--zero-init-residual zeroes torchvision's {len(zeros_tv)} weights", zeros_ours == zeros_tv and len(zeros_tv) > 0,
       f"ours {zeros_ours[:3]}..., torchvision {zeros_tv[:3]}...")
PYEOF
  expect_eq "$m: python check ran" 0 "$?"
  report_lines "$d/result" "$m: "
  [ "$_fail" -eq 0 ] || { sed 's/^/    train| /' "$d/train.log" | tail -5; sed 's/^/    eval| /' "$d/eval.log" | tail -5; }
}

# One training step from a 2-step checkpoint trained under ISA, against torchvision in
# float64 and float32 (tests/nn/torch_reference.py: loss, every gradient, running statistics,
# ReLU/max-pool decisions; ties followed as it explains).
grad_check() {  # grad_check ISA MODEL H W CLASSES [BATCH (default 3)]
  local isa=$1 m=$2 h=$3 w=$4 k=$5 n=${6:-3} d="$TMP/grad-$1-$2-$3x$4"
  local name="$isa $m ${h}x$w"
  mkdir -p "$d/cap"
  with_isa "$isa" "$CNNSCALE" train --synthetic --model "$m" --image-size "${h}x$w" --channels 3 --classes "$k" \
    --batch-size 4 --synthetic-samples 16 --max-steps 2 --lr 0.05 --seed 3 --run-dir "$d/run" >"$d/train.log" 2>&1
  expect_eq "$name: cnnscale train --synthetic 2 steps" 0 "$?"
  cp "$d/run/checkpoints/step-00000002.h5" "$d/ckpt.h5"
  "$PY" -c "import numpy as np; np.random.seed(11); np.random.randn($n, 3, $h, $w).astype(np.float32).tofile('$d/x.f32')"
  "$PY" -c "import numpy as np; np.random.seed(12); np.random.randint(0, $k, $n).astype(np.int32).tofile('$d/y.i32')"
  with_isa "$isa" "$TOOL" grad "$m" 3 "$h" "$w" "$k" "$d/ckpt.h5" "$d/x.f32" "$n" "$d/grad.f32" "$d/y.i32" \
    --capture "$d/cap" >"$d/grad.txt" 2>"$d/grad.err"
  expect_eq "$name: training step (grad) from the 2-step checkpoint" 0 "$?"
  "$PY" "$CNNSCALE_SOURCE/tests/nn/torch_reference.py" torchvision "$m" 3 "$h" "$w" "$k" "$d" >"$d/result" 2>&1
  expect_eq "$name: torch reference ran" 0 "$?"
  report_lines "$d/result" "$name: "
}

check resnet18 70 100 5
check resnet50 32 32 4
onednn_isas
for isa in "${ISAS[@]}"; do
  if [ "$isa" != native ]; then
    got=$(with_isa "$isa" "$TOOL" isa)
    expect_eq "ONEDNN_MAX_CPU_ISA=$isa: oneDNN runs that ISA" "$(tr '[:upper:]' '[:lower:]' <<<"$isa")" "$got"
  fi
  # 70×100: the padded max-pool gets 35×50 and the stride-2 stages 9×13 → 5×7 → 3×4 (odd);
  # 45×61: 23×31 → 12×16 → 6×8 → 3×4 → 2×2; resnet50 at 32×32 (1×1 at the end) and 41×53.
  # resnet50 at 32×32 takes a batch of 16: with 3 its layer4 batch norms normalise 3 rows
  # per channel (1×1 maps) whose |mean|/std reaches 900, and the step is beyond float32 for
  # any implementation (torch fp32's own loss 2.6e-5 from float64 on one such checkpoint,
  # cnnscale's 2.3e-5; one ReLU then goes the other way and every earlier gradient with it).
  # With 8 the float32 errors are still 1e-4 to 5e-4 of the largest gradient for torch and
  # cnnscale alike, and comparing them tensor by tensor is a coin toss: on an AMD EPYC Zen 4
  # with oneDNN's AVX2 kernels 3 of 161 tensors came out at 4× torch's (worst 5.4e-4 against
  # torch's 2.3e-4; the same with the code of before issue 50), while the same checkpoint's
  # step with the native kernels matched torch's. 16 rows: worst 8.1e-5 (native) and 2.0e-4
  # (AVX2) against torch's 5.0e-5 and 9.1e-5, every tensor within 3×.
  grad_check "$isa" resnet18 70 100 5
  grad_check "$isa" resnet18 45 61 7
  grad_check "$isa" resnet50 32 32 4 16
  grad_check "$isa" resnet50 41 53 3
done
finish
