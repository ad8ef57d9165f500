"""torch_reference.py — the PyTorch side of the gradient cross-checks (resnet_torchvision.sh,
grad_torch.sh): a float64 reference of one training step that follows cnnscale's forward at
float32 ties, torch's own float32 step under the same decisions, and the per-tensor criterion.

Why ties (issue 47): ReLU's derivative jumps at 0 and max-pool's at equal pairs. A ReLU input
within float32 rounding of zero (resnet18 on an AMD EPYC: −3.3e-6 in float64, +1.1e-6 in
cnnscale's fp32, −5.3e-6 in torch's fp32, where the layer's largest is 8 and both fp32 forwards
are off by up to 2e-5) takes its gradient through in one implementation and not in the other;
that one element's gradient (15 % of its layer's largest) then flows into every earlier layer,
and a float64 reference that decides on its own shows a "wrong" gradient of up to 7 % where
there is only rounding. Any fp32 implementation, torch's included, hits such an input sooner or
later; which input depends on the weights, so on the CPU's rounding. So the reference decides
as float64 does wherever float64 is clear, and as cnnscale did only where float64 itself is
within TIE of the kink (TIE × the layer's largest |value|: 1e-4, 30× the float32 forward error
measured on resnet18/50 and mnist_cnn); a ReLU or max-pool that is wrong outside that band still
fails. How many decisions were taken from cnnscale is printed with the result.

cnnscale's decisions come from `cnnscale_resnet_tool grad ... --capture DIR`: graph.txt and
every node's output right after it ran (node-K.f32, plain float32).

Volumes (N×C×D×H×W, `--depth D`: CosmoFlow, tests/nn/cosmoflow_torch.sh): a tensor's shape in
graph.txt is then C,D,H,W; conv, max-pool, avg-pool and batch norm on a volume are their 3-D
forms (cube windows: kernel=K,K is K×K×K) and the interpreter runs them as F.conv3d,
F.max_pool3d, F.avg_pool3d and F.batch_norm; pad_end=E adds E zeros at the end of every spatial
dim before a conv (PyTorch's padding='same' for an even kernel). A regression batch (DIR/y.f32,
N×K float32 targets) takes F.mse_loss (mean over the N×K outputs) instead of the cross-entropy.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

TIE = 1e-4


class Capture:
    """graph.txt and the node outputs of one cnnscale forward (batch n)."""

    def __init__(self, d, n, input_shape):
        self.d, self.n = d, n
        self.nodes = []
        for line in open(f"{d}/graph.txt"):
            w = line.split()
            f = dict(kv.split("=", 1) for kv in w[2:])
            self.nodes.append({
                "index": int(w[0]), "op": w[1],
                "inputs": [int(t) for t in f["inputs"].split(",")],
                "out": [int(v) for v in f["out"].split(",")],  # C,H,W; C,D,H,W (a volume); or features
                "kernel": [int(v) for v in f["kernel"].split(",")],
                "stride": int(f["stride"]), "pad": int(f["pad"]), "p": float(f["p"]),
                "pad_end": int(f.get("pad_end", "0")),  # extra zeros at the end of each spatial dim
                "groups": int(f.get("groups", "1")), "act": f.get("act", ""),
                "ceil": f.get("ceil", "0") == "1", "momentum": float(f.get("momentum", "0.1")),
                "eps": float(f.get("eps", "1e-5")), "slope": float(f.get("slope", "0.01")),
                "resample": int(f.get("resample", "0")),
                "slice": [int(v) for v in f.get("slice", "0,0").split(",")],
                "params": [p for p in f["params"].split(",") if p],
            })
        self.input_shape = list(input_shape)

    def shape(self, t):
        return [self.n] + (self.input_shape if t == 0 else self.nodes[t - 1]["out"])

    def output(self, k):
        """node k's output as cnnscale computed it (float64 tensor of its float32 values)."""
        a = np.fromfile(f"{self.d}/node-{k}.f32", np.float32)
        return torch.from_numpy(a.astype(np.float64)).reshape(self.shape(k + 1))

    def of_op(self, op):
        return [nd for nd in self.nodes if nd["op"] == op]


class Follow:
    """ReLU and max-pool for the reference runs. mode "decide" (float64): float64's own
    decision, cnnscale's where float64 is within TIE of the kink; mode "replay" (torch fp32):
    the decisions recorded by the float64 run, in call order. Calls must come in cnnscale's
    node order (torchvision's ResNets and the graph interpreter below both do)."""

    def __init__(self, cap):
        self.cap = cap
        self.relus = [nd["index"] for nd in cap.of_op("relu")]
        self.relu6s = [nd["index"] for nd in cap.of_op("act") if nd["act"] == "relu6"]
        self.leakys = [nd["index"] for nd in cap.of_op("act") if nd["act"] == "leaky_relu"]
        self.pools = cap.of_op("maxpool")
        self.dropouts = [nd for nd in cap.nodes if nd["op"] == "dropout"]
        self.decisions = []
        self.mode = "decide"
        self.followed = {"relu": 0, "maxpool": 0, "relu6": 0, "leaky_relu": 0}
        self.disagree_clear = {"relu": 0, "maxpool": 0, "relu6": 0, "leaky_relu": 0}  # cnnscale differs where float64 is clear
        self.reset()

    def reset(self, mode=None):
        if mode:
            self.mode = mode
        self.ri = self.pi = self.di = self.r6 = self.lk = self.dr = 0

    def _positive(self, x, kind, nodes, at):
        """Where x > 0 for a ReLU-like kink: float64's own side except within TIE of 0, where
        cnnscale's (its output > 0; for a leaky ReLU too, the slope being positive); replayed in
        mode "replay". `nodes[at]` is the cnnscale node (decide mode only)."""
        if self.mode == "replay":
            mask = self.decisions[self.di]
            self.di += 1
            return mask
        ours = self.cap.output(nodes[at]) > 0
        xd = x.detach()
        own = xd > 0
        near = xd.abs() <= TIE * max(float(xd.abs().max()), 1e-30)
        self.followed[kind] += int((near & (ours != own)).sum())
        self.disagree_clear[kind] += int((~near & (ours != own)).sum())
        mask = torch.where(near, ours, own)
        self.decisions.append(mask)
        return mask

    def relu(self, x):
        mask = self._positive(x, "relu", self.relus, self.ri)
        self.ri += self.mode != "replay"
        return x * mask.to(x.dtype)

    def leaky_relu(self, x, slope):
        """LeakyReLU: x where x > 0, else slope·x."""
        mask = self._positive(x, "leaky_relu", self.leakys, self.lk)
        self.lk += self.mode != "replay"
        return torch.where(mask, x, x * slope)

    def relu6(self, x):
        """ReLU6 = clamp(x, 0, 6) with its two kinks: per element a region (0: x ≤ 0, 1: between,
        2: x ≥ 6), float64's own except within TIE of a kink, where cnnscale's (from its output)."""
        if self.mode == "replay":
            region = self.decisions[self.di]
            self.di += 1
        else:
            k = self.relu6s[self.r6]
            self.r6 += 1
            o = self.cap.output(k)
            ours = torch.where(o <= 0, 0, torch.where(o >= 6, 2, 1))
            xd = x.detach()
            own = torch.where(xd <= 0, 0, torch.where(xd >= 6, 2, 1))
            tie = TIE * max(float(xd.abs().max()), 1e-30)
            near = (xd.abs() <= tie) | ((xd - 6).abs() <= tie)
            self.followed["relu6"] += int((near & (ours != own)).sum())
            self.disagree_clear["relu6"] += int((~near & (ours != own)).sum())
            region = torch.where(near, ours, own)
            self.decisions.append(region)
        return torch.where(region == 1, x, torch.where(region == 2, torch.full_like(x, 6.0), torch.zeros_like(x)))

    def maxpool(self, x, kernel, stride, pad, ceil_mode=False):
        """A max-pool of a map (N×C×H×W: max_pool2d) or a volume (N×C×D×H×W: max_pool3d, a cube
        window where kernel is an int); the window's argmax is float64's except where float64's
        maximum is within TIE of the element cnnscale's own input makes the maximum."""
        pool = F.max_pool3d if x.dim() == 5 else F.max_pool2d
        if self.mode == "replay":
            idx = self.decisions[self.di]
            self.di += 1
        else:
            nd = self.pools[self.pi]
            self.pi += 1
            src = nd["inputs"][0]
            ours_in = self.cap.output(src - 1) if src > 0 else None
            xd = x.detach()
            _, own = pool(xd, kernel, stride, pad, ceil_mode=ceil_mode, return_indices=True)
            if ours_in is None:
                idx = own
            else:
                _, theirs = pool(ours_in, kernel, stride, pad, ceil_mode=ceil_mode, return_indices=True)
                flat = xd.flatten(2)
                v_own = flat.gather(2, own.flatten(2)).view(own.shape)
                v_theirs = flat.gather(2, theirs.flatten(2)).view(own.shape)
                near = (v_own - v_theirs) <= TIE * max(float(xd.abs().max()), 1e-30)
                self.followed["maxpool"] += int((near & (own != theirs)).sum())
                self.disagree_clear["maxpool"] += int((~near & (own != theirs)).sum())
                idx = torch.where(near, theirs, own)
            self.decisions.append(idx)
        return x.flatten(2).gather(2, idx.flatten(2)).view(idx.shape)

    def dropout(self, x, p):
        """nn.Dropout(p) in training as cnnscale draws it: the mask of the next dropout node of the
        capture (cnnscale's node order), seed 0, step 0, sample ids 0..N-1 (the tool's grad)."""
        nd = self.dropouts[self.dr]
        self.dr += 1
        return x * dropout_mask(x, nd["index"], p)

    def clear(self):
        """Decisions where cnnscale differs from float64 and float64 is not within TIE of the kink."""
        return sum(self.disagree_clear.values())

    def summary(self):
        return (f"ties followed: {self.followed['relu']} ReLU, {self.followed['maxpool']} max-pool, "
                f"{self.followed['relu6']} ReLU6, {self.followed['leaky_relu']} leaky ReLU; clear disagreements: "
                f"{self.disagree_clear['relu']} ReLU, {self.disagree_clear['maxpool']} max-pool, "
                f"{self.disagree_clear['relu6']} ReLU6, {self.disagree_clear['leaky_relu']} leaky ReLU")


def patch_torchvision_resnet(net, follow):
    """Routes a torchvision ResNet's ReLUs and its max-pool through `follow`."""
    for mod in net.modules():
        if isinstance(mod, torch.nn.ReLU):
            mod.forward = follow.relu
    mp = net.maxpool
    net.maxpool.forward = lambda x: follow.maxpool(x, mp.kernel_size, mp.stride, mp.padding)


# cnnscale's dropout mask (src/nn/dropout_mask.hpp): a hash of (seed, step, layer, sample id,
# element index in plain C×H×W order); recomputed here from its definition.
M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z):
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _hash_combine(h, v):
    with np.errstate(over="ignore"):
        return _mix64(np.uint64(h) + np.uint64(GOLDEN) + _mix64(np.uint64(v)))


def dropout_keep(seed, step, layer, sample_id, count, p):
    key = _hash_combine(_hash_combine(_hash_combine(_mix64(np.uint64(seed ^ 0x64726F706F7574)), step), layer),
                        sample_id)
    idx = np.arange(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = _mix64(key + np.uint64(GOLDEN) * ((idx >> np.uint64(1)) + np.uint64(1)))
    u = np.where(idx & np.uint64(1), h & np.uint64(0xFFFFFFFF), h >> np.uint64(32))
    return u >= np.uint64(round(p * 4294967296.0))


def dropout_mask(a, layer, p, seed=0, step=0, sample_ids=None):
    """cnnscale's inverted-dropout multiplier for a (kept: 1/(1−p), dropped: 0), in a's dtype; the
    element index is the plain per-sample C×H×W (C×D×H×W, features) order."""
    n = a.shape[0]
    ids = list(range(n)) if sample_ids is None else sample_ids
    per = int(np.prod(a.shape[1:]))
    keep = np.stack([dropout_keep(seed, step, layer, ids[i], per, p) for i in range(n)])
    return torch.from_numpy(keep).reshape(a.shape).to(a.dtype) * (1.0 / (1.0 - p))


def run_graph(cap, params, x, follow, seed=0, step=0, sample_ids=None):
    """cnnscale's graph (graph.txt) in torch's functional ops with PyTorch's semantics, in the
    dtype of x and params (name → tensor, running statistics updated in place). x is N×C×H×W, or
    N×C×D×H×W (volumes: conv, max-pool, avg-pool and batch norm are then the 3-D ops, with cube
    windows; the adaptive pool, up-sampling and the other spatial ops are 2-D only)."""
    n = x.shape[0]
    ids = list(range(n)) if sample_ids is None else sample_ids
    T = [x]
    for nd in cap.nodes:
        a = T[nd["inputs"][0]]
        op, P = nd["op"], [params[p] for p in nd["params"]]
        kh, kw = nd["kernel"]
        vol = a.dim() == 5  # a volume: the 3-D forms, cube windows
        window = (kh, kh, kw) if vol else (kh, kw)
        if nd["pad_end"] and op != "conv":
            raise ValueError(f"torch_reference: pad_end on {op} (node {nd['index']}): only conv has it")
        if op == "conv" and vol:  # nn.Conv3d; pad_end: padding='same' of an even kernel (the extra zero at the end)
            if nd["pad_end"]:
                a = F.pad(a, (0, nd["pad_end"]) * 3)
            y = F.conv3d(a, P[0], P[1] if len(P) > 1 else None, nd["stride"], nd["pad"], 1, nd["groups"])
        elif op == "conv":  # a weight of nn.Linear's shape (ConvNeXt's pointwise linears) is out × in × 1 × 1
            w = P[0] if P[0].dim() == 4 else P[0][:, :, None, None]
            if nd["pad_end"]:
                a = F.pad(a, (0, nd["pad_end"]) * 2)
            y = F.conv2d(a, w, P[1] if len(P) > 1 else None, nd["stride"], nd["pad"], 1, nd["groups"])
        elif op == "upsample":  # F.interpolate: 0 nearest, 1 bilinear, 2 bilinear align_corners=True
            r = nd["resample"]
            y = F.interpolate(a, scale_factor=nd["stride"], mode="nearest" if r == 0 else "bilinear",
                              **({} if r == 0 else {"align_corners": r == 2}))
        elif op == "deconv":  # nn.ConvTranspose2d: weight in × out × k × k
            y = F.conv_transpose2d(a, P[0], P[1] if len(P) > 1 else None, nd["stride"], nd["pad"])
        elif op == "linear":
            y = F.linear(a, P[0], P[1] if len(P) > 1 else None)
        elif op == "mul":
            y = a * T[nd["inputs"][1]]
        elif op == "act" and nd["act"] == "relu6":
            y = follow.relu6(a)
        elif op == "act" and nd["act"] == "leaky_relu":
            y = follow.leaky_relu(a, nd["slope"])
        elif op == "act" and nd["act"] == "scale":  # y = slope·x (CosmoFlow's ×1.2 after its tanh)
            y = a * nd["slope"]
        elif op == "act":
            y = {"relu6": F.relu6, "sigmoid": torch.sigmoid, "silu": F.silu, "hardswish": F.hardswish,
                 "gelu": F.gelu, "hardsigmoid": F.hardsigmoid, "tanh": torch.tanh}[nd["act"]](a)
        elif op == "bn":
            y = F.batch_norm(a, P[2], P[3], P[0], P[1], training=True, momentum=nd["momentum"], eps=nd["eps"])
            P[4] += 1
        elif op == "relu":
            y = follow.relu(a)
        elif op == "maxpool":
            y = follow.maxpool(a, window, nd["stride"], nd["pad"], nd["ceil"])
        elif op == "avgpool":
            y = (F.avg_pool3d if vol else F.avg_pool2d)(a, window, nd["stride"], nd["pad"], count_include_pad=True)
        elif op == "dropout":
            y = a * dropout_mask(a, nd["index"], nd["p"], seed, step, ids)
        elif op == "stochastic_depth":  # torchvision.ops.StochasticDepth(p, "row"), cnnscale's draw
            p = nd["p"]
            keep = np.array([bool(dropout_keep(seed, step, nd["index"], ids[i], 1, p)[0]) for i in range(n)])
            scale = torch.from_numpy(keep.astype(np.float64)).to(a.dtype).reshape(n, 1, 1, 1)
            y = a * (scale / (1.0 - p)) if p < 1 else a * 0.0
        elif op == "layernorm":  # ConvNeXt's LayerNorm2d: permute, nn.LayerNorm over C, permute back
            y = F.layer_norm(a.permute(0, 2, 3, 1), (a.shape[1],), P[0], P[1], nd["eps"]).permute(0, 3, 1, 2)
        elif op == "layer_scale":
            y = a * P[0]
        elif op == "adaptive_avgpool":
            y = F.adaptive_avg_pool2d(a, tuple(nd["out"][1:]))
        elif op == "channel_slice":  # x.chunk(2, dim=1)'s halves
            y = a[:, nd["slice"][0]:nd["slice"][1]]
        elif op == "channel_shuffle":  # torchvision.models.shufflenetv2.channel_shuffle
            b, c, h, w = a.shape
            g = nd["groups"]
            y = a.reshape(b, g, c // g, h, w).transpose(1, 2).reshape(b, c, h, w)
        elif op == "flatten":
            y = a.flatten(1)
        elif op == "add":
            y = a + T[nd["inputs"][1]]
        elif op == "concat":
            y = torch.cat([T[t] for t in nd["inputs"]], 1)
        else:
            raise ValueError(f"torch_reference: no reference for op {op}")
        T.append(y)
    return T[-1]


def compare_grads(lines, flat, g64, g32, floor=1e-4):
    """Per parameter tensor: max|ours − float64| / max|float64| at most 3 × torch fp32's own
    + floor. max|float64| is floored at 1e-3 × the model's largest gradient: a conv bias before a
    batch norm has gradient 0 (float64: ~1e-18), and what both fp32 sides give there is rounding
    noise of a cancelling sum, which a ratio to 1e-18 would compare with chance.
    lines: the tool's 'param NAME OFFSET NUMEL' lines; g64/g32: name → gradient.
    Returns (checked, failures as text, worst ours, worst torch fp32)."""
    checked, bad, worst, worst_t = 0, [], (0.0, ""), (0.0, "")
    gmax = max(float(g.abs().max()) for g in g64.values())
    for line in lines:
        if not line.startswith("param "):
            continue
        _, name, off, numel = line.split()
        if name not in g64:
            continue
        off, numel = int(off), int(numel)
        r = g64[name].reshape(-1).numpy()
        o = flat[off:off + numel]
        t = g32[name].reshape(-1).numpy().astype(np.float64)
        s = max(float(np.abs(r).max()), 1e-3 * gmax, 1e-30)
        e, et = float(np.abs(o - r).max()) / s, float(np.abs(t - r).max()) / s
        checked += 1
        worst = max(worst, (e, name))
        worst_t = max(worst_t, (et, name))
        if e > 3 * et + floor:
            bad.append(f"{name} {e:.1e} (torch fp32 {et:.1e})")
    return checked, bad, worst, worst_t


def _state(path):
    import h5py
    with h5py.File(path, "r") as f:
        return {k: torch.as_tensor(np.array(f["model"][k][()])) for k in f["model"]}


def main(argv):
    """torch_reference.py torchvision|graph|unet|cosmoflow MODEL C H W CLASSES DIR [FLOOR] [--depth D]:
    DIR holds ckpt.h5 (the weights), x.f32 and y.i32 (the batch: N labels, or N label maps of H×W,
    of D×H×W with --depth)
    or y.f32 (regression: N×CLASSES float32 targets, the loss F.mse_loss), and what
    `cnnscale_resnet_tool grad ... --capture DIR/cap` wrote: grad.f32, grad.txt, cap/. --depth D:
    the samples are volumes, x.f32 holds N×C×D×H×W. Prints "ok ..." / "FAIL ..." lines."""
    argv = list(argv)
    volume_depth = None  # --depth D
    if "--depth" in argv:
        i = argv.index("--depth")
        volume_depth = int(argv[i + 1])
        del argv[i:i + 2]
    kind, model, C, H, W, K, d = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4]), int(argv[5]), argv[6]
    floor = float(argv[7]) if len(argv) > 7 else 1e-4  # compare_grads' additive floor
    torch.set_num_threads(int(os.environ.get("TORCH_REFERENCE_THREADS", "2")))
    sample = [C, H, W] if volume_depth is None else [C, volume_depth, H, W]

    def report(name, good):
        print(("ok " if good else "FAIL ") + name)

    lines = open(f"{d}/grad.txt").read().split("\n")
    our_loss = float(next(l.split()[1] for l in lines if l.startswith("loss ")))
    x = np.fromfile(f"{d}/x.f32", np.float32)
    n = x.size // int(np.prod(sample))
    x = torch.from_numpy(x.reshape([n] + sample))
    if os.path.exists(f"{d}/y.f32"):  # regression: N×K targets, mean squared error over the N×K outputs
        y = torch.from_numpy(np.fromfile(f"{d}/y.f32", np.float32).reshape(n, K))

        def criterion(out):
            return F.mse_loss(out, y.to(out.dtype))
    else:
        y = torch.from_numpy(np.fromfile(f"{d}/y.i32", np.int32).astype(np.int64))
        if y.numel() == n * int(np.prod(sample[1:])):  # label maps (segmentation): F.cross_entropy over
            y = y.reshape([n] + sample[1:])  # N×K×H×W and N×H×W (volumes: N×K×D×H×W and N×D×H×W)

        def criterion(out):
            return F.cross_entropy(out, y)
    cap = Capture(f"{d}/cap", n, sample)
    follow = Follow(cap)
    sd = _state(f"{d}/ckpt.h5")
    grads, buffers, losses = {}, {}, {}
    for dt, mode in ((torch.float64, "decide"), (torch.float32, "replay")):
        follow.reset(mode)
        if kind == "unet":  # unet(D,W): tests/nn/unet_reference.py, ReLUs and max-pools through follow
            # (--depth: the 3-D U-Net, UNet(dims=3), its max-pools follow.maxpool's max_pool3d)
            from unet_reference import UNet
            depth, width = (int(v) for v in model[5:-1].split(",")) if model != "unet" else (4, 64)
            net = UNet(C, K, depth, width, relu=follow.relu, maxpool=follow.maxpool,
                       dims=2 if volume_depth is None else 3)
            net.load_state_dict(sd)  # strict
            net = net.to(dt).train()
            loss = criterion(net(x.to(dt)))
            loss.backward()
            grads[dt] = {k: p.grad.double() for k, p in net.named_parameters()}
            buffers[dt] = {k: b.double() for k, b in net.named_buffers()}
        elif kind == "cosmoflow":  # cosmoflow(W,K): tests/nn/cosmoflow_reference.py, leaky ReLUs, max-pools
            # and dropouts through follow (the dropouts draw cnnscale's masks)
            from cosmoflow_reference import CosmoFlow, parse_model
            width, kernel = parse_model(model)
            net = CosmoFlow(C, K, width, kernel, sample[1:], leaky=follow.leaky_relu, maxpool=follow.maxpool,
                            dropout_fn=follow.dropout)
            net.load_state_dict(sd)  # strict
            net = net.to(dt).train()
            loss = criterion(net(x.to(dt)))
            loss.backward()
            grads[dt] = {k: p.grad.double() for k, p in net.named_parameters()}
            buffers[dt] = {k: b.double() for k, b in net.named_buffers()}
        elif kind == "torchvision":
            import torchvision
            net = getattr(torchvision.models, model)(num_classes=K)
            net.load_state_dict(sd)  # strict
            net = net.to(dt).train()
            patch_torchvision_resnet(net, follow)
            loss = criterion(net(x.to(dt)))
            loss.backward()
            grads[dt] = {k: p.grad.double() for k, p in net.named_parameters()}
            buffers[dt] = {k: b.double() for k, b in net.named_buffers()}
        else:
            params = {k: v.to(dt).clone().requires_grad_(v.is_floating_point() and not
                      k.endswith(("running_mean", "running_var", "num_batches_tracked"))) for k, v in sd.items()}
            loss = criterion(run_graph(cap, params, x.to(dt), follow))
            loss.backward()
            grads[dt] = {k: p.grad.double() for k, p in params.items() if p.requires_grad}
            buffers[dt] = {k: p.detach().double() for k, p in params.items() if not p.requires_grad}
        losses[dt] = float(loss)
    ref = losses[torch.float64]
    # 1e-5 relative, or as close as torch's own float32 loss (3×, as the gradients): after 2
    # steps at lr 0.05 some zoo checkpoints have losses near 18 whose float32 value is 1.3e-5
    # from float64 in torch too (mnasnet1_0).
    tol = max(1e-5 * abs(ref) + 1e-6, 3 * abs(losses[torch.float32] - ref))
    report(f"training loss equals the float64 reference's ({our_loss:.9f} vs {ref:.9f}, torch fp32 "
           f"{losses[torch.float32]:.9f})", abs(our_loss - ref) <= tol)
    print("note " + follow.summary())
    clear = follow.clear()
    report(f"cnnscale's ReLU, ReLU6, leaky ReLU and max-pool decisions are float64's wherever float64 is not "
           f"within {TIE:g} of a tie ({clear} differ)", clear == 0)
    flat = np.fromfile(f"{d}/grad.f32", np.float32).astype(np.float64)
    P = flat.size // 2
    checked, bad, worst, worst_t = compare_grads(lines, flat, grads[torch.float64], grads[torch.float32], floor)
    report(f"gradients of all {checked} parameters as close to float64's as torch fp32's (3x + {floor:g}; worst "
           f"{worst[0]:.1e} at {worst[1]}, torch fp32's worst {worst_t[0]:.1e})"
           + (": " + "; ".join(bad[:4]) if bad else ""),
           checked == len(grads[torch.float64]) and checked > 0 and not bad)
    worst_b, nb, bad_b = (0.0, "", 0.0), 0, []
    for line in lines:
        if not line.startswith("param "):
            continue
        _, name, off, numel = line.split()
        if not name.endswith(("running_mean", "running_var")):
            continue
        off, numel = int(off), int(numel)
        r = buffers[torch.float64][name].reshape(-1).numpy()
        # A batch-norm after a 1×1 conv of a batch-normalised input sees batch means that are 0
        # but for rounding (W · 0): its running_mean is ~1e-8, and a ratio to that compares
        # noise. The scale is floored at 1e-3 × the model's largest of that kind (as gradients).
        kind = name.rsplit(".", 1)[1]
        floor = 1e-3 * max(float(b.abs().max()) for k, b in buffers[torch.float64].items() if k.endswith(kind))
        scale = max(np.abs(r).max(), floor, 1e-30)
        e = float(np.abs(flat[P + off:P + off + numel] - r).max() / scale)
        # torch's own float32 error on this tensor: a mean of activations that nearly cancel
        # (late layers, few rows) is off by 1e-4 in any float32 implementation; such a tensor
        # may be as far as 3× torch fp32's.
        e_t = float(np.abs(buffers[torch.float32][name].reshape(-1).numpy() - r).max() / scale)
        if e > 1e-4 and e > 3 * e_t:
            bad_b.append(f"{name} {e:.1e} (torch fp32 {e_t:.1e})")
        worst_b = max(worst_b, (e, name, e_t))
        nb += 1
    if nb:
        report(f"running statistics after the training forward equal the reference's ({nb} tensors; worst "
               f"{worst_b[0]:.1e} at {worst_b[1]}, torch fp32 {worst_b[2]:.1e}; each <= 1e-4 or 3x torch fp32's)"
               + (": " + "; ".join(bad_b[:4]) if bad_b else ""), nb > 0 and not bad_b)


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
