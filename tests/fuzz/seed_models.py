# seed_models.py — tiny PyTorch CNNs whose ONNX exports (scripts/export-onnx.py) are the
# seeds of fuzz_onnx_import (tests/fuzz/make_seeds.sh): together they reach every op the
# importer reads and the decomposed forms it recognises, with as few weights as possible
# (a few KiB a file). Images 3x8x8 or volumes 1x8x8x8, 4 classes (the target's shapes).
import torch
from torch import nn
import torch.nn.functional as F


class Blocks(nn.Module):  # conv/bn/relu, SE (GAP, sigmoid, Mul), hardswish, residual add, pools, Linear
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(4)
        self.se1 = nn.Conv2d(4, 2, 1)
        self.se2 = nn.Conv2d(2, 4, 1)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1, groups=2)
        self.hs = nn.Hardswish()
        self.hsig = nn.Hardsigmoid()
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))
        s = torch.sigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(x, 1)))))
        x = x * s
        y = self.hs(self.c2(x)) + self.hsig(x)
        x = F.max_pool2d(x + y, 2)
        x = F.avg_pool2d(F.relu6(x), 3, stride=1, padding=1)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(self.drop(x))


class Dense(nn.Module):  # encoder-decoder: ConvTranspose, Resize (nearest, bilinear), Concat, dense output
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.c3 = nn.Conv2d(12, 4, 1)

    def forward(self, x):
        a = F.leaky_relu(self.c1(x), 0.1)
        b = torch.tanh(self.c2(F.max_pool2d(a, 2)))
        u = self.up(b)
        n = F.interpolate(b, scale_factor=2, mode="nearest")
        l = F.interpolate(b, scale_factor=2, mode="bilinear", align_corners=False)
        return self.c3(torch.cat([u, n, a + l], 1))


class LayerNormNHWC(nn.Module):  # ConvNeXt's block: permute, LayerNorm, Linear, GELU, SiLU, Pad
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 2, stride=2)
        self.dw = nn.Conv2d(4, 4, 3, groups=4)
        self.ln = nn.LayerNorm(4, eps=1e-6)
        self.l1 = nn.Linear(4, 8)
        self.l2 = nn.Linear(8, 4)
        self.gamma = nn.Parameter(torch.full((4, 1, 1), 0.5))  # torchvision's CNBlock layer scale
        self.head = nn.Linear(4, 4)

    def forward(self, x):
        x = self.stem(x)
        y = self.dw(F.pad(x, (1, 1, 1, 1)))
        y = y.permute(0, 2, 3, 1)
        y = self.l2(F.gelu(self.l1(self.ln(y))))
        y = self.gamma * y.permute(0, 3, 1, 2)
        x = F.silu(x + y)
        return self.head(x.mean((2, 3)))


class Reshape(nn.Module):  # torch's shape arithmetic: x.view(x.size(0), -1) (Shape, Gather, Concat, Reshape)
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 2, 3, stride=2, padding=1)
        self.fc = nn.Linear(2 * 4 * 4, 4)

    def forward(self, x):
        x = F.relu(self.c(x))
        return self.fc(x.view(x.size(0), -1))


class Volume(nn.Module):  # Conv3d, BatchNorm3d, leaky ReLU, MaxPool3d, ConvTranspose3d, flatten
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv3d(1, 2, 3, padding=1)
        self.b1 = nn.BatchNorm3d(2)
        self.up = nn.ConvTranspose3d(2, 2, 2, stride=2)
        self.fc = nn.Linear(2, 4)

    def forward(self, x):
        x = F.max_pool3d(F.leaky_relu(self.b1(self.c1(x)), 0.3), 2)
        x = F.max_pool3d(self.up(x), 8)
        return self.fc(torch.flatten(x, 1))
