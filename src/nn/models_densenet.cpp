// models_densenet.cpp — torchvision's DenseNets (torchvision.models.densenet121/161/169/201),
// built in with their state_dict names, shapes, registration order and initialisation, so
// that a cnnscale checkpoint loads into torchvision.models.densenetNNN(num_classes=K) with
// load_state_dict(strict=True) (tests/nn/zoo_torchvision.sh).
//
// features: conv0 7×7/2 pad 3 (no bias), norm0, relu0, pool0 max 3×3/2 pad 1; denseblock1..4
// of (6,12,24,16) / (6,12,36,24) / (6,12,32,32) / (6,12,48,32) dense layers, each
// norm1 → relu1 → conv1 1×1 (bn_size·growth = 4·k channels) → norm2 → relu2 → conv2 3×3 pad 1
// (k channels), reading the concatenation of the block's input and every earlier layer's
// output (torch.cat in that order; the first layer reads the block input itself); the
// block's output is that concatenation with the last layer's output too; transition1..3
// between blocks: norm, relu, conv 1×1 to half the channels, average pool 2×2/2; norm5;
// then relu, global average pool, classifier (Linear). drop_rate 0 (torchvision's
// default: no dropout), memory_efficient off (the same numbers; checkpointing is a memory
// trade torch makes, not part of the network). Init as torchvision's __init__: convs
// kaiming_normal_() (fan_in, gain √2), batch norms 1/0, classifier weight as nn.Linear's
// default and bias 0.
#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {

bool is_torchvision_densenet(const std::string& name) {
  return name == "densenet121" || name == "densenet161" || name == "densenet169" || name == "densenet201";
}

ModelGraph torchvision_densenet(const std::string& name, const SampleShape& in, int classes) {
  struct Arch {
    const char* name;
    int growth, init_features, blocks[4];
  };
  static const Arch archs[] = {{"densenet121", 32, 64, {6, 12, 24, 16}},
                               {"densenet161", 48, 96, {6, 12, 36, 24}},
                               {"densenet169", 32, 64, {6, 12, 32, 32}},
                               {"densenet201", 32, 64, {6, 12, 48, 32}}};
  const Arch* a = nullptr;
  for (const auto& c : archs)
    if (name == c.name) a = &c;
  if (!a) internal_error("torchvision_densenet asked for ", name);
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stem and transitions halve the size five times), got ", in.height,
         "x", in.width);
  const int bn_size = 4;
  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_normal_fan_in);
  int x = b.conv(b.input(), "features.conv0", a->init_features, 7, 2, 3, false);
  x = b.relu(b.bn(x, "features.norm0"));
  x = b.maxpool(x, 3, 2, 1);
  int features = a->init_features;
  for (int s = 0; s < 4; ++s) {
    const std::string blk = "features.denseblock" + std::to_string(s + 1) + ".denselayer";
    std::vector<int> parts = {x};
    for (int l = 0; l < a->blocks[s]; ++l) {
      const std::string p = blk + std::to_string(l + 1);
      int y = parts.size() == 1 ? parts[0] : b.concat(parts);
      y = b.relu(b.bn(y, p + ".norm1"));
      y = b.conv(y, p + ".conv1", bn_size * a->growth, 1, 1, 0, false);
      y = b.relu(b.bn(y, p + ".norm2"));
      y = b.conv(y, p + ".conv2", a->growth, 3, 1, 1, false);
      parts.push_back(y);
    }
    x = b.concat(parts);
    features += a->blocks[s] * a->growth;
    if (s < 3) {
      const std::string t = "features.transition" + std::to_string(s + 1);
      x = b.relu(b.bn(x, t + ".norm"));
      x = b.conv(x, t + ".conv", features / 2, 1, 1, 0, false);
      x = b.avgpool(x, 2, 2);
      features /= 2;
    }
  }
  x = b.relu(b.bn(x, "features.norm5"));
  x = b.gap(x);
  x = b.flatten(x);
  x = b.linear(x, "classifier", classes);
  b.set_init("classifier.bias", Init::zeros);
  return {b.finish(x, classes), name, name};
}

}  // namespace cnnscale::nn
