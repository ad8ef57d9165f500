// models_regnet.cpp — torchvision's RegNets (torchvision.models.regnet_y_* and regnet_x_*, the
// 14 of torchvision 0.14), built in with their state_dict names, shapes, registration order
// and initialisation, so that a cnnscale checkpoint loads into torchvision.models.NAME(
// num_classes=K) with load_state_dict(strict=True) (tests/nn/zoo_torchvision.sh).
//
// stem: 3×3/2 conv to 32 (no bias) .0, bn .1, ReLU; trunk_output.block1..4 of
// ResBottleneckBlocks `blockS-j` (torchvision's names): proj (1×1 conv with the stage's
// stride 2 + bn, on the first block of a stage, where width or stride change), f.a (1×1
// conv + bn + ReLU), f.b (3×3 conv, stride on the first block, groups = width / group width,
// + bn + ReLU), f.se for RegNetY (SqueezeExcitation to round(0.25 · the block's input width),
// ReLU and sigmoid), f.c (1×1 conv + bn), then ReLU(proj(x) + f(x)) or ReLU(x + f(x));
// global average pool; fc. The bottleneck multiplier is 1 in every torchvision RegNet.
// The per-stage (depth, width, group width) tables are what torchvision's
// BlockParams.from_init_params computes (its log-space width quantisation and the
// width/group compatibility adjustment), read off the torchvision modules. Init as
// torchvision's __init__: convs N(0, 2/(k²·out)) (SE's too; SE's biases keep nn.Conv2d's
// default), batch norms 1/0, fc N(0, 0.01²) with bias 0.
#include <cmath>

#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

struct Stage {
  int depth, width, group_width;
};
struct Arch {
  const char* name;
  bool se;
  Stage stages[4];
};
const Arch kArchs[] = {
    {"regnet_y_400mf", true, {{1, 48, 8}, {3, 104, 8}, {6, 208, 8}, {6, 440, 8}}},
    {"regnet_y_800mf", true, {{1, 64, 16}, {3, 144, 16}, {8, 320, 16}, {2, 784, 16}}},
    {"regnet_y_1_6gf", true, {{2, 48, 24}, {6, 120, 24}, {17, 336, 24}, {2, 888, 24}}},
    {"regnet_y_3_2gf", true, {{2, 72, 24}, {5, 216, 24}, {13, 576, 24}, {1, 1512, 24}}},
    {"regnet_y_8gf", true, {{2, 224, 56}, {4, 448, 56}, {10, 896, 56}, {1, 2016, 56}}},
    {"regnet_y_16gf", true, {{2, 224, 112}, {4, 448, 112}, {11, 1232, 112}, {1, 3024, 112}}},
    {"regnet_y_32gf", true, {{2, 232, 232}, {5, 696, 232}, {12, 1392, 232}, {1, 3712, 232}}},
    {"regnet_x_400mf", false, {{1, 32, 16}, {2, 64, 16}, {7, 160, 16}, {12, 400, 16}}},
    {"regnet_x_800mf", false, {{1, 64, 16}, {3, 128, 16}, {7, 288, 16}, {5, 672, 16}}},
    {"regnet_x_1_6gf", false, {{2, 72, 24}, {4, 168, 24}, {10, 408, 24}, {2, 912, 24}}},
    {"regnet_x_3_2gf", false, {{2, 96, 48}, {6, 192, 48}, {15, 432, 48}, {2, 1008, 48}}},
    {"regnet_x_8gf", false, {{2, 80, 80}, {5, 240, 120}, {15, 720, 120}, {1, 1920, 120}}},
    {"regnet_x_16gf", false, {{2, 256, 128}, {6, 512, 128}, {13, 896, 128}, {1, 2048, 128}}},
    {"regnet_x_32gf", false, {{2, 336, 168}, {7, 672, 168}, {13, 1344, 168}, {1, 2520, 168}}},
};

const Arch* find(const std::string& name) {
  for (const auto& a : kArchs)
    if (name == a.name) return &a;
  return nullptr;
}

}  // namespace

bool is_torchvision_regnet(const std::string& name) { return find(name) != nullptr; }

ModelGraph torchvision_regnet(const std::string& name, const SampleShape& in, int classes) {
  const Arch* a = find(name);
  if (!a) internal_error("torchvision_regnet asked for ", name);
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stem and four stages halve the size five times), got ", in.height,
         "x", in.width);
  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_normal_fan_out);  // N(0, 2/(k²·out)): torchvision's explicit fan_out
  int x = b.relu(b.bn(b.conv(b.input(), "stem.0", 32, 3, 2, 1, false), "stem.1"));
  int width_in = 32;
  for (int s = 0; s < 4; ++s) {
    const Stage& st = a->stages[s];
    for (int j = 0; j < st.depth; ++j) {
      const std::string p = "trunk_output.block" + std::to_string(s + 1) + ".block" + std::to_string(s + 1) + "-" +
                            std::to_string(j) + ".";
      const int stride = j == 0 ? 2 : 1;
      int sc = x;
      if (width_in != st.width || stride != 1)  // registered first, as torchvision's
        sc = b.bn(b.conv(x, p + "proj.0", st.width, 1, stride, 0, false), p + "proj.1");
      int y = b.relu(b.bn(b.conv(x, p + "f.a.0", st.width, 1, 1, 0, false), p + "f.a.1"));
      y = b.conv(y, p + "f.b.0", st.width, 3, stride, 1, false, st.width / st.group_width);
      y = b.relu(b.bn(y, p + "f.b.1"));
      if (a->se) y = b.se(y, p + "f.se", static_cast<int>(std::lrint(0.25 * width_in)));  // Python's round()
      y = b.bn(b.conv(y, p + "f.c.0", st.width, 1, 1, 0, false), p + "f.c.1");
      x = b.relu(b.add(sc, y));
      width_in = st.width;
    }
  }
  x = b.gap(x);
  x = b.flatten(x);
  x = b.linear(x, "fc", classes);
  b.set_init("fc.weight", Init::normal_0_01);
  b.set_init("fc.bias", Init::zeros);
  return {b.finish(x, classes), name, name};
}

}  // namespace cnnscale::nn
