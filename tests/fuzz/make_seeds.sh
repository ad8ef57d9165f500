#!/usr/bin/env bash
# make_seeds.sh — writes the committed seeds of fuzz_onnx_import and fuzz_image_decode
# (tests/fuzz/corpus/) from real producers: ONNX files exported from PyTorch by
# scripts/export-onnx.py (tests/fuzz/seed_models.py), images written by PIL (baseline and
# progressive JPEG, greyscale, CMYK, PNG palette, grey 1-bit, 16-bit, with alpha). Each
# seed starts with the target's selector byte (fuzz_onnx_import: 0 images, 1 volumes;
# fuzz_image_decode: the mode, see fuzz_image_decode.cpp). Needs Debian's python3 with
# torch, onnx and PIL (the test venv's cross-check packages). Rerun only to change seeds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
O="$ROOT/tests/fuzz/corpus/fuzz_onnx_import"
mkdir -p "$O"
for m in Blocks Dense LayerNormNHWC Reshape; do
  "$PY" "$ROOT/scripts/export-onnx.py" "$ROOT/tests/fuzz/seed_models.py:$m" --input-shape 3,8,8 "$T/$m.onnx" >/dev/null
  { printf '\x00'; cat "$T/$m.onnx"; } >"$O/$m"
done
"$PY" "$ROOT/scripts/export-onnx.py" "$ROOT/tests/fuzz/seed_models.py:Volume" --input-shape 1,8,8,8 "$T/v.onnx" >/dev/null
{ printf '\x01'; cat "$T/v.onnx"; } >"$O/Volume"
"$PY" - "$ROOT/tests/fuzz/corpus/fuzz_image_decode" <<'PYEOF'
import io, os, sys
from PIL import Image
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def img(mode, size=(12, 9)):
    im = Image.new("RGB", size)
    im.putdata([((x * 37) % 256, (y * 51) % 256, ((x + y) * 23) % 256) for y in range(size[1]) for x in range(size[0])])
    return im.convert(mode)
def save(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()
files = {
    "jpeg-420": save(img("RGB"), "JPEG", quality=80),
    "jpeg-444-progressive": save(img("RGB"), "JPEG", quality=90, subsampling=0, progressive=True),
    "jpeg-grey": save(img("L"), "JPEG"),
    "jpeg-cmyk": save(img("CMYK"), "JPEG"),
    "jpeg-optimized": save(img("RGB", (24, 16)), "JPEG", quality=70, optimize=True),
    "png-rgb": save(img("RGB"), "PNG"),
    "png-palette": save(img("P"), "PNG"),
    "png-grey-1bit": save(img("1"), "PNG"),
    "png-rgba": save(img("RGBA"), "PNG"),
    "png-grey16": save(img("L").convert("I").point(lambda v: v * 257), "PNG"),
}
# Modes (fuzz_image_decode.cpp): 0 decode_image (file), 1 decode_jpeg_planes whole,
# 2 decode_jpeg_planes with a window and the recorded size, 3 check_jpeg.
for name, b in files.items():
    modes = [0] if name.startswith("png") else [0, 1, 2, 3]
    for m in modes:
        # mode, scale byte, then window/recorded bytes (top, left, h, w, rec w, rec h) then the file
        hdr = bytes([m, 7, 1, 2, 4, 5, 24 if name == "jpeg-optimized" else 12, 16 if name == "jpeg-optimized" else 9])
        open(os.path.join(out, f"{name}-mode{m}"), "wb").write(hdr + b)
PYEOF

# fuzz_prep_input: a 3-image Fashion-MNIST slice (IDX, and the same to be gzipped by the
# target), CIFAR-10 with 2 records and CIFAR-100 with 1, each with its class-name file.
"$PY" - "$ROOT/tests/fuzz/corpus/fuzz_prep_input" <<'PYEOF'
import gzip, os, struct, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
src = "/usr/share/datasets/fashion-mnist"
def idx(name):
    for n in (name, name + ".gz"):
        p = os.path.join(src, n)
        if os.path.exists(p):
            return (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
    raise SystemExit(f"no {name} in {src}")
img, lab = idx("t10k-images-idx3-ubyte"), idx("t10k-labels-idx1-ubyte")
n = 3
img = img[:4] + struct.pack(">III", n, 28, 28) + img[16:16 + n * 784]
lab = lab[:4] + struct.pack(">I", n) + lab[8:8 + n]
for fmt, name in ((0, "idx-fashion-mnist-3"), (1, "idx-gz-fashion-mnist-3"), (9, "idx-gz-cut")):
    open(os.path.join(out, name), "wb").write(bytes([fmt]) + struct.pack(">H", len(lab)) + lab + img)
def records(labels, extra):
    return b"".join(bytes(l) + bytes((i * 7 + j) % 256 for j in range(3072)) for i, l in enumerate(labels))
c10 = "\n".join(["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]) + "\n"
open(os.path.join(out, "cifar10-2"), "wb").write(bytes([2]) + struct.pack(">H", len(c10)) + c10.encode() + records([[3], [9]], 0))
fine = "".join(f"class_{i}\n" for i in range(100))
open(os.path.join(out, "cifar100-fine-1"), "wb").write(bytes([3]) + struct.pack(">H", len(fine)) + fine.encode() + records([[4, 77]], 0))
coarse = "".join(f" super {i}\r\n" for i in range(20))
open(os.path.join(out, "cifar100-coarse-1"), "wb").write(bytes([7]) + struct.pack(">H", len(coarse)) + coarse.encode() + records([[19, 5]], 0))
PYEOF
# fuzz_report: two real run directories (lenet5 on synthetic data, 1 and 2 ranks, 6 steps)
# with a --points CSV and run.lock; a killed run (no run.json, a line cut short); a run whose
# run.json is a sweep's failed job (empty).
CNNSCALE=${CNNSCALE:-$ROOT/build/bin/cnnscale}
R="$ROOT/tests/fuzz/corpus/fuzz_report"
mkdir -p "$R"
for n in 1 2; do
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec -n $n "$CNNSCALE" train --synthetic --model lenet5 \
    --synthetic-samples 64 --batch-size 8 --max-steps 6 --run-dir "$T/r$n" --progress lines >/dev/null
done
sep=$'\n%%\n'
points=$'ranks,nodes,images_per_s,step_ms,label\n1,1,900,17.5,other system\n4,1,3100,,published\n'
printf '%s' "$(cat "$T/r1/run.json")$sep$(cat "$T/r1/metrics.jsonl")$sep$(cat "$T/r2/run.json")$sep$(cat "$T/r2/metrics.jsonl")$sep$points$sep$(cat "$T/r1/run.lock")" >"$R/two-runs"
printf '%s' "$sep$(head -c 300 "$T/r1/metrics.jsonl")$sep$(cat "$T/r2/run.json")$sep$(cat "$T/r2/metrics.jsonl")$sep$sep$(cat "$T/r1/run.lock")" >"$R/killed"
printf '%s' "$(head -c 1000 "$T/r1/run.json")$sep$(cat "$T/r1/metrics.jsonl")" >"$R/run-json-cut"
du -sh "$ROOT"/tests/fuzz/corpus/*
