// model_names.cpp — the built-in models' names (model.hpp: builtin_models(), builtin_model_list()),
// apart from models.cpp, which builds them: the spec parser names them in its errors without
// the model code (tests/fuzz/fuzz_model_spec.cpp compiles spec.cpp with this file alone).
#include <string>
#include <vector>

#include "nn/model.hpp"

namespace cnnscale {

const std::vector<std::string>& builtin_models() {
  static const std::vector<std::string> names = {
      "mnist_cnn",       "lenet5",           "resnet20",         "resnet18",        "resnet34",
      "resnet50",        "resnet101",        "resnet152",        "resnext50_32x4d", "resnext101_32x8d",
      "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2", "mobilenet_v2",    "densenet121",
      "densenet161",     "densenet169",      "densenet201",      "squeezenet1_0",   "squeezenet1_1",
      "regnet_y_400mf",  "regnet_y_800mf",   "regnet_y_1_6gf",   "regnet_y_3_2gf",  "regnet_y_8gf",
      "regnet_y_16gf",   "regnet_y_32gf",    "regnet_x_400mf",   "regnet_x_800mf",  "regnet_x_1_6gf",
      "regnet_x_3_2gf",  "regnet_x_8gf",     "regnet_x_16gf",    "regnet_x_32gf",   "mnasnet0_5",
      "mnasnet0_75",     "mnasnet1_0",       "mnasnet1_3",       "mobilenet_v3_large", "mobilenet_v3_small",
      "efficientnet_b0", "efficientnet_b1",  "efficientnet_b2",  "efficientnet_b3", "efficientnet_b4",
      "efficientnet_b5", "efficientnet_b6",  "efficientnet_b7",  "convnext_tiny",   "convnext_small",
      "convnext_base",   "convnext_large",   "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5",
      "shufflenet_v2_x2_0", "vgg11",          "vgg11_bn",         "vgg13",           "vgg13_bn",
      "vgg16",           "vgg16_bn",         "vgg19",            "vgg19_bn",        "unet",
      "cosmoflow"};
  return names;
}

std::string builtin_model_list(const std::string& sep) {
  std::string s;
  for (const auto& n : builtin_models()) s += (s.empty() ? "" : sep) + n;
  return s;
}

}  // namespace cnnscale
