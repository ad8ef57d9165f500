// test_nn_spec.cpp — the one-line model spec: the documented grammar is accepted
// (shapes, names, canonical text), mistakes are rejected with their position.
#include <gtest/gtest.h>

#include "nn/graph.hpp"
#include "nn/model.hpp"
#include "nn/spec.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {

// Column (0-based, in the spec) of the first caret of an error message, or -1.
int caret_column(const std::string& msg) {
  const size_t c = msg.find('^');
  if (c == std::string::npos) return -1;
  const size_t line = msg.rfind('\n', c);
  return static_cast<int>(c - (line + 1)) - 2;  // the spec is indented by two spaces
}

std::string error_of(const std::string& spec, SampleShape s = {1, 28, 28}, int classes = 10) {
  try {
    make_model(spec, s, classes);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Spec, AcceptsTheDocumentedExample) {
  const std::string text =
      "conv(32,3) relu conv(64,3) relu maxpool(2) dropout(0.25) flatten linear(128) relu dropout(0.5) linear(10)";
  auto m = make_model(text, {1, 28, 28}, 10);
  EXPECT_EQ(m->param_count(), 1199882u);
  EXPECT_EQ(m->spec(), text);
  std::vector<std::string> names;
  for (const auto& p : m->params()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "7.weight", "7.bias",
                                             "10.weight", "10.bias"}));
  EXPECT_EQ(m->params()[4].shape, (std::vector<int64_t>{128, 9216}));
}

TEST(Spec, FullGrammar) {
  auto layers = nn::parse_spec("  conv(8, 3, 2, 1)  bn relu avgpool(2) maxpool(3,1) res(conv(8,3,1,1) bn) gap flatten "
                               "dropout(0.1) linear(4)");
  ASSERT_EQ(layers.size(), 10u);
  EXPECT_EQ(layers[0].stride, 2);
  EXPECT_EQ(layers[0].pad, 1);
  EXPECT_EQ(layers[0].pos, 2u);
  EXPECT_EQ(layers[3].stride, 2);  // pool stride defaults to the kernel
  EXPECT_EQ(layers[4].stride, 1);
  EXPECT_EQ(layers[5].body.size(), 2u);
  EXPECT_EQ(nn::format_spec(layers),
            "conv(8,3,2,1) bn relu avgpool(2) maxpool(3,1) res(conv(8,3,1,1) bn) gap flatten dropout(0.1) linear(4)");
  auto m = make_model(nn::format_spec(layers), {3, 16, 16}, 4);
  // 16 -conv s2 p1-> 8 -avgpool2-> 4 -maxpool(3,1)-> 2 ; res keeps 8x2x2 ; gap -> 8
  EXPECT_EQ(m->params()[0].name, "0.weight");
  EXPECT_EQ(m->params()[2].name, "1.weight");  // bn
  bool res_conv = false;
  for (const auto& p : m->params()) res_conv |= p.name == "5.0.weight";
  EXPECT_TRUE(res_conv);
  EXPECT_EQ(m->params().back().shape, (std::vector<int64_t>{4}));
}

// Grouped and depthwise convolutions: conv(out, k, stride, pad, groups) round-trips, the
// weight is out × in/groups × k × k (PyTorch's), and the FLOPs count in/groups inputs.
TEST(Spec, GroupedConvolution) {
  const auto layers = nn::parse_spec("conv(8,3) conv(8,3,1,1,8) conv(12,3,2,1,4) conv(6,1)");
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[1].groups, 8);
  EXPECT_EQ(layers[2].groups, 4);
  EXPECT_EQ(nn::format_spec(layers), "conv(8,3) conv(8,3,1,1,8) conv(12,3,2,1,4) conv(6,1)");
  const auto mg = nn::build_model_graph(nn::format_spec(layers) + " gap flatten linear(4)", {3, 13, 9}, 4);
  const auto& P = mg.graph.params;
  auto shape_of = [&](const std::string& name) {
    for (const auto& p : P)
      if (p.info.name == name) return p.info.shape;
    return std::vector<int64_t>{};
  };
  EXPECT_EQ(shape_of("1.weight"), (std::vector<int64_t>{8, 1, 3, 3}));
  EXPECT_EQ(shape_of("2.weight"), (std::vector<int64_t>{12, 2, 3, 3}));
  EXPECT_EQ(mg.graph.nodes[1].groups, 8);
}

// The activations round-trip, build Op::act nodes of their kind, and keep the shape.
TEST(Spec, Activations) {
  const std::string spec = "conv(4,3) relu6 sigmoid silu hardswish gelu hardsigmoid flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  const auto mg = nn::build_model_graph(spec, {1, 6, 6}, 3);
  std::string acts;
  for (const auto& n : mg.graph.nodes)
    if (n.op == nn::Op::act) acts += std::string(nn::act_name(n.act)) + " ";
  EXPECT_EQ(acts, "relu6 sigmoid silu hardswish gelu hardsigmoid ");
  EXPECT_NE(error_of("conv(4,3) silu(2) flatten linear(10)").find("takes no arguments"), std::string::npos);
}

// deconv(out, k[, stride[, pad]]): PyTorch's ConvTranspose2d output size and weight shape
// (in × out × k × k); the spec round-trips.
TEST(Spec, Deconv) {
  const std::string spec = "conv(4,3) deconv(6,2,2) deconv(3,3,2,1) deconv(2,3) flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  const auto mg = nn::build_model_graph(spec, {1, 7, 9}, 3);
  const auto& n1 = mg.graph.nodes[1];
  EXPECT_EQ(n1.op, nn::Op::deconv);
  EXPECT_EQ(n1.out.h, 10);  // (5 − 1)·2 + 2
  EXPECT_EQ(n1.out.w, 14);  // (7 − 1)·2 + 2
  EXPECT_EQ(mg.graph.nodes[2].out.h, 19);  // (10 − 1)·2 − 2 + 3
  EXPECT_EQ(mg.graph.nodes[3].out.h, 21);  // 19 + 2
  EXPECT_EQ(mg.graph.params[n1.params[0]].info.shape, (std::vector<int64_t>{4, 6, 2, 2}));
  EXPECT_NE(error_of("conv(4,3) flatten deconv(2,2) linear(3)").find("deconv needs a c×h×w input"), std::string::npos);
}

// upsample(s) (nearest), bilinear(s[, align_corners]): the size times s, the mode, round trip.
TEST(Spec, Upsample) {
  const std::string spec = "conv(4,3) upsample(2) bilinear(3) bilinear(2,1) flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  EXPECT_EQ(nn::format_spec(nn::parse_spec("conv(4,3) bilinear(2,0) flatten linear(3)")),
            "conv(4,3) bilinear(2) flatten linear(3)");
  const auto mg = nn::build_model_graph(spec, {1, 7, 9}, 3);
  EXPECT_EQ(mg.graph.nodes[1].resample, nn::Resample::nearest);
  EXPECT_EQ(mg.graph.nodes[2].resample, nn::Resample::bilinear);
  EXPECT_EQ(mg.graph.nodes[3].resample, nn::Resample::bilinear_align_corners);
  EXPECT_EQ(mg.graph.nodes[3].out.h, 5 * 2 * 3 * 2);
  EXPECT_EQ(mg.graph.nodes[3].out.w, 7 * 2 * 3 * 2);
  EXPECT_NE(error_of("conv(4,3) bilinear(2,2) flatten linear(10)").find("align_corners must be 0 or 1"),
            std::string::npos);
}

// leaky_relu[(slope)]: PyTorch's default slope 0.01 unless given; the spec round-trips with
// the slope written only where it is not the default.
TEST(Spec, LeakyRelu) {
  const std::string spec = "conv(4,3) leaky_relu(0.3) conv(4,1) leaky_relu flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  EXPECT_EQ(nn::format_spec(nn::parse_spec("conv(4,3) leaky_relu(0.01) flatten linear(3)")),
            "conv(4,3) leaky_relu flatten linear(3)");
  const auto mg = nn::build_model_graph(spec, {1, 6, 6}, 3);
  std::vector<float> slopes;
  for (const auto& n : mg.graph.nodes)
    if (n.op == nn::Op::act && n.act == nn::Act::leaky_relu) slopes.push_back(n.slope);
  EXPECT_EQ(slopes, (std::vector<float>{0.3f, 0.01f}));
  EXPECT_NE(error_of("conv(4,3) leaky_relu(1,2) flatten linear(10)").find("leaky_relu[(negative slope)]"),
            std::string::npos);
}

// stochastic_depth(p): one Op::stochastic_depth node with its p, the shape kept, round-trips;
// p outside [0, 1] and a flat input are errors.
TEST(Spec, StochasticDepth) {
  const std::string spec = "conv(4,3) res(conv(4,3,1,1) stochastic_depth(0.25)) flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  const auto mg = nn::build_model_graph(spec, {1, 6, 6}, 3);
  ASSERT_EQ(mg.graph.nodes[2].op, nn::Op::stochastic_depth);
  EXPECT_EQ(mg.graph.nodes[2].p, 0.25);
  EXPECT_EQ(mg.graph.nodes[2].out.c, 4);
  EXPECT_NE(error_of("conv(4,3) stochastic_depth(1.5) flatten linear(3)").find("[0, 1]"), std::string::npos);
  EXPECT_NE(error_of("conv(4,3) stochastic_depth flatten linear(3)").find("stochastic_depth(p)"), std::string::npos);
  EXPECT_NE(error_of("flatten stochastic_depth(0.1) linear(3)").find("c×h×w"), std::string::npos);
}

// layernorm / layerscale(v): ConvNeXt's LayerNorm2d (eps 1e-5 here, PyTorch's default) and
// layer scale, with their parameter names, round-tripping.
TEST(Spec, LayerNormAndLayerScale) {
  const std::string spec = "conv(4,3) layernorm layerscale(0.5) flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  const auto mg = nn::build_model_graph(spec, {1, 6, 6}, 3);
  std::string names;
  for (const auto& p : mg.graph.params) names += p.info.name + " ";
  EXPECT_EQ(names, "0.weight 0.bias 1.weight 1.bias 2.layer_scale 4.weight 4.bias ");
  EXPECT_EQ(mg.graph.nodes[1].op, nn::Op::layernorm);
  EXPECT_EQ(mg.graph.nodes[1].eps, 1e-5);
  EXPECT_EQ(mg.graph.params[4].info.shape, (std::vector<int64_t>{4, 1, 1}));
  EXPECT_NE(error_of("flatten layernorm linear(3)").find("c×h×w"), std::string::npos);
  EXPECT_NE(error_of("conv(4,3) layerscale flatten linear(3)").find("layerscale(initial value)"), std::string::npos);
}

// slice / shuffle / adaptivepool: ShuffleNetV2's channel_slice and channel_shuffle, VGG's
// adaptive average pool; shapes, round trip, and the errors.
TEST(Spec, SliceShuffleAdaptivePool) {
  const std::string spec = "conv(8,3) slice(2,6) shuffle(2) adaptivepool(7,5) flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  const auto mg = nn::build_model_graph(spec, {1, 6, 6}, 3);
  EXPECT_EQ(mg.graph.nodes[1].out.c, 4);
  EXPECT_EQ(mg.graph.nodes[2].groups, 2);
  EXPECT_EQ(mg.graph.nodes[3].out.h, 7);
  EXPECT_EQ(mg.graph.nodes[3].out.w, 5);
  EXPECT_NE(error_of("conv(8,3) slice(6,10) flatten linear(3)").find("not inside"), std::string::npos);
  EXPECT_NE(error_of("conv(8,3) shuffle(3) flatten linear(3)").find("do not divide"), std::string::npos);
}

// se(squeeze): torchvision's SqueezeExcitation — gap, fc1 (1×1 conv), relu, fc2, sigmoid,
// the scale — with its parameter names under the layer's index.
TEST(Spec, SqueezeExcitation) {
  const std::string spec = "conv(8,3) se(2) flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  const auto mg = nn::build_model_graph(spec, {1, 6, 6}, 3);
  std::string names;
  for (const auto& p : mg.graph.params) names += p.info.name + " ";
  EXPECT_EQ(names, "0.weight 0.bias 1.fc1.weight 1.fc1.bias 1.fc2.weight 1.fc2.bias 3.weight 3.bias ");
  std::string ops;
  for (const auto& n : mg.graph.nodes) ops += std::string(nn::op_name(n.op)) + " ";
  EXPECT_EQ(ops, "conv avgpool conv relu conv act mul flatten linear ");
  EXPECT_NE(error_of("flatten se(2) linear(10)").find("c×h×w"), std::string::npos);
}

// cat(branch | branch | ...): torch.cat of the branches over one input along channels, an
// empty branch being the input; names K.b.j; canonical text round-trips.
TEST(Spec, Concat) {
  const std::string spec = "conv(8,3) cat(conv(4,1) relu | conv(6,3,1,1) | ) flatten linear(3)";
  EXPECT_EQ(nn::format_spec(nn::parse_spec(spec)), spec);
  EXPECT_EQ(nn::format_spec(nn::parse_spec("conv(8,3) cat(|relu|conv(2,1))")), "conv(8,3) cat(| relu | conv(2,1))");
  const auto mg = nn::build_model_graph(spec, {1, 6, 6}, 3);
  std::string names;
  for (const auto& p : mg.graph.params) names += p.info.name + " ";
  EXPECT_EQ(names, "0.weight 0.bias 1.0.0.weight 1.0.0.bias 1.1.0.weight 1.1.0.bias 3.weight 3.bias ");
  std::string ops;
  for (const auto& n : mg.graph.nodes) ops += std::string(nn::op_name(n.op)) + " ";
  EXPECT_EQ(ops, "conv conv relu conv concat flatten linear ");
  const nn::Node& cat = mg.graph.nodes[4];
  EXPECT_EQ(cat.inputs, (std::vector<int>{3, 4, 1}));  // relu, conv(6,...), the input of cat
  EXPECT_EQ(cat.out.c, 4 + 6 + 8);
  EXPECT_EQ(cat.out.h, 4);
  EXPECT_EQ(mg.graph.params[6].info.shape, (std::vector<int64_t>{3, 18 * 4 * 4}));
}

// maxpool(k, stride, pad, 1): PyTorch's ceil_mode output size (rounded up, the last window
// starting inside the input or its left padding); never the fused relu kernel.
TEST(Spec, CeilModeMaxPool) {
  EXPECT_EQ(nn::format_spec(nn::parse_spec("maxpool(3,2,0,1) maxpool(2,2,0,0) maxpool(3,3,0,1)")),
            "maxpool(3,2,0,1) maxpool(2) maxpool(3,3,0,1)");
  struct Case {
    int in, k, stride, pad, floor_out, ceil_out;  // torch.nn.MaxPool2d's, ceil_mode False / True
  };
  for (const Case c : {Case{16, 3, 2, 0, 7, 8}, Case{15, 3, 2, 0, 7, 7}, Case{5, 2, 2, 1, 3, 3}, Case{6, 2, 2, 1, 4, 4},
                       Case{7, 3, 2, 1, 4, 4}, Case{8, 3, 2, 1, 4, 5}, Case{31, 3, 2, 0, 15, 15},
                       Case{22, 3, 2, 0, 10, 11}}) {
    for (int ceil = 0; ceil < 2; ++ceil) {
      const std::string spec = "maxpool(" + std::to_string(c.k) + "," + std::to_string(c.stride) + "," +
                               std::to_string(c.pad) + "," + std::to_string(ceil) + ") flatten linear(3)";
      const auto mg = nn::build_model_graph(spec, {1, c.in, c.in}, 3);
      EXPECT_EQ(mg.graph.nodes[0].out.h, ceil ? c.ceil_out : c.floor_out) << spec << " on " << c.in;
      EXPECT_EQ(mg.graph.nodes[0].ceil_mode, ceil == 1);
    }
  }
  const auto mg = nn::build_model_graph("conv(4,3) relu maxpool(2,2,0,1) flatten linear(3)", {1, 9, 9}, 3);
  EXPECT_FALSE(mg.graph.nodes[2].relu_into_pool);
  EXPECT_EQ(mg.graph.nodes[2].out.h, 4);  // 7 → ceil(5/2)+1
}

TEST(Spec, PaddedPools) {
  auto layers = nn::parse_spec("conv(8,3) maxpool(3,2,1) avgpool(3, 1, 1) maxpool(2,2,0)");
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[1].pad, 1);
  EXPECT_EQ(layers[2].stride, 1);
  EXPECT_EQ(layers[2].pad, 1);
  EXPECT_EQ(nn::format_spec(layers), "conv(8,3) maxpool(3,2,1) avgpool(3,1,1) maxpool(2)");
  // 3×13×9 -conv3-> 11×7 -maxpool(3,2,1)-> 6×4 -avgpool(3,1,1)-> 6×4 -maxpool(2)-> 3×2
  const auto mg = nn::build_model_graph(nn::format_spec(layers) + " flatten linear(4)", {3, 13, 9}, 4);
  EXPECT_EQ(mg.graph.nodes[1].out.h, 6);
  EXPECT_EQ(mg.graph.nodes[1].out.w, 4);
  EXPECT_EQ(mg.graph.nodes[3].out.h, 3);
  EXPECT_EQ(mg.graph.nodes[3].out.w, 2);
}

TEST(Spec, GapOnNonSquareInput) {
  const auto mg = nn::build_model_graph("conv(6,3) gap flatten linear(3)", {2, 5, 9}, 3);
  EXPECT_EQ(mg.graph.nodes[1].kernel, 3);
  EXPECT_EQ(mg.graph.nodes[1].kernel_w, 7);
  EXPECT_EQ(mg.graph.nodes[1].out.h, 1);
  EXPECT_EQ(mg.graph.nodes[1].out.w, 1);
}

// The fused max-pool + relu-backward kernel only where it is valid: unpadded windows
// with kernel == stride.
TEST(Spec, PoolFusionOnlyUnpaddedKernelEqualsStride) {
  struct Case {
    const char* spec;
    bool fused;
  };
  for (const Case c : {Case{"conv(4,3) relu maxpool(2) flatten linear(3)", true},
                       Case{"conv(4,3) relu maxpool(2,2,1) flatten linear(3)", false},
                       Case{"conv(4,3) relu maxpool(3,2) flatten linear(3)", false},
                       Case{"conv(4,3) relu maxpool(3,2,1) flatten linear(3)", false}}) {
    const auto mg = nn::build_model_graph(c.spec, {1, 10, 10}, 3);
    EXPECT_EQ(mg.graph.nodes[2].relu_into_pool, c.fused) << c.spec;
  }
}

TEST(Spec, RejectsMistakesWithTheirPosition) {
  struct Bad {
    std::string spec;
    int column;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {"conv(32,3) relu conv(64,x) flatten linear(10)", 24, "not a number"},
      {"conv(32,3) relu convv(64,3) flatten linear(10)", 16, "unknown layer 'convv'"},
      {"conv(32) flatten linear(10)", 0, "conv(out, kernel"},
      {"conv(32,3) dropout(1.5) flatten linear(10)", 19, "[0, 1)"},
      {"conv(32,3) linear(10)", 11, "flatten before"},
      {"conv(32,3) relu flatten linear(7)", 24, "needs 10 per sample (its classes"},
      {"conv(32,3 relu", 10, "expected ',' or ')'"},
      {"conv(32,30) flatten linear(10)", 0, "larger than"},
      {"conv(8,3) res(conv(4,3,1,1)) flatten linear(10)", 10, "equal shapes"},
      {"conv(8,3) flatten linear(10) )", 29, "unexpected ')'"},
      {"conv(2.5,3) flatten linear(10)", 5, "integer"},
      {"relu(1) flatten linear(10)", 4, "takes no arguments"},
      {"", 0, "empty"},
      {"resnet51", 0, "built-in models"},
      {"conv(4,3) maxpool(3,2,2) flatten linear(10)", 10, "at most half"},
      {"conv(4,3) maxpool(3,2,1,2) flatten linear(10)", 24, "ceil_mode must be 0 or 1"},
      {"conv(4,3) maxpool(3,2,1,1,1) flatten linear(10)", 10, "maxpool(kernel[, stride[, pad[, ceil_mode 0|1]]])"},
      {"conv(4,3) avgpool(3,2,1,1) flatten linear(10)", 10, "avgpool(kernel[, stride[, pad]])"},
      {"conv(8,3) cat(conv(4,1)) flatten linear(10)", 10, "at least two branches"},
      {"conv(8,3) cat(| ) flatten linear(10)", 10, "more than one empty branch"},
      {"conv(8,3) cat(conv(4,1) | conv(4,3)) flatten linear(10)", 10, "one height and width"},
      {"conv(8,3) relu | conv(4,1)", 15, "'|' separates the branches of cat"},
      {"conv(8,3) cat(conv(4,1) | relu", 30, "missing ')' closing cat("},
      {"conv(8,3) cat flatten linear(10)", 10, "cat needs branches"},
      {"conv(8,3) conv(12,3,1,1,3) flatten linear(10)", 10, "groups 3 must divide both its input channels (8)"},
      {"conv(8,3,1,0,0) flatten linear(10)", 13, "groups"},
      {"conv(8,3,1,0,1,1) flatten linear(10)", 0, "conv(out, kernel[, stride[, pad[, groups]]])"},
  };
  for (const auto& b : bad) {
    const std::string msg = error_of(b.spec);
    ASSERT_FALSE(msg.empty()) << "accepted: " << b.spec;
    EXPECT_NE(msg.find(b.says), std::string::npos) << b.spec << "\n" << msg;
    EXPECT_EQ(caret_column(msg), b.column) << b.spec << "\n" << msg;
    EXPECT_NE(msg.find("column " + std::to_string(b.column + 1)), std::string::npos) << msg;
  }
}
