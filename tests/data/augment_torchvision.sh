#!/usr/bin/env bash
# augment_torchvision.sh — our --augment crop32pad4,hflip against torchvision itself:
# for 400 samples of one random 3×32×32 image, each output equals torchvision's
# RandomCrop(32, padding=4) (default fill 0, padding_mode "constant") with its window
# forced to our draw (get_params patched), then RandomHorizontalFlip with our coin
# (p = 1 or 0). Our draws lie in torchvision's range (top, left in [0, 40-32]) and all
# 9 offsets occur. Also crop28pad2 on a 1×28×28 image. SKIP (77) without torchvision.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
TOOL="$CNNSCALE_BUILD/tests/cnnscale_augment_tool"
PY=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import torchvision' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  echo "SKIP: python3 cannot import torchvision (Debian: apt-get install python3-torchvision)"
  exit 77
fi

check() {  # check NAME LIST C H W
  local n=$1 list=$2 c=$3 h=$4 w=$5
  "$PY" -c "import random, sys; random.seed(5); sys.stdout.buffer.write(bytes(random.randrange(1, 256) for _ in range($c*$h*$w)))" >"$TMP/$n.in"
  "$TOOL" "$list" 17 3 400 "$c" "$h" "$w" "$TMP/$n.in" "$TMP/$n.out" >"$TMP/$n.draws"
  expect_eq "$n: augment_tool exit status" 0 "$?"
  "$PY" - "$TMP/$n.in" "$TMP/$n.out" "$TMP/$n.draws" "$c" "$h" "$w" >"$TMP/$n.result" 2>&1 <<'PYEOF'
import sys

import torch
import torchvision.transforms as T

src, out, draws, C, H, W = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
img = torch.frombuffer(bytearray(open(src, "rb").read()), dtype=torch.uint8).reshape(C, H, W)
ours = torch.frombuffer(bytearray(open(out, "rb").read()), dtype=torch.uint8).reshape(-1, C, H, W)
mismatch, tops, lefts, flips, n = 0, set(), set(), 0, 0
for line in open(draws):
    f = line.split()
    g, x, i = int(f[0]), img, 1
    while i < len(f):
        if f[i] == "crop":
            size, pad, top, left = map(int, f[i + 1:i + 5])
            i += 5
            # torchvision draws top in [0, H + 2*pad - size] with torch.randint(0, h - th + 1)
            assert 0 <= top <= H + 2 * pad - size and 0 <= left <= W + 2 * pad - size, line
            tops.add(top)
            lefts.add(left)
            T.RandomCrop.get_params = staticmethod(lambda im, output_size, t=top, l=left: (t, l, *output_size))
            x = T.RandomCrop(size, padding=pad)(x)
        else:
            flip = int(f[i + 1])
            i += 2
            flips += flip
            x = T.RandomHorizontalFlip(p=1.0 if flip else 0.0)(x)
    n += 1
    if not torch.equal(x, ours[g]):
        mismatch += 1
print("samples", n, "mismatches", mismatch, "tops", len(tops), "lefts", len(lefts), "flips", flips)
PYEOF
  expect_eq "$n: torchvision comparison ran" 0 "$?"
}

check cifar crop32pad4,hflip 3 32 32
expect_grep "crop32pad4,hflip equals torchvision RandomCrop(32, padding=4) + RandomHorizontalFlip on 400 samples, all 9x9 offsets" \
  '^samples 400 mismatches 0 tops 9 lefts 9 flips (1[6-9][0-9]|2[0-3][0-9])$' "$TMP/cifar.result"
check grey hflip,crop28pad2 1 28 28
expect_grep "hflip,crop28pad2 equals torchvision on 1x28x28 (5 offsets)" \
  '^samples 400 mismatches 0 tops 5 lefts 5 flips (1[6-9][0-9]|2[0-3][0-9])$' "$TMP/grey.result"
finish
