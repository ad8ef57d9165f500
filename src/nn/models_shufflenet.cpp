// models_shufflenet.cpp — torchvision's ShuffleNetV2 (torchvision.models.shufflenet_v2_x0_5 /
// x1_0 / x1_5 / x2_0), built in with its state_dict names, shapes and initialisation, so that
// a cnnscale checkpoint loads into torchvision.models.shufflenet_v2_x1_0(num_classes=K) with
// load_state_dict(strict=True) (tests/nn/zoo_torchvision.sh).
//
// conv1.0 3×3/2 conv (no bias) to 24, conv1.1 bn, ReLU, max-pool 3/2/1; stage2..4 of 4, 8, 4
// InvertedResidual units: the first of a stage (stride 2) concatenates branch1 (depthwise 3×3/2
// .0, bn .1, 1×1 .2, bn .3, ReLU) and branch2 (1×1 .0, bn .1, ReLU, depthwise 3×3/2 .3, bn .4,
// 1×1 .5, bn .6, ReLU) of the whole input, the others keep the first half of the channels and
// concatenate branch2 of the second half (x.chunk(2, dim=1)); each unit ends in
// channel_shuffle(out, 2). conv5.0 1×1 + conv5.1 bn + ReLU, mean over H×W, fc. No __init__
// of its own: PyTorch's defaults (kaiming_uniform(a=√5) weights, nn.Linear's bias), bn 1/0.
#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

struct Variant {
  const char* name;
  int channels[5];
};
constexpr Variant kVariants[] = {{"shufflenet_v2_x0_5", {24, 48, 96, 192, 1024}},
                                 {"shufflenet_v2_x1_0", {24, 116, 232, 464, 1024}},
                                 {"shufflenet_v2_x1_5", {24, 176, 352, 704, 1024}},
                                 {"shufflenet_v2_x2_0", {24, 244, 488, 976, 2048}}};

const Variant* find_variant(const std::string& name) {
  for (const Variant& v : kVariants)
    if (name == v.name) return &v;
  return nullptr;
}

}  // namespace

bool is_torchvision_shufflenet(const std::string& name) { return find_variant(name) != nullptr; }

ModelGraph torchvision_shufflenet(const std::string& name, const SampleShape& in, int classes) {
  const Variant* v = find_variant(name);
  if (!v) internal_error("torchvision_shufflenet: unknown variant");
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stages halve the size five times), got ", in.height, "x",
         in.width);
  GraphBuilder b(in);
  auto cbr = [&](int x, const std::string& conv, const std::string& bn, int out, int k, int stride, int groups,
                 bool relu) {
    x = b.bn(b.conv(x, conv, out, k, stride, k / 2, false, groups), bn);
    return relu ? b.relu(x) : x;
  };
  int x = cbr(b.input(), "conv1.0", "conv1.1", v->channels[0], 3, 2, 1, true);
  x = b.maxpool(x, 3, 2, 1);
  int inp = v->channels[0];
  static const int repeats[3] = {4, 8, 4};
  for (int s = 0; s < 3; ++s) {
    const int oup = v->channels[s + 1], half = oup / 2;
    for (int u = 0; u < repeats[s]; ++u) {
      const std::string p = "stage" + std::to_string(s + 2) + "." + std::to_string(u) + ".";
      const int stride = u == 0 ? 2 : 1;
      int left, right = stride == 1 ? b.channel_slice(x, 0, half) : x;
      if (stride > 1) {  // branch1 on the whole input
        left = cbr(x, p + "branch1.0", p + "branch1.1", inp, 3, 2, inp, false);
        left = cbr(left, p + "branch1.2", p + "branch1.3", half, 1, 1, 1, true);
      } else {
        left = right;  // x1 = the first half
        right = b.channel_slice(x, half, oup);
      }
      int y = cbr(right, p + "branch2.0", p + "branch2.1", half, 1, 1, 1, true);
      y = cbr(y, p + "branch2.3", p + "branch2.4", half, 3, stride, half, false);
      y = cbr(y, p + "branch2.5", p + "branch2.6", half, 1, 1, 1, true);
      x = b.channel_shuffle(b.concat({left, y}), 2);
      inp = oup;
    }
  }
  x = cbr(x, "conv5.0", "conv5.1", v->channels[4], 1, 1, 1, true);
  x = b.linear(b.flatten(b.gap(x)), "fc", classes);
  return {b.finish(x, classes), name, name};
}

}  // namespace cnnscale::nn
