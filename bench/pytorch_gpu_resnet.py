#!/usr/bin/env python3
"""PyTorch peer of `cnnscale train --synthetic --backend nccl --model resnetXX` on ONE GPU,
for bench/gpu-first-run.sh (bench only; never a build or test dependency).

torchvision.models.resnetXX(num_classes=K) on cuda:0, plain eager PyTorch (no DDP: one
GPU, so the peer carries no bucket or hook cost; cnnscale's one-rank NCCL run still
does its allreduce), synthetic data as the multi-node guides' --use_syn: one fixed
random batch on the device, made before the timed loop (no input cost: cnnscale's
synthetic source stages a batch from the host every step, so this favours PyTorch).
Cross-entropy, SGD momentum 0.9 (the fused multi-tensor `foreach` step, PyTorch's
default), batch B, `torch.backends.cudnn.benchmark = True` (cnnscale's default
--cudnn-benchmark on).

Precisions, each in one process after the others (one import, one CUDA context):
  fp32   TF32 off for convolutions and matmuls (cnnscale --precision fp32 --tf32 off)
  tf32   TF32 on for both (cnnscale's default; PyTorch's default has matmuls in fp32)
  bf16   torch.autocast("cuda", dtype=torch.bfloat16) around forward and loss, fp32
         master weights (cnnscale --precision bf16)
Memory formats: contiguous (NCHW) and channels_last (--formats); the caller takes the
faster per precision, as bench/compare-pytorch.sh does.

Timing as cnnscale's run.json: every step ends with torch.cuda.synchronize() and its
wall time is recorded, the first min(20, max(1, steps/10)) steps are left out,
images/s = B / median step time. A training loop that never synchronises could be a
little faster (no per-step launch gap), so the throughput over the timed window with
ONE synchronisation at its end is printed too ("images_per_s_window"), and the table
uses the larger of the two: the peer's best case.

Prints one JSON line per (precision, format).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision


def warmup_skip(total):
    return 0 if total <= 1 else min(20, max(1, total // 10))


def run(args, precision, fmt_name):
    torch.backends.cudnn.benchmark = True
    tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    fmt = torch.channels_last if fmt_name == "channels_last" else torch.contiguous_format
    dev = torch.device("cuda", 0)
    torch.manual_seed(args.seed)
    model = getattr(torchvision.models, args.model)(num_classes=args.classes).to(dev, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    g = torch.Generator(device=dev).manual_seed(args.seed)
    B, S = args.batch_size, args.image_size
    x = torch.randn(B, 3, S, S, generator=g, device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, args.classes, (B,), generator=g, device=dev)
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    skip = warmup_skip(args.steps)
    med = statistics.median(times[skip:])
    # The same number of steps again, synchronised only at the end.
    n = args.steps - skip
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        loss = step()
    torch.cuda.synchronize()
    window = time.perf_counter() - t0
    out = {"impl": "pytorch", "torch": torch.__version__, "torchvision": torchvision.__version__,
           "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0),
           "model": args.model, "precision": precision, "format": fmt_name, "batch": B,
           "steps": args.steps, "timed_steps": n, "step_ms": med * 1e3,
           "images_per_s": B / med, "images_per_s_window": B * n / window,
           "max_memory_gib": torch.cuda.max_memory_allocated() / 2**30, "final_loss": float(loss)}
    del model, opt, x, y
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precisions", default="fp32,tf32,bf16")
    ap.add_argument("--formats", default="contiguous,channels_last")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("pytorch_gpu_resnet.py: error: torch.cuda.is_available() is False (no GPU for PyTorch)")
    for p in args.precisions.split(","):
        for f in args.formats.split(","):
            if p == "fp32" and f == "channels_last":
                continue  # fp32 without tensor cores: the format is the peer's choice; NCHW is cuDNN's home
            print(json.dumps(run(args, p, f)), flush=True)


if __name__ == "__main__":
    main()
