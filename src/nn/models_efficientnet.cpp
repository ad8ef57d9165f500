// models_efficientnet.cpp — torchvision's EfficientNet B0…B7 (torchvision.models.efficientnet_bN),
// built in with its state_dict names, shapes, registration order and initialisation, so that
// a cnnscale checkpoint loads into torchvision.models.efficientnet_b0(num_classes=K) with
// load_state_dict(strict=True) (tests/nn/zoo_torchvision.sh).
//
// The stage table (expand ratio, kernel, stride, in, out, layers) of _efficientnet_conf, its
// channels scaled by the variant's width (make_divisible(c · width, 8)) and its layer counts by
// its depth (ceil(n · depth)). features.0: Conv2dNormActivation(3, in₀, stride 2, SiLU);
// features.S (S = 1..7): the stage's MBConv blocks features.S.J, the first with the stage's
// stride and input, the others stride 1 from the stage's output: block.0 the expanding 1×1
// (when the ratio is not 1), the depthwise k×k, SqueezeExcitation(expanded, max(1, in / 4))
// with SiLU and sigmoid (block.K.fc1, .fc2), the projecting 1×1 + bn; with stride 1 and
// in = out the block's output goes through StochasticDepth(0.2 · b / blocks, "row") (b = the
// block's index over all stages) and the input is added. Then the last 1×1 to 4 × the last
// out + bn + SiLU, global average pool, classifier.0 dropout (0.2 … 0.5), classifier.1
// linear. Batch norms PyTorch's defaults, eps 0.001 / momentum 0.01 for B5–B7. Init: convs
// kaiming_normal_(fan_out) with zero biases (the SE's), bn 1/0, the linear U(±1/√classes)
// with zero bias, as torchvision's __init__.
#include <algorithm>
#include <cmath>

#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

int make_divisible(double v, int d = 8) {  // torchvision's _make_divisible
  int n = std::max(d, static_cast<int>(v + d / 2.0) / d * d);
  if (n < 0.9 * v) n += d;
  return n;
}

struct Variant {
  const char* name;
  double width, depth, dropout;
};
constexpr Variant kVariants[] = {{"efficientnet_b0", 1.0, 1.0, 0.2}, {"efficientnet_b1", 1.0, 1.1, 0.2},
                                 {"efficientnet_b2", 1.1, 1.2, 0.3}, {"efficientnet_b3", 1.2, 1.4, 0.3},
                                 {"efficientnet_b4", 1.4, 1.8, 0.4}, {"efficientnet_b5", 1.6, 2.2, 0.4},
                                 {"efficientnet_b6", 1.8, 2.6, 0.5}, {"efficientnet_b7", 2.0, 3.1, 0.5}};

const Variant* find_variant(const std::string& name) {
  for (const Variant& v : kVariants)
    if (name == v.name) return &v;
  return nullptr;
}

}  // namespace

bool is_torchvision_efficientnet(const std::string& name) { return find_variant(name) != nullptr; }

ModelGraph torchvision_efficientnet(const std::string& name, const SampleShape& in, int classes) {
  const Variant* v = find_variant(name);
  if (!v) internal_error("torchvision_efficientnet: unknown variant");
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stages halve the size five times), got ", in.height, "x",
         in.width);
  // expand ratio, kernel, stride, in, out, layers (torchvision's bneck_conf rows)
  static const int table[7][6] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},  {6, 5, 2, 24, 40, 2},
                                  {6, 3, 2, 40, 80, 3},  {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4},
                                  {6, 3, 1, 192, 320, 1}};
  const bool late = name == "efficientnet_b5" || name == "efficientnet_b6" || name == "efficientnet_b7";
  const double momentum = late ? 0.01 : 0.1, eps = late ? 0.001 : 1e-5;
  const double sd_prob = 0.2;
  auto ch = [&](int c) { return make_divisible(c * v->width); };
  auto layers = [&](int n) { return static_cast<int>(std::ceil(n * v->depth)); };
  int total = 0;
  for (const auto& r : table) total += layers(r[5]);

  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_normal_fan_out);
  // Conv2dNormActivation: conv (padding (k-1)/2, no bias) as NAME.0, bn NAME.1, SiLU or none.
  auto cna = [&](int x, const std::string& n, int out, int k, int stride, int groups, bool silu) {
    x = b.bn(b.conv(x, n + ".0", out, k, stride, (k - 1) / 2, false, groups), n + ".1", momentum, eps);
    return silu ? b.act(x, Act::silu) : x;
  };
  int x = cna(b.input(), "features.0", ch(table[0][3]), 3, 2, 1, true);
  int block_id = 0;
  for (int s = 0; s < 7; ++s) {
    const int ratio = table[s][0], k = table[s][1], out = ch(table[s][4]);
    for (int j = 0; j < layers(table[s][5]); ++j, ++block_id) {
      const int cin = j == 0 ? ch(table[s][3]) : out, stride = j == 0 ? table[s][2] : 1;
      const int expanded = make_divisible(cin * static_cast<double>(ratio));
      const std::string p = "features." + std::to_string(s + 1) + "." + std::to_string(j) + ".block.";
      int y = x, q = 0;
      if (expanded != cin) y = cna(y, p + std::to_string(q++), expanded, 1, 1, 1, true);
      y = cna(y, p + std::to_string(q++), expanded, k, stride, expanded, true);
      const std::string se = p + std::to_string(q++);
      y = b.se(y, se, std::max(1, cin / 4), false, Act::silu, Act::sigmoid);
      b.set_init(se + ".fc1.bias", Init::zeros);
      b.set_init(se + ".fc2.bias", Init::zeros);
      y = cna(y, p + std::to_string(q++), out, 1, 1, 1, false);
      if (stride == 1 && cin == out)  // torchvision: stochastic_depth(result) + input
        x = b.add(b.stochastic_depth(y, sd_prob * block_id / total), x);
      else
        x = y;
    }
  }
  const int last_in = ch(table[6][4]);
  x = cna(x, "features.8", 4 * last_in, 1, 1, 1, true);
  x = b.flatten(b.gap(x));
  x = b.dropout(x, v->dropout);
  x = b.linear(x, "classifier.1", classes);
  b.set_init("classifier.1.weight", Init::uniform_inv_sqrt_fan_out);
  b.set_init("classifier.1.bias", Init::zeros);
  return {b.finish(x, classes), name, name};
}

}  // namespace cnnscale::nn
