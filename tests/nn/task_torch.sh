#!/usr/bin/env bash
# task_torch.sh — every loss of nn/task.hpp against torch.nn.functional (float64), on
# the random cases task_tool writes (1, 7 and 32 samples; 1, 3 and 10 outputs; ties;
# differences of exactly 0; soft bce targets; label maps of 6 pixels with 2 and 4 classes):
# F.cross_entropy (plain, weight=, ignore_index=, both; per pixel on N×C×H×W), F.mse_loss, F.l1_loss, F.smooth_l1_loss,
# F.binary_cross_entropy_with_logits (plain, weight=), reduction 'mean': the loss
# (rel 1e-9) and its gradient by autograd (max |diff| ≤ 1e-6 × the case's largest: ours is
# float32), and the evaluation numbers (accuracy over the samples not ignored; RMSE and
# MAE overall and per target; multi-label accuracy per element at logit 0; pixel accuracy and
# mean IoU over the pixels not ignored; rel 1e-9).
# Also that task_tool's rejections held (a loss against targets of the other kind, class
# weights of the wrong count, labels and targets the loss cannot take).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
require_python torch python3-torch
"$CNNSCALE_BUILD/tests/task_tool" "$TMP" >"$TMP/tool.txt" 2>&1
expect_eq "task_tool exit status (its rejections held)" 0 "$?"
cat "$TMP/tool.txt"
"$PY" - "$TMP/cases.txt" <<'PYEOF'
import math
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
lines = open(sys.argv[1]).read().split("\n")
i = 0
cases = failures = 0


def floats(line, key):
    """The float32 values task_tool wrote (%.9g: exact), as float64."""
    parts = line.split(" ")
    assert parts[0] == key, (key, line[:40])
    return torch.tensor([float(x) for x in parts[1:]], dtype=torch.float32).double().tolist()


while i < len(lines) and lines[i].startswith("case "):
    _, loss, kind, n, K, ignore, P = lines[i].split(" ")
    n, K, ignore, P = int(n), int(K), int(ignore), int(P)
    w = floats(lines[i + 1], "weights")
    # segmentation: a sample's outputs are K×P (N×C×H×W with H = 1, W = P), its labels P
    z = torch.tensor(floats(lines[i + 2], "z")).reshape(n, K, 1, P) if kind == "segmentation" else \
        torch.tensor(floats(lines[i + 2], "z")).reshape(n, K)
    z.requires_grad_(True)
    if kind in ("classification", "segmentation"):
        y = torch.tensor([int(v) for v in lines[i + 3].split(" ")[1:]], dtype=torch.long)
        if kind == "segmentation":
            y = y.reshape(n, 1, P)
    else:
        y = torch.tensor(floats(lines[i + 3], "targets")).reshape(n, K)
    ours_loss = float(lines[i + 4].split(" ")[1])
    ours_grad = torch.tensor(floats(lines[i + 5], "grad")).reshape(z.shape)
    ours_metrics = dict(kv.split("=") for kv in lines[i + 6].split(" ")[1:])
    ours_metrics = {k: float(v) for k, v in ours_metrics.items()}
    assert lines[i + 7] == "end"
    i += 8
    weight = torch.tensor(w) if w else None
    if loss == "cross-entropy":
        ref = F.cross_entropy(z, y, weight=weight, ignore_index=ignore if ignore >= 0 else -100)
    elif loss == "mse":
        ref = F.mse_loss(z, y)
    elif loss == "l1":
        ref = F.l1_loss(z, y)
    elif loss == "smooth-l1":
        ref = F.smooth_l1_loss(z, y, beta=1.0)
    else:
        ref = F.binary_cross_entropy_with_logits(z, y, weight=weight)
    what = f"{loss} {kind} n={n} K={K} P={P} weights={bool(w)} ignore={ignore}"
    cases += 1
    if torch.isnan(ref):  # every label ignored: torch's 0/0; ours: loss 0, no gradient
        ok = ours_loss == 0 and bool((ours_grad == 0).all())
        if not ok:
            failures += 1
            print(f"FAIL {what}: torch NaN (all ignored), ours {ours_loss}")
        continue
    ref.backward()
    g = z.grad
    rel = abs(ours_loss - ref.item()) / max(abs(ref.item()), 1e-12)
    gerr = (ours_grad - g).abs().max().item() / max(g.abs().max().item(), 1e-12)
    zz = z.detach()
    expect = {"loss": ref.item()}
    if kind == "classification":
        keep = y != ignore
        right = (zz.argmax(1) == y) & keep
        expect["accuracy"] = right.sum().item() / max(keep.sum().item(), 1)
    elif kind == "segmentation":
        keep = y != ignore
        pred = zz.argmax(1)
        expect["pixel_accuracy"] = ((pred == y) & keep).sum().item() / max(keep.sum().item(), 1)
        ious = []
        for c in range(K):
            inter = ((pred == c) & (y == c) & keep).sum().item()
            union = (((pred == c) | (y == c)) & keep).sum().item()
            if union:
                ious.append(inter / union)
                expect[f"iou_{c}"] = inter / union
        expect["miou"] = sum(ious) / len(ious) if ious else 0.0
    elif kind == "multilabel":
        expect["accuracy"] = ((zz > 0) == (y >= 0.5)).double().mean().item()
    else:
        d = zz - y
        expect["rmse"] = d.pow(2).mean().sqrt().item()
        expect["mae"] = d.abs().mean().item()
        if K > 1:
            for k in range(K):
                expect[f"rmse_{k}"] = d[:, k].pow(2).mean().sqrt().item()
                expect[f"mae_{k}"] = d[:, k].abs().mean().item()
    merr = max(abs(ours_metrics.get(k, math.inf) - v) / max(abs(v), 1e-12) for k, v in expect.items())
    extra = set(ours_metrics) - set(expect)
    if rel > 1e-9 or gerr > 1e-6 or merr > 1e-9 or extra:
        failures += 1
        print(f"FAIL {what}: loss rel {rel:.2e}, grad {gerr:.2e}, metrics {merr:.2e}, extra {extra}")
print(f"{cases} cases against torch.nn.functional {torch.__version__}, {failures} failures")
if cases < 85:
    print(f"FAIL: only {cases} cases read")
    sys.exit(1)
sys.exit(1 if failures else 0)
PYEOF
expect_eq "losses, gradients and metrics as torch.nn.functional's" 0 "$?"
finish
