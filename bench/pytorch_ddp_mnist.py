#!/usr/bin/env python3
"""PyTorch DDP reference for bench/compare-pytorch.sh (bench only; never a build or
test dependency).

One process per rank, launched without torchrun: the caller sets RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT. Same work as `cnnscale train --model mnist_cnn`:
the PyTorch MNIST example network (conv1 1->32 3x3, ReLU, conv2 32->64 3x3, ReLU,
2x2 max-pool, dropout 0.25, fc1 9216->128, ReLU, dropout 0.5, fc2 128->10),
cross-entropy, SGD momentum 0.9, batch B per rank, one thread per rank, Fashion-MNIST
already in memory (uint8 tensor; each batch normalised with the data set's mean/std),
DistributedDataParallel over gloo. Timing as cnnscale's run.json: per-step wall time,
the first min(20, steps/10) steps excluded, images/s = global batch / median over
steps of the slowest rank's step time. Prints one JSON line (rank 0).
"""
import argparse
import gzip
import json
import os
import resource
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    nd = magic & 0xFF
    dims = struct.unpack(">" + "I" * nd, raw[4:4 + 4 * nd])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


class Net(nn.Module):  # pytorch/examples mnist/main.py
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return self.fc2(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=0, help="train whole epochs and evaluate (accuracy runs)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)

    images = torch.from_numpy(read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz")).copy())
    labels = torch.from_numpy(read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    # Normalisation from a histogram (no float copy of the data set: it would inflate peak RSS).
    h = torch.bincount(images.reshape(-1), minlength=256).double()
    v = torch.arange(256, dtype=torch.float64) / 255.0
    mean = float((h * v).sum() / h.sum())
    std = float(((h * (v - mean) ** 2).sum() / (h.sum() - 1)).sqrt())
    images = images.unsqueeze(1)  # N×1×28×28 uint8, in memory
    n = images.shape[0]
    B = args.batch_size
    steps_per_epoch = n // (B * world)

    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)

    def batch(step, epoch):
        g = torch.Generator().manual_seed(args.seed + epoch)
        perm = batch.perm.get(epoch)
        if perm is None:
            perm = batch.perm[epoch] = torch.randperm(n, generator=g)
        k = step % steps_per_epoch
        idx = perm[(k * world + rank) * B:(k * world + rank + 1) * B]
        x = (images[idx].float().div_(255.0) - mean) / std
        return x, labels[idx]
    batch.perm = {}

    total = args.epochs * steps_per_epoch if args.epochs > 0 else args.steps
    times = []
    ddp.train()
    for step in range(total):
        t0 = time.perf_counter()
        x, y = batch(step, step // steps_per_epoch)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        if step % steps_per_epoch == 0:
            batch.perm.pop(step // steps_per_epoch - 1, None)

    skip = min(20, max(1, total // 10)) if total > 1 else 0
    t = torch.tensor(times[skip:], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # slowest rank per step
    ips = (B * world / t).median().item()
    step_ms = t.median().item() * 1e3

    acc = None
    if args.epochs > 0:
        ti = torch.from_numpy(read_idx(os.path.join(args.data, "t10k-images-idx3-ubyte.gz")).copy()).unsqueeze(1)
        tl = torch.from_numpy(read_idx(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
        model.eval()
        with torch.no_grad():
            correct = sum((model((ti[i:i + 1000].float() / 255.0 - mean) / std).argmax(1) == tl[i:i + 1000]).sum().item()
                          for i in range(0, ti.shape[0], 1000))
        acc = correct / ti.shape[0]

    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss], dtype=torch.float64)
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "world_size": world, "batch_per_rank": B,
                          "steps": total, "timed_steps": len(times) - skip, "images_per_s": ips, "step_ms": step_ms,
                          "peak_rss_mib": rss.item() / 1024.0, "test_accuracy": acc}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
