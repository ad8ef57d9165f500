# user_cnn.py — a CNN as a cnnscale user might write one in PyTorch, for tests/nn/onnx_import.sh:
# depthwise-separable convolutions, squeeze-and-excitation with SiLU, GELU, hard-swish, ReLU6,
# an inception-style concatenation, a residual add, bias-free convs, a max pool, x.mean over
# H×W, dropout and a linear head — registered in an order other than the forward's (the head
# first), as torch allows. `act="leaky"` swaps GELU for LeakyReLU(0.1); `act="elu"` for ELU, which cnnscale does not read.
import torch
from torch import nn


class SE(nn.Module):
    def __init__(self, c, squeeze):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.act = nn.SiLU()
        self.fc2 = nn.Conv2d(squeeze, c, 1)
        self.gate = nn.Sigmoid()

    def forward(self, x):
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class UserCNN(nn.Module):
    def __init__(self, classes=4, act="gelu", drop=0.25):
        super().__init__()
        self.head = nn.Linear(48, classes)
        self.drop = nn.Dropout(drop)
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                                  nn.GELU() if act == "gelu" else nn.LeakyReLU(0.1) if act == "leaky" else nn.ELU())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16, bias=False),
                                nn.BatchNorm2d(16, momentum=0.05, eps=1e-3), nn.Hardswish())
        self.se = SE(16, 4)
        self.pw = nn.Sequential(nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU6())
        self.branch_a = nn.Conv2d(24, 16, 1)
        self.branch_b = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.ReLU())
        self.proj = nn.Conv2d(24, 24, 1)
        self.pool = nn.MaxPool2d(2)
        self.mix = nn.Sequential(nn.Conv2d(24, 48, 3, padding=1), nn.BatchNorm2d(48), nn.SiLU())

    def forward(self, x):
        x = self.se(self.dw(self.stem(x)))
        x = self.pw(x)
        y = torch.cat([self.branch_a(x), self.branch_b(x)], dim=1)
        x = self.proj(x) + y
        x = self.mix(self.pool(x))
        return self.head(self.drop(x.mean((2, 3))))
