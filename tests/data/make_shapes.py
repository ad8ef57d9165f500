#!/usr/bin/env python3
"""make_shapes.py OUT.h5 [--train N] [--test N] [--size S] [--seed K]

A learnable segmentation data set in one HDF5 file, made here (no download), as a user's would be:
uint8 images N×3×S×S of one to three filled shapes on a noisy background, and their label maps
N×S×S (uint8): 0 background, 1 disc, 2 square, 3 triangle (/x_train, /y_train, /x_test, /y_test).
Each shape's colour is random, tilted towards its class (discs reddish, squares greenish, triangles
bluish, with wide overlap), so a model learns from the colour and the outline together. Later
shapes cover earlier ones, as in the label map. Also /y_bad: label maps of S×(S-1) (a size that
is not the images': prep refuses it), /xf_{train,test} (the images as float32 fields) and
/y_test_classes (one class per sample: prepping the test
split with it mixes label maps with class labels)."""
import argparse

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--train", type=int, default=512)
ap.add_argument("--test", type=int, default=128)
ap.add_argument("--size", type=int, default=24)
ap.add_argument("--seed", type=int, default=7)
a = ap.parse_args()
rng = np.random.default_rng(a.seed)
S = a.size
yy, xx = np.meshgrid(np.arange(S) + 0.5, np.arange(S) + 0.5, indexing="ij")
TILT = np.array([[70, -30, -30], [-30, 70, -30], [-30, -30, 70]], np.float64)


def shape_mask(kind, cy, cx, r):
    if kind == 1:  # disc
        return (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    if kind == 2:  # square
        return (np.abs(yy - cy) <= r * 0.85) & (np.abs(xx - cx) <= r * 0.85)
    # triangle, apex up: inside the three half-planes
    top, base = cy - r, cy + r * 0.8
    half = (yy - top) / (base - top) * r
    return (yy >= top) & (yy <= base) & (np.abs(xx - cx) <= half)


def make(n):
    x = np.empty((n, 3, S, S), np.uint8)
    y = np.zeros((n, S, S), np.uint8)
    for i in range(n):
        img = 110 + 25 * rng.standard_normal((3, S, S))
        lab = np.zeros((S, S), np.uint8)
        for _ in range(rng.integers(1, 4)):
            kind = int(rng.integers(1, 4))
            r = rng.uniform(S * 0.14, S * 0.26)
            cy, cx = rng.uniform(r, S - r, 2)
            m = shape_mask(kind, cy, cx, r)
            colour = rng.uniform(60, 200, 3) + TILT[kind - 1]
            img[:, m] = colour[:, None] + 12 * rng.standard_normal((3, int(m.sum())))
            lab[m] = kind
        x[i] = np.clip(np.round(img), 0, 255).astype(np.uint8)
        y[i] = lab
    return x, y


with h5py.File(a.out, "w") as f:
    x, y = make(a.train)
    f["x_train"], f["y_train"] = x, y
    x, y = make(a.test)
    f["x_test"], f["y_test"] = x, y
    f["y_bad"] = f["y_train"][:, :, : S - 1]
    # Float fields with the same label maps (DeepCAM's kind of input: float32 channels, not pixels).
    for split in ("train", "test"):
        f[f"xf_{split}"] = (f[f"x_{split}"][...].astype(np.float32) / 40.0 - 3.0)
    f["y_test_classes"] = f["y_test"][:, S // 2, S // 2]
