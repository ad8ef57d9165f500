// models_mnasnet.cpp — torchvision's MNASNets (torchvision.models.mnasnet0_5, 0_75, 1_0, 1_3),
// built in with their state_dict names, shapes, registration order and initialisation, so
// that a cnnscale checkpoint loads into torchvision.models.NAME(num_classes=K) with
// load_state_dict(strict=True) (tests/nn/zoo_torchvision.sh).
//
// layers: 3×3/2 conv (.0) + bn (.1) + ReLU, depthwise 3×3 (.3) + bn (.4) + ReLU, 1×1 (.6) + bn
// (.7); six stacks layers.8..13 of inverted residuals (kernel, stride, expansion, repeats) =
// (3,2,3,3) (5,2,3,3) (5,2,6,3) (3,1,6,2) (5,2,6,4) (3,1,6,1), each block layers.0 1×1
// expand + bn + ReLU, layers.3 depthwise k×k (stride on a stack's first block) + bn + ReLU,
// layers.6 1×1 project + bn, plus the input where width and size are kept (not on a
// stack's first block); layers.14 1×1 to 1280 + bn + ReLU; the mean over H×W; classifier.0
// dropout 0.2, classifier.1 linear. Widths [32,16,24,40,80,96,192,320]·alpha rounded to
// multiples of 8 as torchvision's _round_to_multiple_of. Every batch norm has momentum
// 1 − 0.9997 (torchvision's _BN_MOMENTUM: the running statistics move 333× slower than
// the default's). Init as torchvision's: convs kaiming_normal_(fan_out, relu), batch norms
// 1/0, the linear kaiming_uniform_(fan_out, sigmoid) = U(±√(3/classes)) with bias 0.
#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

// torchvision's _round_to_multiple_of(val, 8, 0.9): round to a multiple of 8, up unless
// that stays within 10 % above a multiple.
int round_to_multiple_of_8(double val) {
  int v = static_cast<int>(val + 4.0) / 8 * 8;
  if (v < 8) v = 8;
  return v >= 0.9 * val ? v : v + 8;
}

double alpha_of(const std::string& name) {
  if (name == "mnasnet0_5") return 0.5;
  if (name == "mnasnet0_75") return 0.75;
  if (name == "mnasnet1_0") return 1.0;
  if (name == "mnasnet1_3") return 1.3;
  return 0;
}

}  // namespace

bool is_torchvision_mnasnet(const std::string& name) { return alpha_of(name) > 0; }

ModelGraph torchvision_mnasnet(const std::string& name, const SampleShape& in, int classes) {
  const double alpha = alpha_of(name);
  if (alpha <= 0) internal_error("torchvision_mnasnet asked for ", name);
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stages halve the size five times), got ", in.height, "x",
         in.width);
  const double momentum = 1 - 0.9997;  // torchvision's _BN_MOMENTUM
  int depths[8];
  const int base[8] = {32, 16, 24, 40, 80, 96, 192, 320};
  for (int i = 0; i < 8; ++i) depths[i] = round_to_multiple_of_8(base[i] * alpha);
  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_normal_fan_out);
  auto bn = [&](int x, const std::string& n) { return b.bn(x, n, momentum); };
  int x = b.relu(bn(b.conv(b.input(), "layers.0", depths[0], 3, 2, 1, false), "layers.1"));
  x = b.relu(bn(b.conv(x, "layers.3", depths[0], 3, 1, 1, false, depths[0]), "layers.4"));
  x = bn(b.conv(x, "layers.6", depths[1], 1, 1, 0, false), "layers.7");
  static const int stacks[6][4] = {{3, 2, 3, 3}, {5, 2, 3, 3}, {5, 2, 6, 3}, {3, 1, 6, 2}, {5, 2, 6, 4}, {3, 1, 6, 1}};
  int width = depths[1];
  for (int s = 0; s < 6; ++s) {
    const int k = stacks[s][0], stride = stacks[s][1], t = stacks[s][2], repeats = stacks[s][3], out = depths[s + 2];
    for (int r = 0; r < repeats; ++r) {
      const std::string p = "layers." + std::to_string(8 + s) + "." + std::to_string(r) + ".layers.";
      const int st = r == 0 ? stride : 1, mid = width * t;
      int y = b.relu(bn(b.conv(x, p + "0", mid, 1, 1, 0, false), p + "1"));
      y = b.relu(bn(b.conv(y, p + "3", mid, k, st, k / 2, false, mid), p + "4"));
      y = bn(b.conv(y, p + "6", out, 1, 1, 0, false), p + "7");
      x = r > 0 ? b.add(y, x) : y;  // torchvision: self.layers(input) + input (not on the first)
      width = out;
    }
  }
  x = b.relu(bn(b.conv(x, "layers.14", 1280, 1, 1, 0, false), "layers.15"));
  x = b.gap(x);
  x = b.flatten(x);
  x = b.dropout(x, 0.2);
  x = b.linear(x, "classifier.1", classes);
  b.set_init("classifier.1.weight", Init::uniform_fan_out_sigmoid);
  b.set_init("classifier.1.bias", Init::zeros);
  return {b.finish(x, classes), name, name};
}

}  // namespace cnnscale::nn
