#!/usr/bin/env bash
# rrc_torchvision.sh — the law of our RandomResizedCrop draws (rrc<S>, augment.cpp: a
# counter-based hash of (seed, epoch, sample)) against torchvision's own
# RandomResizedCrop.get_params (torch's RNG, scale (0.08, 1), ratio (3/4, 4/3)) on
# images of the shapes ragged data sets hold (H×W: 300×200, 224×224, 100×800 where
# about half the draws fall back to the central crop, 50×1000 where all do, 500×375):
# 20000 draws each; per shape the fallback frequency agrees within 5 binomial standard
# errors and the two-sample Kolmogorov–Smirnov statistic of h, w, top and left is below
# the α = 0.001 critical value 1.95·sqrt(2/n) = 0.0195. Both sides are seeded, so the
# outcome is deterministic. SKIP (77) without torchvision.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_augment_tool"
require_python "torchvision, numpy" "python3-torchvision"
N=20000
for hw in "300 200" "224 224" "100 800" "50 1000" "500 375"; do
  set -- $hw
  "$TOOL" --rrc-draws "$1" "$2" "$N" 11 >"$TMP/ours-$1x$2.txt"
  expect_eq "augment_tool --rrc-draws $1x$2 exit status" 0 "$?"
  "$PY" - "$TMP/ours-$1x$2.txt" "$1" "$2" >"$TMP/cmp-$1x$2.txt" 2>&1 <<'PY'
import math, sys
import numpy as np
import torch
import torchvision.transforms as T

path, H, W = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ours = np.loadtxt(path, dtype=np.int64).reshape(-1, 4)  # top left h w
n = len(ours)
torch.manual_seed(1234)
img = torch.empty(1, H, W)
tv = np.array([T.RandomResizedCrop.get_params(img, [0.08, 1.0], [3.0 / 4.0, 4.0 / 3.0]) for _ in range(n)],
              dtype=np.int64)  # i j h w = top left h w

# torchvision's fallback (central crop) box for this shape
in_ratio = W / H
if in_ratio < 3 / 4:
    fw, fh = W, int(round(W / (3 / 4)))
elif in_ratio > 4 / 3:
    fh, fw = H, int(round(H * (4 / 3)))
else:
    fw, fh = W, H
fb = np.array([(H - fh) // 2, (W - fw) // 2, fh, fw])
p1, p2 = (ours == fb).all(axis=1).mean(), (tv == fb).all(axis=1).mean()
p = (p1 + p2) / 2
tol = 5 * math.sqrt(max(p * (1 - p), 1.0 / n) * 2 / n)
ok = abs(p1 - p2) <= tol
print(f"fallback {p1:.4f} ours {p2:.4f} torchvision tol {tol:.4f} {'ok' if ok else 'BAD'}")
crit = 1.95 * math.sqrt(2 / n)
for k, name in enumerate(["top", "left", "h", "w"]):
    a, b = np.sort(ours[:, k]), np.sort(tv[:, k])
    grid = np.union1d(a, b)
    d = np.abs(np.searchsorted(a, grid, side="right") / n - np.searchsorted(b, grid, side="right") / n).max()
    good = d < crit
    ok = ok and good
    print(f"{name}: KS D {d:.4f} (< {crit:.4f}) mean ours {a.mean():.2f} torchvision {b.mean():.2f} {'ok' if good else 'BAD'}")
# every draw of ours lies inside the image
inside = ((ours[:, 2] >= 1) & (ours[:, 3] >= 1) & (ours[:, 0] >= 0) & (ours[:, 1] >= 0) &
          (ours[:, 0] + ours[:, 2] <= H) & (ours[:, 1] + ours[:, 3] <= W)).all()
print("inside", bool(inside))
print("RESULT", "ok" if ok and inside else "BAD")
PY
  sed 's/^/    /' "$TMP/cmp-$1x$2.txt"
  expect_grep "RandomResizedCrop draws on $1x$2 follow torchvision's get_params" '^RESULT ok' "$TMP/cmp-$1x$2.txt"
done
finish
