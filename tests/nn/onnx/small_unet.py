# small_unet.py — a U-Net-shaped classifier as a cnnscale user might write one in PyTorch, for
# tests/nn/onnx_import.sh (issue 50): an encoder level (conv, batch norm, ReLU, max pool), its
# up path back to the input's size — `up`: "deconv" (ConvTranspose2d 2×2 stride 2, the
# original U-Net's), "bilinear" (nn.Upsample, align_corners=False), "bilinear_ac"
# (nn.UpsamplingBilinear2d: align_corners=True), "nearest" — concatenated with the skip
# connection, a conv with LeakyReLU, then x.mean over H×W and a linear head.
import torch
from torch import nn


class SmallUNet(nn.Module):
    def __init__(self, classes=4, up="deconv"):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        if up == "deconv":
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        elif up == "bilinear_ac":
            self.up = nn.Sequential(nn.UpsamplingBilinear2d(scale_factor=2), nn.Conv2d(16, 8, 1))
        else:
            self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode=up), nn.Conv2d(16, 8, 1))
        self.dec = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.LeakyReLU(0.2))
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        s = self.enc(x)
        y = self.up(self.down(s))
        y = self.dec(torch.cat([s, y], dim=1))
        return self.head(y.mean((2, 3)))
