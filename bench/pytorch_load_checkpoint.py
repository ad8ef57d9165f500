#!/usr/bin/env python3
"""Load a cnnscale mnist_cnn checkpoint into PyTorch (h5py + torch, as docs/checkpoints.md
shows) and evaluate it on the Fashion-MNIST test set with the data set's normalisation.
The accuracy must equal the test_accuracy cnnscale wrote in run.json for that step.

usage: bench/pytorch_load_checkpoint.py RUN_DIR/checkpoints/step-N.h5 DATASET_DIR
needs: apt-get install python3-torch python3-h5py (bench only)
"""
import gzip
import json
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_ddp_mnist import Net  # noqa: E402  the same network the DDP benchmark trains


def main():
    ckpt, dataset = sys.argv[1], sys.argv[2]
    with h5py.File(ckpt, "r") as f:
        state = {name: torch.from_numpy(f["model"][name][()]) for name in f["model"]}
        step = int(f.attrs["step"])
    net = Net()
    net.load_state_dict(state)  # strict: every name and shape must match
    norm = json.load(open(f"{dataset}/dataset.json"))["normalization"]
    src = json.load(open(f"{dataset}/dataset.json"))["source"]["input"]
    raw = gzip.open(f"{src}/t10k-images-idx3-ubyte.gz").read()[16:]
    labels = np.frombuffer(gzip.open(f"{src}/t10k-labels-idx1-ubyte.gz").read()[8:], np.uint8)
    x = torch.from_numpy(np.frombuffer(raw, np.uint8).reshape(-1, 1, 28, 28).astype(np.float32)) / 255
    x = (x - norm["mean"][0]) / norm["std"][0]
    net.eval()
    with torch.no_grad():
        pred = torch.cat([net(x[i:i + 1000]).argmax(1) for i in range(0, len(x), 1000)])
    print(f"step {step}: PyTorch test accuracy of the cnnscale checkpoint {(pred.numpy() == labels).mean():.4f}")


if __name__ == "__main__":
    main()
