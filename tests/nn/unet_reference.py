"""unet_reference.py — the U-Net as PyTorch users write it (milesial/Pytorch-UNet's layout,
bilinear=False, any depth D and width W), the module cnnscale's built-in `unet(D,W)` must equal:
its state_dict (names, shapes) loads cnnscale's checkpoints strictly, and a training step through
it is what tests/nn/unet_torch.sh compares cnnscale's with. `relu` and `maxpool` may be routed
through torch_reference.Follow (called in cnnscale's node order: inc, down1..D, up1..D).
dims=3: the 3-D U-Net over C×D×H×W volumes (Çiçek et al. 2016) that cnnscale builds on a
volume input, the same layout and names: nn.Conv3d, nn.BatchNorm3d, nn.MaxPool3d(2) (the
default pool F.max_pool3d; `maxpool` is called as maxpool(x, 2, 2, 0), a cube window),
nn.ConvTranspose3d(cin, cin // 2, 2, stride 2), outc.conv a 1×1×1 nn.Conv3d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def _ops(dims):
    """(Conv, BatchNorm, MaxPool, ConvTranspose, max_pool) of a 2-D or 3-D U-Net."""
    if dims == 2:
        return nn.Conv2d, nn.BatchNorm2d, nn.MaxPool2d, nn.ConvTranspose2d, F.max_pool2d
    if dims == 3:
        return nn.Conv3d, nn.BatchNorm3d, nn.MaxPool3d, nn.ConvTranspose3d, F.max_pool3d
    raise ValueError(f"UNet: dims={dims}: 2 (images) or 3 (volumes)")


class DoubleConv(nn.Module):
    def __init__(self, cin, cout, act, dims=2):
        super().__init__()
        conv, bn = _ops(dims)[:2]
        self.act = act
        self.double_conv = nn.Sequential(
            conv(cin, cout, 3, padding=1, bias=False), bn(cout), nn.ReLU(inplace=False),
            conv(cout, cout, 3, padding=1, bias=False), bn(cout), nn.ReLU(inplace=False))

    def forward(self, x):
        s = self.double_conv
        x = self.act(s[1](s[0](x)))
        return self.act(s[4](s[3](x)))


class Down(nn.Module):
    def __init__(self, cin, cout, act, pool, dims=2):
        super().__init__()
        self.pool = pool
        self.maxpool_conv = nn.Sequential(_ops(dims)[2](2), DoubleConv(cin, cout, act, dims))

    def forward(self, x):
        return self.maxpool_conv[1](self.pool(x, 2, 2, 0))


class Up(nn.Module):
    def __init__(self, cin, cout, act, dims=2):
        super().__init__()
        self.up = _ops(dims)[3](cin, cin // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(cin, cout, act, dims)

    def forward(self, x1, x2):
        return self.conv(torch.cat([x2, self.up(x1)], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, depth=4, width=64, relu=F.relu, maxpool=None, dims=2):
        super().__init__()
        conv, max_pool = _ops(dims)[0], _ops(dims)[4]
        pool = maxpool or (lambda x, k, s, p: max_pool(x, k, s, p))
        self.depth = depth
        self.inc = DoubleConv(n_channels, width, relu, dims)
        for i in range(1, depth + 1):
            setattr(self, f"down{i}", Down(width << (i - 1), width << i, relu, pool, dims))
        for i in range(1, depth + 1):
            setattr(self, f"up{i}", Up(width << (depth - i + 1), width << (depth - i), relu, dims))
        self.outc = nn.Module()
        self.outc.conv = conv(width, n_classes, kernel_size=1)

    def forward(self, x):
        skips = [self.inc(x)]
        for i in range(1, self.depth + 1):
            skips.append(getattr(self, f"down{i}")(skips[-1]))
        x = skips.pop()
        for i in range(1, self.depth + 1):
            x = getattr(self, f"up{i}")(x, skips.pop())
        return self.outc.conv(x)
