// models_mobilenet_v3.cpp — torchvision's MobileNetV3 (torchvision.models.mobilenet_v3_large
// and mobilenet_v3_small, width 1.0, not dilated), built in with its state_dict names,
// shapes, registration order and initialisation, so that a cnnscale checkpoint loads into
// torchvision.models.mobilenet_v3_large(num_classes=K) with load_state_dict(strict=True)
// (tests/nn/zoo_torchvision.sh).
//
// Batch norms: BatchNorm2d(eps=0.001, momentum=0.01). features.0: Conv2dNormActivation(3, 16,
// stride 2, hard-swish); features.1..N: InvertedResidual blocks of the table (input, kernel,
// expanded, out, SE, HS, stride) read off torchvision's _mobilenet_v3_conf: block.0 the
// expanding 1×1 when expanded ≠ input, then the depthwise k×k (stride s), then where SE
// torchvision.ops.SqueezeExcitation(expanded, make_divisible(expanded / 4, 8)) with ReLU and
// hard-sigmoid (block.K.fc1, .fc2), then the projecting 1×1 + bn without activation; the
// input is added when stride 1 and input = out. Activations ReLU ("RE") or hard-swish ("HS").
// Then the last 1×1 to 6 × the last out channels + bn + hard-swish, global average pool,
// classifier.0 linear (1280 large, 1024 small), hard-swish, classifier.2 dropout 0.2,
// classifier.3 linear. Init: convs kaiming_normal_(fan_out) with zero biases (the SE's), bn
// 1/0, linears N(0, 0.01²) with zero biases, as torchvision's __init__.
#include <algorithm>
#include <iterator>

#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

// torchvision's _make_divisible(v, 8): round to the nearest multiple of 8, at least 8, and
// never more than 10 % below v.
int make_divisible(double v, int d = 8) {
  int n = std::max(d, static_cast<int>(v + d / 2.0) / d * d);
  if (n < 0.9 * v) n += d;
  return n;
}

struct Row {
  int in, k, exp, out;
  bool se, hs;
  int stride;
};

}  // namespace

bool is_torchvision_mobilenet_v3(const std::string& name) {
  return name == "mobilenet_v3_large" || name == "mobilenet_v3_small";
}

ModelGraph torchvision_mobilenet_v3(const std::string& name, const SampleShape& in, int classes) {
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stages halve the size five times), got ", in.height, "x",
         in.width);
  static const Row large[] = {
      {16, 3, 16, 16, false, false, 1},   {16, 3, 64, 24, false, false, 2},   {24, 3, 72, 24, false, false, 1},
      {24, 5, 72, 40, true, false, 2},    {40, 5, 120, 40, true, false, 1},   {40, 5, 120, 40, true, false, 1},
      {40, 3, 240, 80, false, true, 2},   {80, 3, 200, 80, false, true, 1},   {80, 3, 184, 80, false, true, 1},
      {80, 3, 184, 80, false, true, 1},   {80, 3, 480, 112, true, true, 1},   {112, 3, 672, 112, true, true, 1},
      {112, 5, 672, 160, true, true, 2},  {160, 5, 960, 160, true, true, 1},  {160, 5, 960, 160, true, true, 1}};
  static const Row small[] = {
      {16, 3, 16, 16, true, false, 2},  {16, 3, 72, 24, false, false, 2}, {24, 3, 88, 24, false, false, 1},
      {24, 5, 96, 40, true, true, 2},   {40, 5, 240, 40, true, true, 1},  {40, 5, 240, 40, true, true, 1},
      {40, 5, 120, 48, true, true, 1},  {48, 5, 144, 48, true, true, 1},  {48, 5, 288, 96, true, true, 2},
      {96, 5, 576, 96, true, true, 1},  {96, 5, 576, 96, true, true, 1}};
  const bool is_large = name == "mobilenet_v3_large";
  const Row* rows = is_large ? large : small;
  const size_t nrows = is_large ? std::size(large) : std::size(small);
  const int last_channel = is_large ? 1280 : 1024;

  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_normal_fan_out);
  const double momentum = 0.01, eps = 0.001;
  // Conv2dNormActivation: conv (padding (k-1)/2, no bias) as NAME.0, bn NAME.1, activation.
  auto cna = [&](int x, const std::string& n, int out, int k, int stride, int groups, int act /*0 none 1 relu 2 hs*/) {
    x = b.bn(b.conv(x, n + ".0", out, k, stride, (k - 1) / 2, false, groups), n + ".1", momentum, eps);
    return act == 0 ? x : act == 1 ? b.relu(x) : b.act(x, Act::hardswish);
  };
  int x = cna(b.input(), "features.0", rows[0].in, 3, 2, 1, 2);
  for (size_t i = 0; i < nrows; ++i) {
    const Row& r = rows[i];
    const std::string p = "features." + std::to_string(i + 1) + ".block.";
    const int act = r.hs ? 2 : 1;
    int y = x, k = 0;
    if (r.exp != r.in) y = cna(y, p + std::to_string(k++), r.exp, 1, 1, 1, act);
    y = cna(y, p + std::to_string(k++), r.exp, r.k, r.stride, r.exp, act);
    if (r.se) {
      const std::string s = p + std::to_string(k++);
      y = b.se(y, s, make_divisible(r.exp / 4), true, Act::relu6, Act::hardsigmoid);
      b.set_init(s + ".fc1.bias", Init::zeros);
      b.set_init(s + ".fc2.bias", Init::zeros);
    }
    y = cna(y, p + std::to_string(k++), r.out, 1, 1, 1, 0);
    x = r.stride == 1 && r.in == r.out ? b.add(y, x) : y;  // torchvision: result += input
  }
  const int last_conv = 6 * rows[nrows - 1].out;
  x = cna(x, "features." + std::to_string(nrows + 1), last_conv, 1, 1, 1, 2);
  x = b.flatten(b.gap(x));
  x = b.act(b.linear(x, "classifier.0", last_channel), Act::hardswish);
  x = b.dropout(x, 0.2);
  x = b.linear(x, "classifier.3", classes);
  for (const char* l : {"classifier.0", "classifier.3"}) {
    b.set_init(std::string(l) + ".weight", Init::normal_0_01);
    b.set_init(std::string(l) + ".bias", Init::zeros);
  }
  return {b.finish(x, classes), name, name};
}

}  // namespace cnnscale::nn
