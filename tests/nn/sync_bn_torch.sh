#!/usr/bin/env bash
# sync_bn_torch.sh — one --sync-bn step against PyTorch: sync_bn_tool runs a small net
# (conv bn relu conv bn relu flatten linear) on 3 ranks (threads) with unequal batches
# 2 + 3 + 3; PyTorch (float64) recomputes the step with nn.BatchNorm2d in training mode
# on the concatenated batch of 8 (what torch.nn.SyncBatchNorm computes) from the same
# parameters: loss sum (rel 1e-5); every gradient summed over ranks (max |diff| ≤ 1e-4
# × the parameter's largest gradient, floored at 1e-2 × the model's largest: the conv
# biases before a batch norm have gradient 0, and ours are a few fp32 ulps);
# running_mean/running_var (rel 1e-5: unbiased global variance, momentum 0.1) and
# num_batches_tracked. All of it with oneDNN's kernels for this CPU and again with
# ONEDNN_MAX_CPU_ISA forcing a second family (lib.sh, onednn_isas). SKIP (77) without torch.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
PY=""
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import torch' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  echo "SKIP: python3 cannot import torch (Debian: apt-get install python3-torch)"
  exit 77
fi
onednn_isas
for isa in "${ISAS[@]}"; do
D="$TMP/$isa"
mkdir -p "$D"
with_isa "$isa" "$CNNSCALE_BUILD/tests/sync_bn_tool" "$D"
expect_eq "$isa: sync_bn_tool exit status" 0 "$?"
"$PY" - "$D" >"$D/result.txt" 2>&1 <<'PYEOF'
import sys

import torch
import torch.nn as nn

d = sys.argv[1]


def read(name):
    out = {}
    for line in open(f"{d}/{name}.txt"):
        key, shape, values = line.rstrip("\n").split("\t")
        vals = [float(v) for v in values.split()]
        dims = [int(s) for s in shape.split(",")] if shape else []
        out[key] = torch.tensor(vals, dtype=torch.float64).reshape(dims) if dims else torch.tensor(vals[0] if vals else 0.0, dtype=torch.float64)
    return out


start, after, grads, data = read("init"), read("after"), read("grads"), read("data")
x, y = data["x"], data["y"].long()
torch.set_default_dtype(torch.float64)
net = nn.Sequential(nn.Conv2d(2, 4, 3, 1, 1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 5, 3, 1, 1),
                    nn.BatchNorm2d(5), nn.ReLU(), nn.Flatten(), nn.Linear(5 * 6 * 6, 3))
state = {k: (v.long() if k.endswith("num_batches_tracked") else v) for k, v in start.items()}
net.load_state_dict(state)
net.train()
loss = nn.functional.cross_entropy(net(x), y, reduction="sum")
(loss / x.shape[0]).backward()
bad = 0


def check(what, ok, detail):
    global bad
    print(("ok" if ok else "FAIL") + ": " + what + " " + detail)
    bad += 0 if ok else 1


ours = after["loss"].item()
check("loss sum", abs(ours - loss.item()) <= 1e-5 * abs(loss.item()), f"{ours} vs torch {loss.item()}")
params = dict(net.named_parameters())
# A conv bias right before batch norm has gradient 0 (the normalisation removes it):
# its rounding is compared with the model's largest gradient.
largest = max(p.grad.abs().max().item() for p in params.values())
for name, g in grads.items():
    tg = params[name].grad
    scale = max(tg.abs().max().item(), 1e-2 * largest)
    err = (g - tg).abs().max().item()
    check("gradient " + name, err <= 1e-4 * scale, f"max |diff| {err:.3g}, scale {scale:.3g}")
for name, t in net.state_dict().items():
    if "running" in name:
        err = ((after[name] - t).abs() / t.abs().clamp_min(1e-12)).max().item()
        check(name, err <= 1e-5, f"max rel diff {err:.3g}")
    elif name.endswith("num_batches_tracked"):
        check(name, after[name].item() == t.item(), f"{after[name].item()} vs {t.item()}")
print("torch checks failed:", bad)
PYEOF
expect_eq "$isa: python exit status" 0 "$?"
cat "$D/result.txt"
expect_grep "$isa: torch agrees on loss, gradients and running statistics" "torch checks failed: 0" "$D/result.txt"
done
finish
