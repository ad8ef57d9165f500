# ffcv_compare.py — FFCV's side of bench/data_compare.sh (issue 27's anchor): the same
# JPEG folder written as FFCV .beton files (raw pixels and JPEG, longer side capped to
# MAX_SIDE as `cnnscale prep --store original-max/jpeg MAX_SIDE`), read by FFCV's Loader
# with RandomResizedCropRGBImageDecoder(224) + RandomHorizontalFlip + NormalizeImage(float32)
# (on the CPU it works on the numpy batch, so before ToTensor) + ToTensor + ToTorchImage on
# THREADS threads, batch 64, random order.
# Usage: ffcv_compare.py JPEG_ROOT THREADS STEPS [MAX_SIDE]
# check-deps: optional python ffcv torch torchvision numpy (bench only: Debian's python3-ffcv; data_compare.sh skips it without)
# Prints "RESULT name images/s images-per-CPU-second" for ffcv_raw and ffcv_jpeg, and the
# .beton sizes. CPU time is the process's (FFCV's numba threads included).
import os
import sys
import tempfile
import time

import numpy as np
import torchvision
from ffcv.fields import IntField, RGBImageField
from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
from ffcv.loader import Loader, OrderOption
from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage
from ffcv.writer import DatasetWriter

root, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
max_side = int(sys.argv[4]) if len(sys.argv) > 4 else 320
folder = torchvision.datasets.ImageFolder(root + "/train")
mean = np.array([0.5, 0.5, 0.5]) * 255
std = np.array([0.25, 0.25, 0.25]) * 255
work = tempfile.mkdtemp(prefix="cnnscale-ffcv.")
for mode in ("raw", "jpg"):
    path = os.path.join(work, mode + ".beton")
    DatasetWriter(path, {"image": RGBImageField(write_mode=mode, max_resolution=max_side, jpeg_quality=95),
                         "label": IntField()}, num_workers=threads).from_indexed_dataset(folder)
    loader = Loader(path, batch_size=64, num_workers=threads, order=OrderOption.RANDOM, drop_last=True, os_cache=True,
                    pipelines={"image": [RandomResizedCropRGBImageDecoder((224, 224)), RandomHorizontalFlip(),
                                         NormalizeImage(mean, std, np.float32), ToTensor(), ToTorchImage()],
                               "label": [IntDecoder(), ToTensor(), Squeeze()]})
    done = 0
    while done < steps + 5:
        for i, (x, _) in enumerate(loader):
            if done == 5:
                c0, t0 = time.process_time(), time.perf_counter()
            done += 1
            if done == steps + 5:
                break
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"RESULT ffcv_{'jpeg' if mode == 'jpg' else 'raw'} {steps * 64 / wall:.0f} {steps * 64 / cpu:.0f} "
          f"bytes {os.path.getsize(path)}")
