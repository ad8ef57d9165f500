"""unet_reference.py — the U-Net as PyTorch users write it (milesial/Pytorch-UNet's layout,
bilinear=False, any depth D and width W), the module cnnscale's built-in `unet(D,W)` must equal:
its state_dict (names, shapes) loads cnnscale's checkpoints strictly, and a training step through
it is what tests/nn/unet_torch.sh compares cnnscale's with. `relu` and `maxpool` may be routed
through torch_reference.Follow (called in cnnscale's node order: inc, down1..D, up1..D)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DoubleConv(nn.Module):
    def __init__(self, cin, cout, act):
        super().__init__()
        self.act = act
        self.double_conv = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=False),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=False))

    def forward(self, x):
        s = self.double_conv
        x = self.act(s[1](s[0](x)))
        return self.act(s[4](s[3](x)))


class Down(nn.Module):
    def __init__(self, cin, cout, act, pool):
        super().__init__()
        self.pool = pool
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(cin, cout, act))

    def forward(self, x):
        return self.maxpool_conv[1](self.pool(x, 2, 2, 0))


class Up(nn.Module):
    def __init__(self, cin, cout, act):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cin // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(cin, cout, act)

    def forward(self, x1, x2):
        return self.conv(torch.cat([x2, self.up(x1)], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, depth=4, width=64, relu=F.relu, maxpool=None):
        super().__init__()
        pool = maxpool or (lambda x, k, s, p: F.max_pool2d(x, k, s, p))
        self.depth = depth
        self.inc = DoubleConv(n_channels, width, relu)
        for i in range(1, depth + 1):
            setattr(self, f"down{i}", Down(width << (i - 1), width << i, relu, pool))
        for i in range(1, depth + 1):
            setattr(self, f"up{i}", Up(width << (depth - i + 1), width << (depth - i), relu))
        self.outc = nn.Module()
        self.outc.conv = nn.Conv2d(width, n_classes, kernel_size=1)

    def forward(self, x):
        skips = [self.inc(x)]
        for i in range(1, self.depth + 1):
            skips.append(getattr(self, f"down{i}")(skips[-1]))
        x = skips.pop()
        for i in range(1, self.depth + 1):
            x = getattr(self, f"up{i}")(x, skips.pop())
        return self.outc.conv(x)
