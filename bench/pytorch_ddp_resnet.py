#!/usr/bin/env python3
"""PyTorch DDP peer of `cnnscale train --synthetic --model resnetXX` for
bench/compare-pytorch.sh --model resnet50|resnet18 (bench only; never a build or test
dependency); with --model unet(D,W), the PyTorch U-Net of tests/nn/unet_reference.py on
random images with random label maps (cross-entropy per pixel); with --model cosmoflow(W,K), the
MLPerf HPC CosmoFlow network (cosmoflow() below, as cnnscale's built-in) on random float volumes
--channels×S×S×S with --targets random float targets in [-1, 1] (F.mse_loss; images_per_s is then
volumes per second); --volume with unet(D,W): the 3-D U-Net (UNet(dims=3)) on C×S×S×S volumes with
a label map each (per-voxel cross-entropy).

One process per rank, launched without torchrun: the caller sets RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT. torchvision.models.resnetXX(num_classes=K), synthetic data
as the multi-node guides' --use_syn (one fixed random batch per rank, made before the
timed loop: no data cost, as cnnscale's synthetic source nearly has none), cross-entropy,
SGD momentum 0.9, batch B per rank, T threads per rank, DistributedDataParallel over
gloo. --precision bf16: torch.autocast("cpu", dtype=torch.bfloat16) around forward and
loss (fp32 master weights, as cnnscale --precision bf16). --channels-last: model and
input in torch.channels_last (cosmoflow: channels_last_3d). Timing as cnnscale's run.json:
per-step wall time, the first min(20, max(1, steps/10)) steps excluded, images/s = global
batch / median over steps of the slowest rank's step time. Prints one JSON line (rank 0).
"""
import argparse
import json
import os
import resource
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))


def cosmoflow(channels, size, targets, W=32, K=2):
    """cnnscale's cosmoflow(W,K) (src/nn/models_cosmoflow.cpp): the MLPerf HPC reference network
    (mlcommons/hpc cosmoflow, models/cosmoflow.py), channels-first; K = 2 with padding 'same' pads
    one zero row at the end of each dim, as Keras."""
    layers, cin = [], channels
    for i in range(1, 6):
        layers += [nn.Conv3d(cin, W * 2 ** (i - 1), K, padding="same"), nn.LeakyReLU(0.3), nn.MaxPool3d(2)]
        cin = W * 2 ** (i - 1)
    flat = cin * (size // 32) ** 3
    layers += [nn.Flatten(), nn.Linear(flat, 128), nn.LeakyReLU(0.3), nn.Dropout(0.5),
               nn.Linear(128, 64), nn.LeakyReLU(0.3), nn.Dropout(0.5), nn.Linear(64, targets), nn.Tanh()]
    return nn.Sequential(*layers, Scale(1.2))


class Scale(nn.Module):  # the reference's scale_1p2
    def __init__(self, s):
        super().__init__()
        self.s = s

    def forward(self, x):
        return x * self.s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--targets", type=int, default=4, help="cosmoflow: regression targets per volume")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--volume", action="store_true", help="unet: the 3-D U-Net on C×S×S×S volumes")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    vol = args.model.startswith("cosmoflow") or args.volume
    fmt = (torch.channels_last_3d if vol else torch.channels_last) if args.channels_last else torch.contiguous_format
    B, S, C = args.batch_size, args.image_size, args.channels

    if args.model.startswith("unet"):  # cnnscale's unet(D,W): the module tests/nn/unet_torch.sh checks it against
        import sys
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "nn"))
        from unet_reference import UNet
        depth, width = (int(v) for v in args.model[5:-1].split(",")) if args.model != "unet" else (4, 64)
        model = UNet(C, args.classes, depth, width, dims=3 if args.volume else 2).to(memory_format=fmt)
    elif vol:  # cosmoflow, cosmoflow(W) or cosmoflow(W,K), as cnnscale's --model
        wk = [int(v) for v in args.model[10:-1].split(",")] if args.model != "cosmoflow" else []
        model = cosmoflow(C, S, args.targets, *wk).to(memory_format=fmt)
    else:
        model = getattr(torchvision.models, args.model)(num_classes=args.classes).to(memory_format=fmt)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    g = torch.Generator().manual_seed(args.seed * 1000 + rank)
    x = torch.randn((B, C, S, S, S) if vol else (B, C, S, S), generator=g).to(memory_format=fmt)
    # unet: a label map per image (per-pixel cross-entropy, as cnnscale's segmentation task);
    # cosmoflow: float targets (mse, as cnnscale's regression task)
    seg = args.model.startswith("unet")
    if seg:  # a label map per image (volume: per voxel)
        y = torch.randint(0, args.classes, (B, S, S, S) if vol else (B, S, S), generator=g)
    elif vol:
        y = torch.rand(B, args.targets, generator=g) * 2 - 1
    else:
        y = torch.randint(0, args.classes, (B,), generator=g)
    loss_fn = F.mse_loss if vol and not seg else F.cross_entropy

    times = []
    ddp.train()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)

    total = args.steps
    skip = min(20, max(1, total // 10)) if total > 1 else 0
    t = torch.tensor(times[skip:], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # slowest rank per step
    ips = (B * world / t).median().item()
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss], dtype=torch.float64)
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "torchvision": torchvision.__version__,
                          "model": args.model, "precision": args.precision, "channels_last": args.channels_last,
                          "world_size": world, "batch_per_rank": B, "steps": total, "timed_steps": len(times) - skip,
                          "images_per_s": ips, "step_ms": t.median().item() * 1e3,
                          "peak_rss_mib": rss.item() / 1024.0, "final_loss": float(loss)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
