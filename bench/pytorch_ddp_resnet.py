#!/usr/bin/env python3
"""PyTorch DDP peer of `cnnscale train --synthetic --model resnetXX` for
bench/compare-pytorch.sh --model resnet50|resnet18 (bench only; never a build or test
dependency); with --model unet(D,W), the PyTorch U-Net of tests/nn/unet_reference.py on
random images with random label maps (cross-entropy per pixel).

One process per rank, launched without torchrun: the caller sets RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT. torchvision.models.resnetXX(num_classes=K), synthetic data
as the multi-node guides' --use_syn (one fixed random batch per rank, made before the
timed loop: no data cost, as cnnscale's synthetic source nearly has none), cross-entropy,
SGD momentum 0.9, batch B per rank, T threads per rank, DistributedDataParallel over
gloo. --precision bf16: torch.autocast("cpu", dtype=torch.bfloat16) around forward and
loss (fp32 master weights, as cnnscale --precision bf16). --channels-last: model and
input in torch.channels_last. Timing as cnnscale's run.json: per-step wall time, the
first min(20, max(1, steps/10)) steps excluded, images/s = global batch / median over
steps of the slowest rank's step time. Prints one JSON line (rank 0).
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--channels-last", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format

    if args.model.startswith("unet"):  # cnnscale's unet(D,W): the module tests/nn/unet_torch.sh checks it against
        import sys
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "nn"))
        from unet_reference import UNet
        depth, width = (int(v) for v in args.model[5:-1].split(",")) if args.model != "unet" else (4, 64)
        model = UNet(3, args.classes, depth, width).to(memory_format=fmt)
    else:
        model = getattr(torchvision.models, args.model)(num_classes=args.classes).to(memory_format=fmt)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    g = torch.Generator().manual_seed(args.seed * 1000 + rank)
    B, S = args.batch_size, args.image_size
    x = torch.randn(B, 3, S, S, generator=g).to(memory_format=fmt)
    # unet: a label map per image (per-pixel cross-entropy, as cnnscale's segmentation task)
    y = torch.randint(0, args.classes, (B, S, S) if args.model.startswith("unet") else (B,), generator=g)

    times = []
    ddp.train()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = F.cross_entropy(ddp(x), y)
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
