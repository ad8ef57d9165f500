// models_vgg.cpp — torchvision's VGG (torchvision.models.vgg11 … vgg19 and their _bn variants),
// built in with its state_dict names, shapes and initialisation, so that a cnnscale checkpoint
// loads into torchvision.models.vgg16_bn(num_classes=K) with load_state_dict(strict=True)
// (tests/nn/zoo_torchvision.sh).
//
// features: torchvision's cfgs A (11), B (13), D (16), E (19): each number a 3×3 conv (pad 1,
// with bias) [+ BatchNorm2d] + ReLU, each "M" a 2×2/2 max-pool, numbered as the nn.Sequential
// (3 entries per conv with bn, 2 without, 1 per pool); AdaptiveAvgPool2d((7, 7)) (the identity at
// 224², averaging or repeating at other sizes); classifier.0 Linear(512·7·7, 4096), ReLU, dropout
// 0.5, classifier.3 Linear(4096, 4096), ReLU, dropout 0.5, classifier.6 Linear(4096, K). Init:
// convs kaiming_normal_(fan_out, relu) with bias 0, bn 1/0, linears N(0, 0.01²) with bias 0.
#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

constexpr int M = 0;  // max-pool
struct Cfg {
  const char* depth;
  int layers[24];  // conv widths and M, terminated by -1
};
constexpr Cfg kCfgs[] = {
    {"11", {64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M, -1}},
    {"13", {64, 64, M, 128, 128, M, 256, 256, M, 512, 512, M, 512, 512, M, -1}},
    {"16", {64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M, -1}},
    {"19", {64, 64, M, 128, 128, M, 256, 256, 256, 256, M, 512, 512, 512, 512, M, 512, 512, 512, 512, M, -1}}};

const Cfg* find_cfg(const std::string& name, bool* bn) {
  if (name.rfind("vgg", 0) != 0) return nullptr;
  std::string rest = name.substr(3);
  *bn = rest.size() > 3 && rest.compare(rest.size() - 3, 3, "_bn") == 0;
  if (*bn) rest.resize(rest.size() - 3);
  for (const Cfg& c : kCfgs)
    if (rest == c.depth) return &c;
  return nullptr;
}

}  // namespace

bool is_torchvision_vgg(const std::string& name) {
  bool bn = false;
  return find_cfg(name, &bn) != nullptr;
}

ModelGraph torchvision_vgg(const std::string& name, const SampleShape& in, int classes) {
  bool bn = false;
  const Cfg* cfg = find_cfg(name, &bn);
  if (!cfg) internal_error("torchvision_vgg: unknown variant");
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its five max-pools halve the size), got ", in.height, "x", in.width);
  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_normal_fan_out);
  int x = b.input(), f = 0;
  for (const int* v = cfg->layers; *v >= 0; ++v) {
    if (*v == M) {
      x = b.maxpool(x, 2, 2);
      ++f;
      continue;
    }
    const std::string conv = "features." + std::to_string(f);
    x = b.conv(x, conv, *v, 3, 1, 1, true);
    b.set_init(conv + ".bias", Init::zeros);
    if (bn) x = b.bn(x, "features." + std::to_string(f + 1));
    x = b.relu(x);
    f += bn ? 3 : 2;
  }
  x = b.flatten(b.adaptive_avgpool(x, 7, 7));
  x = b.dropout(b.relu(b.linear(x, "classifier.0", 4096)), 0.5);
  x = b.dropout(b.relu(b.linear(x, "classifier.3", 4096)), 0.5);
  x = b.linear(x, "classifier.6", classes);
  for (const char* l : {"classifier.0", "classifier.3", "classifier.6"}) {
    b.set_init(std::string(l) + ".weight", Init::normal_0_01);
    b.set_init(std::string(l) + ".bias", Init::zeros);
  }
  return {b.finish(x, classes), name, name};
}

}  // namespace cnnscale::nn
