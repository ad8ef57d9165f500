# make_imagefolder.py — writes an ImageFolder tree that exercises every decode path and
# the ImageFolder ordering rules, then what torchvision makes of it, for
# tests/data/imagefolder_pil.sh. Needs PIL and torchvision (Debian python3-torchvision).
# Usage: make_imagefolder.py ROOT SIZE EXPECTED_PREFIX
#   ROOT/<class>/…            classes "C_up", "a_cls", "b_cls" (byte order: C_up first),
#                             nested folders, an upper-case .JPG, a .txt that is skipped
#   EXPECTED_PREFIX.{train,test}.bin   per sample: label byte + S×S×3 RGB bytes (HWC) of
#       torchvision ImageFolder(root/train|val, Compose([Resize(S), CenterCrop(S)]))
#   EXPECTED_PREFIX.pad.bin  the same for ROOT/pad/train with CenterCrop(40) only (padding)
import os
import random
import sys

from PIL import Image
import torchvision
import torchvision.transforms as T

root, size, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(3)


def noise(mode, w, h):
    bands = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4, "P": 1}[mode]
    data = bytes(rng.randrange(256) for _ in range(w * h * bands))
    im = Image.frombytes(mode, (w, h), data)
    return im


def smooth(mode, w, h):  # JPEG-friendly content: gradients plus a little noise
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 255) // max(1, w - 1), (y * 255) // max(1, h - 1), rng.randrange(256)) for y in range(h) for x in range(w)])
    return im.convert(mode)


def write(path, im, **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    im.save(path, **kw)


def tree(base, small=False):
    sz = (lambda w, h: (w // 3, h // 3)) if small else (lambda w, h: (w, h))
    write(f"{base}/a_cls/img0.jpg", smooth("RGB", *sz(50, 37)), quality=90)
    write(f"{base}/a_cls/sub/z_grey.jpg", smooth("L", *sz(37, 61)), quality=85)
    write(f"{base}/a_cls/sub/a_cmyk.jpg", smooth("CMYK", *sz(45, 45)), quality=90)
    write(f"{base}/a_cls/UPPER.JPG", smooth("RGB", *sz(63, 40)), quality=75, subsampling=2)
    write(f"{base}/a_cls/notes.txt.png", noise("RGB", *sz(33, 48)))  # a PNG despite the .txt in its name
    with open(f"{base}/a_cls/readme.txt", "w") as f:
        f.write("not an image\n")
    pal = noise("RGB", *sz(40, 52)).quantize(colors=37)
    write(f"{base}/b_cls/palette_trns.png", pal, transparency=5)
    write(f"{base}/b_cls/rgba.png", noise("RGBA", *sz(70, 35)))
    write(f"{base}/b_cls/la.png", noise("LA", *sz(36, 36)))
    write(f"{base}/b_cls/bits1.png", noise("L", *sz(41, 39)).convert("1"))
    write(f"{base}/C_up/noise_rgb.png", noise("RGB", *sz(48, 30)))
    write(f"{base}/C_up/progressive.jpg", smooth("RGB", *sz(39, 58)), quality=80, progressive=True)
    write(f"{base}/C_up/plain.png", noise("RGB", *sz(38, 44)))


def expected(path, tf, out):
    ds = torchvision.datasets.ImageFolder(path, transform=tf)
    with open(out, "wb") as f:
        for i in range(len(ds)):
            im, label = ds[i]
            f.write(bytes([label]) + im.tobytes())
    return ds


tree(f"{root}/img/train")
tree(f"{root}/img/val")
tree(f"{root}/pad/train", small=True)
tf = T.Compose([T.Resize(size), T.CenterCrop(size)])
ds = expected(f"{root}/img/train", tf, f"{prefix}.train.bin")
expected(f"{root}/img/val", tf, f"{prefix}.test.bin")
expected(f"{root}/pad/train", T.CenterCrop(40), f"{prefix}.pad.bin")
print("classes", " ".join(ds.classes), "samples", len(ds))
