# data_compare_torch.py — PyTorch's side of bench/data_compare.sh: the same JPEGs and the
# same transforms through torchvision + DataLoader on the same number of cores.
# Usage: data_compare_torch.py JPEG_ROOT THREADS BATCH STEPS [decode-only]
# check-deps: optional python torch torchvision numpy PIL (bench only; data_compare.sh skips the column without them)
# Prints one "RESULT name value unit" line per measurement:
#   decode      PIL Image.open(f).convert("RGB") of every JPEG, THREADS processes (images/s)
#   rrc_folder  ImageFolder + [RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
#               Normalize] (decodes each JPEG every time, as users run it), DataLoader
#               num_workers=THREADS (samples/s; and rrc_folder_cpu: samples per CPU-second of
#               the main process and its workers, steady on a loaded machine)
#   rrc_memory  the same transforms on PIL images decoded once and held in memory
#               (the same input form as cnnscale's prepped data)
#   crop32      the images resized to 32x32 once (uint8 array, as torchvision's CIFAR10),
#               [RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor(), Normalize]
import os
import sys
import time

import numpy as np
import torch
import torchvision
import torchvision.transforms as T
from PIL import Image

root, threads, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
decode_only = len(sys.argv) > 5 and sys.argv[5] == "decode-only"
torch.set_num_threads(1)
norm = T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
folder = torchvision.datasets.ImageFolder(root + "/train")
files = [p for p, _ in folder.samples]


def decode_one(p):
    with open(p, "rb") as f:
        Image.open(f).convert("RGB").load()
    return 0


t0 = time.perf_counter()
if threads == 1:
    for p in files:
        decode_one(p)
else:
    import multiprocessing as mp
    with mp.get_context("fork").Pool(threads) as pool:
        pool.map(decode_one, files, chunksize=8)
print(f"RESULT decode {len(files) / (time.perf_counter() - t0):.0f} images/s")
if decode_only:
    sys.exit(0)


class Memory(torch.utils.data.Dataset):
    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        im = self.images[i]
        if isinstance(im, np.ndarray):
            im = Image.fromarray(im)
        return self.transform(im), self.labels[i]


def cpu_seconds(pids):
    """utime + stime of these processes (/proc/PID/stat), in seconds."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / os.sysconf("SC_CLK_TCK")


def loader_rate(ds, name):
    sampler = torch.utils.data.RandomSampler(ds, replacement=True, num_samples=batch * (steps + 5))
    workers = {"num_workers": threads, "persistent_workers": True, "prefetch_factor": 2} if threads > 1 else {}
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=sampler, **workers)
    it = iter(dl)
    for _ in range(5):  # warm-up (worker start)
        next(it)
    pids = [os.getpid()] + [w.pid for w in getattr(it, "_workers", [])]
    c0, t0 = cpu_seconds(pids), time.perf_counter()
    for _ in range(steps):
        next(it)
    wall, cpu = time.perf_counter() - t0, cpu_seconds(pids) - c0
    print(f"RESULT {name} {steps * batch / wall:.0f} samples/s")
    print(f"RESULT {name}_cpu {steps * batch / cpu:.0f} samples/cpu-s")


rrc = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm])
loader_rate(torchvision.datasets.ImageFolder(root + "/train", transform=rrc), "rrc_folder")
labels = [c for _, c in folder.samples]
decoded = []
for p in files:
    with open(p, "rb") as f:
        decoded.append(Image.open(f).convert("RGB"))
loader_rate(Memory(decoded, labels, rrc), "rrc_memory")
small = [np.asarray(T.CenterCrop(32)(T.Resize(32)(im))) for im in decoded]
crop = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), norm])
loader_rate(Memory(small, labels, crop), "crop32")
