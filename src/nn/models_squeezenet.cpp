// models_squeezenet.cpp — torchvision's SqueezeNets (torchvision.models.squeezenet1_0 and
// squeezenet1_1), built in with their state_dict names, shapes, registration order and
// initialisation, so that a cnnscale checkpoint loads into torchvision.models.squeezenet1_1(
// num_classes=K) with load_state_dict(strict=True) (tests/nn/zoo_torchvision.sh).
//
// features: a stem conv (1_0: 96 7×7/2, 1_1: 64 3×3/2, with bias) + ReLU, max-pools 3×3/2
// with ceil_mode, and Fire modules (squeeze 1×1 + ReLU, then expand1x1 1×1 + ReLU and
// expand3x3 3×3 pad 1 + ReLU concatenated along channels), at torchvision's positions in
// features.N; classifier: dropout 0.5 (.0), final_conv 1×1 to the classes (.1), ReLU,
// global average pool. Init as torchvision's __init__: convs kaiming_uniform_() (a = 0),
// final_conv N(0, 0.01²), every bias 0.
#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {

ModelGraph torchvision_squeezenet(const std::string& name, const SampleShape& in, int classes) {
  const bool v10 = name == "squeezenet1_0";
  if (!v10 && name != "squeezenet1_1") internal_error("torchvision_squeezenet asked for ", name);
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stem and three max-pools shrink the size 16-fold), got ",
         in.height, "x", in.width);
  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_uniform_relu);
  std::vector<std::string> biases;
  auto conv = [&](int x, const std::string& n, int out, int k, int stride, int pad) {
    biases.push_back(n + ".bias");
    return b.conv(x, n, out, k, stride, pad, true);
  };
  auto fire = [&](int x, int f, int squeeze, int e1, int e3) {
    const std::string p = "features." + std::to_string(f);
    x = b.relu(conv(x, p + ".squeeze", squeeze, 1, 1, 0));
    const int y1 = b.relu(conv(x, p + ".expand1x1", e1, 1, 1, 0));
    const int y3 = b.relu(conv(x, p + ".expand3x3", e3, 3, 1, 1));
    return b.concat({y1, y3});
  };
  // features.1..12 after the stem conv (.0) and its ReLU: a squeeze width (each expand is
  // 4× it), 0 for a ceil-mode max-pool 3×3/2; the Fire modules are named by position.
  static const int v10_layers[] = {0, 16, 16, 32, 0, 32, 48, 48, 64, 0, 64};
  static const int v11_layers[] = {0, 16, 16, 0, 32, 32, 0, 48, 48, 64, 64};
  int x = b.relu(conv(b.input(), "features.0", v10 ? 96 : 64, v10 ? 7 : 3, 2, 0));
  int f = 2;
  for (int s : v10 ? v10_layers : v11_layers) {
    x = s == 0 ? b.maxpool(x, 3, 2, 0, true) : fire(x, f, s, 4 * s, 4 * s);
    ++f;
  }
  x = b.dropout(x, 0.5);
  x = b.relu(conv(x, "classifier.1", classes, 1, 1, 0));
  x = b.gap(x);
  x = b.flatten(x);
  b.set_init("classifier.1.weight", Init::normal_0_01);
  for (const auto& n : biases) b.set_init(n, Init::zeros);
  return {b.finish(x, classes), name, name};
}

}  // namespace cnnscale::nn
