#!/usr/bin/env python3
"""make_science.py OUT.h5 [--kind regression] [--train N] [--test N] [--size S] [--seed K]

A learnable science data set in one HDF5 file, made here (no download), as a user's would be:
float32 fields N×2×S×S whose values are a·P_a + b·P_b + noise, P_a and P_b two fixed smooth
patterns per channel, and the regression targets (a, b) in [-1, 1] (/x_train, /y_train,
/x_test, /y_test). Also, for the other sample types, /x16_{train,test} (float16 copies
of the fields), /xi_* (int16: round(1000·x)) and /counts_* (float32 Poisson counts ≥ 0 for
--transform log1p), /x64 (float64: refused), /y_bad (targets of the wrong count), /vol (N×C×D×H×W volumes, 4 of them: /y_train's
512 targets are the wrong count for them) /u8 (uint8 images: no --transform) and /m_{train,test} (3 labels of 0/1 per sample:
--task multilabel)."""
import argparse

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--train", type=int, default=512)
ap.add_argument("--test", type=int, default=128)
ap.add_argument("--size", type=int, default=16)
ap.add_argument("--seed", type=int, default=5)
a = ap.parse_args()
rng = np.random.default_rng(a.seed)
S = a.size
yy, xx = np.meshgrid(np.linspace(-1, 1, S), np.linspace(-1, 1, S), indexing="ij")
P_a = np.stack([np.exp(-(xx ** 2 + yy ** 2) * 2), np.sin(np.pi * xx)])  # 2×S×S
P_b = np.stack([np.cos(np.pi * yy), xx * yy])


def make(n):
    y = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    x = y[:, 0, None, None, None] * P_a + y[:, 1, None, None, None] * P_b
    x = x + 0.05 * rng.standard_normal(x.shape)
    return (3.0 * x + 1.5).astype(np.float32), y  # an offset and scale that normalisation removes


with h5py.File(a.out, "w") as f:
    x, y = make(a.train)
    f["x_train"], f["y_train"] = x, y
    x, y = make(a.test)
    f["x_test"], f["y_test"] = x, y
    for split in ("train", "test"):
        x = f[f"x_{split}"][...]
        f[f"x16_{split}"] = x.astype(np.float16)
        f[f"xi_{split}"] = np.round(1000 * x).astype(np.int16)
        f[f"counts_{split}"] = rng.poisson(np.exp(2 + x / 3)).astype(np.float32)
    f["x64"] = f["x_train"][...].astype(np.float64)
    f["y_bad"] = f["y_train"][: a.train - 1]
    f["vol"] = np.zeros((4, 1, 3, 4, 4), np.float32)
    f["u8"] = rng.integers(0, 256, (a.train, 2, S, S), dtype=np.uint8)
    # Multi-label: 3 labels of 0/1 per sample, each whether a linear readout of the field is
    # positive (learnable).
    for split in ("train", "test"):
        y = f[f"y_{split}"][...]
        f[f"m_{split}"] = np.stack([y[:, 0] > 0, y[:, 1] > 0, y[:, 0] + y[:, 1] > 0.5], axis=1).astype(np.uint8)
