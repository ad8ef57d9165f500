#!/usr/bin/env python3
"""make_shapes3d.py OUT.h5 [--train N] [--test N] [--size S] [--seed K]

A learnable 3-D segmentation data set in one HDF5 file, made here (no download), as a user's would
be: float32 volumes N×1×S×S×S of one to three filled solids on a noisy background, and their label
maps N×S×S×S (uint8): 0 background, 1 ball, 2 cube, 3 octahedron (/x_train, /y_train, /x_test,
/y_test). Each solid's intensity is random, tilted by its class (balls dimmest, octahedra
brightest, with overlap between neighbouring classes and voxel noise over everything), so a model
learns from the intensity and the neighbourhood together. Later solids cover earlier ones, as in
the label map. Also /y_bad: label maps of S×S×(S-1) (a size that is not the volumes': prep refuses
it) and /y_flat: N×S×S 2-D label maps (a volume's middle slice: prep refuses 2-D maps for
volumes). The same --seed makes the same file."""
import argparse

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--train", type=int, default=256)
ap.add_argument("--test", type=int, default=64)
ap.add_argument("--size", type=int, default=16)
ap.add_argument("--seed", type=int, default=7)
a = ap.parse_args()
rng = np.random.default_rng(a.seed)
S = a.size
zz, yy, xx = np.meshgrid(*(np.arange(S) + 0.5,) * 3, indexing="ij")
LEVEL = np.array([1.2, 2.2, 3.2])  # each class's mean intensity (background: 0)


def solid_mask(kind, c, r):
    d = (np.abs(zz - c[0]), np.abs(yy - c[1]), np.abs(xx - c[2]))
    if kind == 1:  # ball
        return d[0] ** 2 + d[1] ** 2 + d[2] ** 2 <= r * r
    if kind == 2:  # cube (the ball's volume, roughly)
        return (d[0] <= r * 0.8) & (d[1] <= r * 0.8) & (d[2] <= r * 0.8)
    return d[0] + d[1] + d[2] <= r * 1.45  # octahedron (the ball's volume, roughly)


def make(n):
    x = np.empty((n, 1, S, S, S), np.float32)
    y = np.zeros((n, S, S, S), np.uint8)
    for i in range(n):
        vol = 0.5 * rng.standard_normal((S, S, S))
        lab = np.zeros((S, S, S), np.uint8)
        for _ in range(rng.integers(1, 4)):
            kind = int(rng.integers(1, 4))
            r = rng.uniform(S * 0.22, S * 0.34)
            c = rng.uniform(r, S - r, 3)
            m = solid_mask(kind, c, r)
            level = LEVEL[kind - 1] + rng.uniform(-0.4, 0.4)
            vol[m] = level + 0.5 * rng.standard_normal(int(m.sum()))
            lab[m] = kind
        x[i, 0] = vol
        y[i] = lab
    return x, y


with h5py.File(a.out, "w") as f:
    x, y = make(a.train)
    f["x_train"], f["y_train"] = x, y
    x, y = make(a.test)
    f["x_test"], f["y_test"] = x, y
    f["y_bad"] = f["y_train"][:, :, :, : S - 1]
    f["y_flat"] = f["y_train"][:, S // 2]
