// models_convnext.cpp — torchvision's ConvNeXt (torchvision.models.convnext_tiny / small / base /
// large), built in with its state_dict names, shapes and initialisation, so that a cnnscale
// checkpoint loads into torchvision.models.convnext_tiny(num_classes=K) with
// load_state_dict(strict=True) (tests/nn/zoo_torchvision.sh).
//
// features.0: 4×4/4 conv with bias (.0) + LayerNorm2d (.1, eps 1e-6); four stages
// features.1/3/5/7 of CNBlocks features.S.J — block.0 depthwise 7×7 (pad 3, bias), block.2
// LayerNorm over the channels (eps 1e-6), block.3 Linear(C, 4C) and block.5 Linear(4C, C) at
// every position (1×1 convolutions whose weights have nn.Linear's shape), GELU between them,
// then `layer_scale` (C×1×1, 1e-6) times the branch, StochasticDepth(p · b / (blocks − 1),
// "row") (b the block's index over all stages; p 0.1 tiny, 0.4 small, 0.5 base/large), plus
// the input; downsampling features.2/4/6: LayerNorm2d (.0) + 2×2/2 conv with bias (.1). Then
// global average pool, classifier.0 LayerNorm2d, flatten, classifier.2 Linear. Init: conv and
// linear weights trunc_normal_(std 0.02) (its ±2 cut is 100σ out: N(0, 0.02²)), biases 0,
// layer norms 1/0. torchvision registers each block's layer_scale before the block's layers;
// here it comes after them (names, not order, are what load_state_dict matches).
#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

struct Variant {
  const char* name;
  int dims[4], depths[4];
  double sd_prob;
};
constexpr Variant kVariants[] = {{"convnext_tiny", {96, 192, 384, 768}, {3, 3, 9, 3}, 0.1},
                                 {"convnext_small", {96, 192, 384, 768}, {3, 3, 27, 3}, 0.4},
                                 {"convnext_base", {128, 256, 512, 1024}, {3, 3, 27, 3}, 0.5},
                                 {"convnext_large", {192, 384, 768, 1536}, {3, 3, 27, 3}, 0.5}};

const Variant* find_variant(const std::string& name) {
  for (const Variant& v : kVariants)
    if (name == v.name) return &v;
  return nullptr;
}

}  // namespace

bool is_torchvision_convnext(const std::string& name) { return find_variant(name) != nullptr; }

ModelGraph torchvision_convnext(const std::string& name, const SampleShape& in, int classes) {
  const Variant* v = find_variant(name);
  if (!v) internal_error("torchvision_convnext: unknown variant");
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stem and downsamplings divide the size by 32), got ",
         in.height, "x", in.width);
  const double eps = 1e-6, layer_scale = 1e-6;
  GraphBuilder b(in);
  b.set_conv_init(Init::normal_0_02);
  int x = b.conv(b.input(), "features.0.0", v->dims[0], 4, 4, 0, true);
  x = b.layernorm2d(x, "features.0.1", eps);
  const int total = v->depths[0] + v->depths[1] + v->depths[2] + v->depths[3];
  int block_id = 0, f = 1;
  for (int s = 0; s < 4; ++s, ++f) {
    const int dim = v->dims[s];
    for (int j = 0; j < v->depths[s]; ++j, ++block_id) {
      const std::string p = "features." + std::to_string(f) + "." + std::to_string(j) + ".";
      int y = b.conv(x, p + "block.0", dim, 7, 1, 3, true, dim);
      y = b.layernorm2d(y, p + "block.2", eps);
      y = b.act(b.pointwise_linear(y, p + "block.3", 4 * dim), Act::gelu);
      y = b.pointwise_linear(y, p + "block.5", dim);
      y = b.layer_scale(y, p + "layer_scale", layer_scale);
      x = b.add(b.stochastic_depth(y, v->sd_prob * block_id / (total - 1.0)), x);
    }
    if (s < 3) {  // downsampling
      ++f;
      const std::string p = "features." + std::to_string(f) + ".";
      x = b.conv(b.layernorm2d(x, p + "0", eps), p + "1", v->dims[s + 1], 2, 2, 0, true);
    }
  }
  x = b.layernorm2d(b.gap(x), "classifier.0", eps);
  x = b.linear(b.flatten(x), "classifier.2", classes);
  b.set_init("classifier.2.weight", Init::normal_0_02);
  Graph g = b.finish(x, classes);
  for (auto& p : g.params)  // every conv and linear bias starts at 0
    if (p.init == Init::fan_in_bias) p.init = Init::zeros;
  return {std::move(g), name, name};
}

}  // namespace cnnscale::nn
