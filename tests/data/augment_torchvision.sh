#!/usr/bin/env bash
# augment_torchvision.sh — our --augment steps against torchvision itself (PIL images):
# for 400 samples of one random image, each output equals torchvision's transform with
# its random parameters forced to our draw (get_params patched; RandomHorizontalFlip with
# p = 1 or 0): crop32pad4,hflip = RandomCrop(32, padding=4) (fill 0) + flip on 3×32×32,
# all 9×9 offsets drawn, in torchvision's range; hflip,crop28pad2 on 1×28×28;
# rrc24,hflip = RandomResizedCrop(24) (PIL bilinear, antialiased) + flip on 3×40×56, and
# its evaluation pipeline = CenterCrop(24); rrc224,hflip on 3×300×260 (ImageNet's sizes);
# center30,rrc20 on 1×23×27 (CenterCrop with zero padding). SKIP (77) without torchvision.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_augment_tool"
require_python "torchvision" "python3-torchvision"

check() {  # check NAME LIST C H W [--eval]
  local n=$1 list=$2 c=$3 h=$4 w=$5
  "$PY" -c "import random, sys; random.seed(5); sys.stdout.buffer.write(bytes(random.randrange(1, 256) for _ in range($c*$h*$w)))" >"$TMP/$n.in"
  "$TOOL" "$list" 17 3 400 "$c" "$h" "$w" "$TMP/$n.in" "$TMP/$n.out" ${6:+"$6"} >"$TMP/$n.draws"
  expect_eq "$n: augment_tool exit status" 0 "$?"
  "$PY" - "$TMP/$n.in" "$TMP/$n.out" "$TMP/$n.draws" "$c" "$h" "$w" >"$TMP/$n.result" 2>&1 <<'PYEOF'
import sys

import torchvision.transforms as T
from PIL import Image

src, out, draws, C, H, W = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
raw = open(src, "rb").read()
mode = "RGB" if C == 3 else "L"
# C×H×W planes → a PIL image (interleaved)
img = Image.frombytes(mode, (W, H), bytes(raw[c * H * W + p] for p in range(H * W) for c in range(C)))
lines = open(draws).read().split("\n")[:-1]
ours = open(out, "rb").read()
rec = len(ours) // len(lines)
mismatch, tops, lefts, flips, sizes, n = 0, set(), set(), 0, set(), 0
for line in lines:
    f = line.split()
    g, x, i = int(f[0]), img, 1
    while i < len(f):
        if f[i] == "crop":
            size, pad, top, left = map(int, f[i + 1:i + 5])
            i += 5
            # torchvision draws top in [0, H + 2*pad - size] with torch.randint(0, h - th + 1)
            assert 0 <= top <= x.height + 2 * pad - size and 0 <= left <= x.width + 2 * pad - size, line
            tops.add(top)
            lefts.add(left)
            T.RandomCrop.get_params = staticmethod(lambda im, output_size, t=top, l=left: (t, l, *output_size))
            x = T.RandomCrop(size, padding=pad)(x)
        elif f[i] == "hflip":
            flip = int(f[i + 1])
            i += 2
            flips += flip
            x = T.RandomHorizontalFlip(p=1.0 if flip else 0.0)(x)
        elif f[i] == "rrc":
            size, top, left, h, w = map(int, f[i + 1:i + 6])
            i += 6
            assert 0 < h <= x.height and 0 < w <= x.width and top + h <= x.height and left + w <= x.width, line
            tops.add(top)
            lefts.add(left)
            sizes.add((h, w))
            T.RandomResizedCrop.get_params = staticmethod(lambda im, scale, ratio, a=(top, left, h, w): a)
            x = T.RandomResizedCrop(size)(x)  # PIL bilinear (antialiased)
        else:  # center
            size = int(f[i + 1])
            i += 2
            x = T.CenterCrop(size)(x)
    n += 1
    b = x.tobytes()
    chw = bytes(b[p * C + c] for c in range(C) for p in range(x.width * x.height))
    if chw != ours[g * rec:(g + 1) * rec]:
        mismatch += 1
print("samples", n, "mismatches", mismatch, "tops", len(tops), "lefts", len(lefts), "flips", flips, "sizes", len(sizes))
PYEOF
  expect_eq "$n: torchvision comparison ran" 0 "$?"
}

check cifar crop32pad4,hflip 3 32 32
expect_grep "crop32pad4,hflip equals torchvision RandomCrop(32, padding=4) + RandomHorizontalFlip on 400 samples, all 9x9 offsets" \
  '^samples 400 mismatches 0 tops 9 lefts 9 flips (1[6-9][0-9]|2[0-3][0-9]) sizes 0$' "$TMP/cifar.result"
check grey hflip,crop28pad2 1 28 28
expect_grep "hflip,crop28pad2 equals torchvision on 1x28x28 (5 offsets)" \
  '^samples 400 mismatches 0 tops 5 lefts 5 flips (1[6-9][0-9]|2[0-3][0-9]) sizes 0$' "$TMP/grey.result"
# RandomResizedCrop: windows of many sizes, up- and down-sampled to 24×24 (PIL bilinear).
check rrc rrc24,hflip 3 40 56
expect_grep "rrc24,hflip equals torchvision RandomResizedCrop(24) + RandomHorizontalFlip on 400 samples" \
  '^samples 400 mismatches 0 tops [0-9]+ lefts [0-9]+ flips (1[6-9][0-9]|2[0-3][0-9]) sizes ([5-9][0-9]|[1-9][0-9][0-9])$' "$TMP/rrc.result"
# ImageNet's size: windows up to 300×260 to 224×224, up- and downscaled, through the
# vectorised resampler (16×16 transposes, the flip folded into its horizontal pass).
check imagenet rrc224,hflip 3 300 260
expect_grep "rrc224,hflip equals torchvision RandomResizedCrop(224) + RandomHorizontalFlip on 400 samples of 3x300x260" \
  '^samples 400 mismatches 0 tops [0-9]+ lefts [0-9]+ flips (1[6-9][0-9]|2[0-3][0-9]) sizes ([1-9][0-9][0-9])$' "$TMP/imagenet.result"
check rrceval rrc24,hflip 3 40 56 --eval
expect_grep "evaluation of rrc24,hflip is torchvision CenterCrop(24)" '^samples 400 mismatches 0 tops 0 lefts 0 flips 0 sizes 0$' \
  "$TMP/rrceval.result"
check centerpad center30,rrc20 1 23 27
expect_grep "center30 (zero padding), then rrc20, equals torchvision on 1x23x27" \
  '^samples 400 mismatches 0 tops [0-9]+ lefts [0-9]+ flips 0 sizes [0-9]+$' "$TMP/centerpad.result"
finish
