#!/usr/bin/env python3
"""make_grf.py — a learnable 3-D regression data set of Gaussian random fields (CosmoFlow's kind)

make_grf.py OUT.h5 --n N --size S [--channels C] [--targets K] [--dtype float32|float16] [--seed SEED]
                   [--counts] [--test N]

Made here (no download), in one HDF5 file: N volumes C×S×S×S (/x, float32 or float16, default C = 4)
with K float32 regression targets each (/y, N×K, default K = 4, each uniform in [-1, 1]: the
generating parameters, normalised). With --test N, also /x_test and /y_test (N more volumes, made
the same way after the first N).

Each volume is one Gaussian random field δ on a periodic S³ grid: white noise (numpy, seeded by
--seed alone) through np.fft.rfftn, times sqrt(P(k)), back through np.fft.irfftn, with
    P(k) ∝ k^-n · exp(-(k·R)²)   (k in radians per cell, the k = 0 mode zero: δ's mean is 0),
normalised so that δ's variance (the sum over the grid's modes, before sampling) is σ². Scales are
in cells, so a 16³ and a 32³ volume have the same statistics (the larger one more of them). Targets:
    y0  log-amplitude     σ = 0.5 · 2^y0          (0.25 .. 1: the field's standard deviation)
    y1  spectral slope    n = 1.5 + 1.5 · y1      (0 .. 3: moves power from small to large scales)
    y2  smoothing scale   R = 0.5 + 0.5 · y2      (0 .. 1 cell: removes the smallest scales)
    y3  mean (offset)     μ = 0.5 · y3 (--counts: the mean count per cell, λ = 64 · 2^y3, 32 .. 128)
    y4…                   (K > 4) drawn and stored, nothing depends on them (unlearnable)
With K < 4 the missing parameters stay at their middle (y = 0). The C channels are the same field at
C "redshifts": growth factors D_c from 1 down to 0.4 (linear in c), through a lognormal transform,
so that they differ by more than a scale: 1 + g_c = exp(D_c·δ − D_c²σ²/2) (mean 1, skewed where
D_c·σ is large), and
    x_c = μ + g_c + 0.05·ε_c      (ε_c white noise, its own per channel)
    --counts: x_c = Poisson(λ·(1 + g_c))   (non-negative integer counts, as float: CosmoFlow's
                                           particle histograms; prep them with --transform log1p)
The slope is the hardest target (it lives in the largest scales, of which a volume holds few modes).
A tiny 3-D CNN (3 conv3d blocks of width 8, Adam, batch 32, 400 steps) on 16³ × 4, 2048 train
volumes, reaches a test RMSE over the 4 targets of 0.24 (--counts with log1p: 0.28), against 0.58
for predicting the mean. Made 64 volumes at a time (fewer above 32³: 2M voxels a time) and written as
made: 2000 volumes of 32³ × 4 take ~15 s on one core (--counts: ~40 s, the Poisson draws)."""
import argparse

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--n", type=int, required=True)
ap.add_argument("--size", type=int, required=True)
ap.add_argument("--channels", type=int, default=4)
ap.add_argument("--targets", type=int, default=4)
ap.add_argument("--dtype", choices=["float32", "float16"], default="float32")
ap.add_argument("--seed", type=int, default=11)
ap.add_argument("--counts", action="store_true")
ap.add_argument("--test", type=int, default=0)
a = ap.parse_args()
if a.n < 1 or a.size < 2 or a.channels < 1 or a.targets < 1 or a.test < 0:
    ap.error("--n, --channels and --targets must be positive, --size at least 2, --test not negative")
rng = np.random.default_rng(a.seed)
S, C, K = a.size, a.channels, a.targets
CHUNK = max(1, min(64, 2 ** 21 // S ** 3))  # volumes made at a time (64 up to 32³, 1 at 128³)

# |k| on the rfftn grid (radians per cell) and each mode's multiplicity in the full grid
kf = 2 * np.pi * np.fft.fftfreq(S)
kr = 2 * np.pi * np.fft.rfftfreq(S)
K2 = kf[:, None, None] ** 2 + kf[None, :, None] ** 2 + kr[None, None, :] ** 2
KMAG = np.sqrt(K2)
KMAG[0, 0, 0] = 1.0  # the k = 0 mode is zeroed below
MULT = np.full(kr.shape, 2.0)
MULT[0] = 1.0
if S % 2 == 0:
    MULT[-1] = 1.0
MULT = np.broadcast_to(MULT, K2.shape)
LOGK = np.log(KMAG)
D = np.linspace(1.0, 0.4, C) if C > 1 else np.ones(1)


def make(n):
    """Volumes n×C×S×S×S (float32) and targets n×K, CHUNK at a time."""
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        y = rng.uniform(-1.0, 1.0, (m, K)).astype(np.float32)
        p = np.zeros((m, 4))
        p[:, : min(K, 4)] = y[:, :4]
        sigma = 0.5 * 2.0 ** p[:, 0]
        slope = 1.5 + 1.5 * p[:, 1]
        smooth = 0.5 + 0.5 * p[:, 2]
        # P(k) per volume; variance of δ = (1/S³) Σ over the full grid of P = (1/S³) Σ MULT·P (rfftn grid)
        P = np.exp(-slope[:, None, None, None] * LOGK - K2 * smooth[:, None, None, None] ** 2)
        P[:, 0, 0, 0] = 0.0
        P *= (sigma ** 2 * S ** 3 / (MULT * P).sum(axis=(1, 2, 3)))[:, None, None, None]
        w = np.fft.rfftn(rng.standard_normal((m, S, S, S)), axes=(1, 2, 3))  # E|w|² = S³ per mode
        delta = np.fft.irfftn(w * np.sqrt(P), s=(S, S, S), axes=(1, 2, 3)).astype(np.float32)
        x = np.empty((m, C, S, S, S), np.float32)
        for c in range(C):
            half_var = ((D[c] * sigma) ** 2 / 2).astype(np.float32)[:, None, None, None]
            g = np.exp(np.float32(D[c]) * delta - half_var)  # 1 + g_c
            if a.counts:
                lam = (64.0 * 2.0 ** p[:, 3]).astype(np.float32)[:, None, None, None]
                x[:, c] = rng.poisson(lam * g)
            else:
                noise = rng.standard_normal((m, S, S, S), np.float32)
                x[:, c] = (0.5 * p[:, 3] - 1.0).astype(np.float32)[:, None, None, None] + g + np.float32(0.05) * noise
        yield start, x, y


with h5py.File(a.out, "w") as f:
    for name, n in (("", a.n), ("_test", a.test)):
        if n == 0:
            continue
        dx = f.create_dataset("x" + name, (n, C, S, S, S), a.dtype)
        dy = f.create_dataset("y" + name, (n, K), np.float32)
        for start, x, y in make(n):
            dx[start:start + len(x)] = x.astype(a.dtype)
            dy[start:start + len(y)] = y
