"""cosmoflow_reference.py — the MLPerf HPC CosmoFlow network as a PyTorch nn.Module, the module
cnnscale's built-in `cosmoflow(W,K)` must equal (`cosmoflow` = cosmoflow(32,2), `cosmoflow(W)` =
cosmoflow(W,2)): its state_dict (names, shapes) loads cnnscale's checkpoints strictly, eval-mode
outputs and a training step (MSE over the targets) through it are what
tests/nn/cosmoflow_torch.sh compares cnnscale's with.

    conv1..conv5  nn.Conv3d(c_in, W·2^(i−1), K, padding='same', bias=True), each followed by
                  LeakyReLU(0.3) and MaxPool3d(2) (floor); c_in = in_channels, then the previous
                  conv's channels
    flatten       PyTorch's C,D,H,W order
    fc1           nn.Linear(flat, 128), LeakyReLU(0.3), Dropout(p)
    fc2           nn.Linear(128, 64), LeakyReLU(0.3), Dropout(p)
    fc3           nn.Linear(64, targets)
    output        tanh(fc3) · 1.2

PyTorch's default initialisation throughout (kaiming-uniform a=√5 weights, biases
U(±1/√fan_in)). padding='same' of an even K pads (K−1)//2 before and K−1−(K−1)//2 after each
spatial dim (K=2: nothing before, one zero after), what cnnscale's graph calls pad, pad_end.

`leaky(x, slope)`, `maxpool(x, kernel, stride, pad)` and `dropout_fn(x, p)` (the latter in
training only) may be routed through torch_reference.Follow (leaky_relu, maxpool, dropout),
called in cnnscale's node order: conv1..conv5, fc1, fc2.
"""
import math
import re
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

CONVS = 5
# nn.Conv3d(padding='same') of an even kernel pads a copy of the input: what CosmoFlow does.
warnings.filterwarnings("ignore", message="Using padding='same' with even kernel")
SLOPE = 0.3
SCALE = 1.2


def parse_model(name):
    """'cosmoflow', 'cosmoflow(W)', 'cosmoflow(W,K)' → (W, K) (defaults 32, 2)."""
    m = re.fullmatch(r"cosmoflow(?:\((\d+)(?:,(\d+))?\))?", name.replace(" ", ""))
    if not m:
        raise ValueError(f"not a cosmoflow model name: {name}")
    return int(m.group(1) or 32), int(m.group(2) or 2)


def same_padding(kernel):
    """(pad before, pad after) of PyTorch's padding='same' (stride 1, dilation 1)."""
    total = kernel - 1
    return total // 2, total - total // 2


class CosmoFlow(nn.Module):
    def __init__(self, in_channels=4, targets=4, width=32, kernel=2, input_size=(128, 128, 128), dropout=0.5,
                 leaky=None, maxpool=None, dropout_fn=None, explicit_pad=False):
        """explicit_pad: padding='same' written as F.pad before an unpadded Conv3d (the same network
        and names): torch 1.13's ONNX exporter cannot export padding='same' (aten::_convolution_mode),
        so scripts/export-onnx.py exports this form (a Pad then a Conv, which cnnscale reads)."""
        super().__init__()
        self.explicit_pad = same_padding(kernel) if explicit_pad else None
        size = [input_size] * 3 if isinstance(input_size, int) else list(input_size)
        self.leaky = leaky or (lambda x, s: F.leaky_relu(x, s))
        self.pool = maxpool or (lambda x, k, s, p: F.max_pool3d(x, k, s, p))
        self.dropout_fn = dropout_fn
        self.p = dropout
        cin = in_channels
        for i in range(1, CONVS + 1):
            cout = width << (i - 1)
            setattr(self, f"conv{i}", nn.Conv3d(cin, cout, kernel, padding=0 if explicit_pad else "same", bias=True))
            cin = cout
            size = [s // 2 for s in size]
        if min(size) < 1:
            raise ValueError(f"CosmoFlow: input {input_size} is too small for {CONVS} 2× max-pools")
        self.flat = cin * math.prod(size)
        self.fc1 = nn.Linear(self.flat, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, targets)
        self.drop1 = nn.Dropout(dropout)
        self.drop2 = nn.Dropout(dropout)

    def _drop(self, x, mod):
        if self.training and self.dropout_fn is not None:
            return self.dropout_fn(x, self.p)
        return mod(x)

    def features(self, x):
        for i in range(1, CONVS + 1):
            if self.explicit_pad:
                lo, hi = self.explicit_pad
                x = F.pad(x, (lo, hi) * 3)
            x = self.pool(self.leaky(getattr(self, f"conv{i}")(x), SLOPE), 2, 2, 0)
        return x.flatten(1)

    def head(self, x):
        """fc3's output (before tanh · 1.2)."""
        x = self._drop(self.leaky(self.fc1(x), SLOPE), self.drop1)
        x = self._drop(self.leaky(self.fc2(x), SLOPE), self.drop2)
        return self.fc3(x)

    def forward(self, x):
        return torch.tanh(self.head(self.features(x))) * SCALE
