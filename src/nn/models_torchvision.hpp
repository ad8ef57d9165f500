// models_torchvision.hpp — torchvision's classification models built in, one file per
// family (models.cpp: the ResNets; models_mobilenet.cpp: MobileNetV2), each with
// torchvision's state_dict names, shapes, registration order and initialisation.
#pragma once
#include "util/sample_shape.hpp"
#include "nn/graph.hpp"

namespace cnnscale::nn {

ModelGraph torchvision_mobilenet_v2(const SampleShape& in, int classes);

}  // namespace cnnscale::nn
