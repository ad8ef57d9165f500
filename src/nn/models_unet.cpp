// models_unet.cpp — the U-Net (Ronneberger, Fischer, Brox 2015) built in as PyTorch users
// write it (the widely used milesial/Pytorch-UNet layout, bilinear=False), with its
// state_dict names, shapes and PyTorch's default initialisation, so that a cnnscale checkpoint
// loads into that nn.Module with load_state_dict(strict=True) (tests/nn/unet_torch.sh).
//
// `unet` = `unet(4,64)`; `unet(D,W)`: depth D (max-pools), width W (the first level's channels).
//   inc        DoubleConv(C, W)
//   down1..D   MaxPool2d(2), DoubleConv(W·2^(i-1), W·2^i)
//   up1..D     ConvTranspose2d(W·2^(D-i+1), W·2^(D-i), 2, stride 2), torch.cat([skip, up], 1),
//              DoubleConv(W·2^(D-i+1), W·2^(D-i))
//   outc       Conv2d(W, classes, 1)
// DoubleConv(in, out) = nn.Sequential(Conv2d(in, out, 3, padding=1, bias=False), BatchNorm2d,
// ReLU, Conv2d(out, out, 3, padding=1, bias=False), BatchNorm2d, ReLU) — names
// `<block>.double_conv.{0,1,3,4}`; a down block's is `down<i>.maxpool_conv.1.double_conv…`, an up
// block's `up<i>.conv.double_conv…` and its transposed conv `up<i>.up`. The 3×3 convolutions
// are padded (the output has the input's H×W, as the segmentation data's label maps); the
// original's unpadded convolutions with cropped skips are not offered. H and W must be
// multiples of 2^D (milesial pads odd sizes inside the forward; cnnscale refuses them).
// On a volume (C×D×H×W) it is the 3-D U-Net (Çiçek et al. 2016) in the same layout and names:
// Conv3d, BatchNorm3d, MaxPool3d(2), ConvTranspose3d(…, 2, stride 2), ending in K×D×H×W (3-D
// segmentation; tests/nn/unet_reference.py's UNet(dims=3)); D too a multiple of 2^D.
#include <cstdio>
#include <string>
#include <vector>

#include "nn/graph.hpp"
#include "nn/models_unet.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

int double_conv(GraphBuilder& b, int x, const std::string& name, int out) {
  const std::string p = name + ".double_conv.";
  x = b.relu(b.bn(b.conv(x, p + "0", out, 3, 1, 1, false), p + "1"));
  return b.relu(b.bn(b.conv(x, p + "3", out, 3, 1, 1, false), p + "4"));
}

}  // namespace

bool parse_unet_name(const std::string& name, int* depth, int* width) {
  *depth = 4;
  *width = 64;
  if (name == "unet") return true;
  if (name.rfind("unet(", 0) != 0 || name.back() != ')') return false;
  char close = 0, extra = 0;
  if (std::sscanf(name.c_str(), "unet(%d,%d%c%c", depth, width, &close, &extra) != 3 || close != ')')
    fail("--model ", name, ": write unet or unet(D,W): depth D (1 to 6 max-pools) and width W (the first level's ",
         "channels, e.g. unet(4,64), the original)");
  if (*depth < 1 || *depth > 6 || *width < 1 || *width > 1024)
    fail("--model ", name, ": unet(D,W) takes a depth D of 1 to 6 and a width W of 1 to 1024");
  if (int64_t{*width} << *depth > 65536)
    fail("--model ", name, ": the deepest level would have ", int64_t{*width} << *depth, " channels; lower W or D");
  return true;
}

ModelGraph unet_model(const std::string& name, const SampleShape& in, int classes) {
  int D = 0, W = 0;
  if (!parse_unet_name(name, &D, &W)) internal_error("unet_model: not a unet name: ", name);
  const int m = 1 << D;
  if (in.height % m || in.width % m || (in.volume() && in.depth % m))
    fail(name, " halves the ", in.volume() ? "volume " : "image ", D, " times: its ",
         in.volume() ? "depth, height and width" : "height and width", " must be multiples of ", m, ", got ",
         in.text(), " (crop or pad the data set, or lower the depth: unet(D,W))");
  GraphBuilder b(in);
  std::vector<int> skips;
  int x = double_conv(b, b.input(), "inc", W);
  for (int i = 1; i <= D; ++i) {
    skips.push_back(x);
    x = double_conv(b, b.maxpool(x, 2, 2), "down" + std::to_string(i) + ".maxpool_conv.1", W << i);
  }
  for (int i = 1; i <= D; ++i) {
    const int out = W << (D - i);
    const std::string up = "up" + std::to_string(i);
    const int u = b.deconv(x, up + ".up", out, 2, 2, 0, true);
    x = double_conv(b, b.concat({skips[static_cast<size_t>(D - i)], u}), up + ".conv", out);
  }
  x = b.conv(x, "outc.conv", classes, 1, 1, 0, true);
  const std::string canon = "unet(" + std::to_string(D) + "," + std::to_string(W) + ")";
  return {b.finish(x, classes), canon, canon};
}

}  // namespace cnnscale::nn
