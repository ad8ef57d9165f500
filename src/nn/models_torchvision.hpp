// models_torchvision.hpp — torchvision's classification models built in, one file per
// family (models.cpp: the ResNets, ResNeXts and Wide ResNets; models_mobilenet.cpp:
// MobileNetV2; models_mobilenet_v3.cpp; models_efficientnet.cpp; models_convnext.cpp; models_shufflenet.cpp; models_vgg.cpp;
// models_densenet.cpp;
// models_squeezenet.cpp; models_regnet.cpp; models_mnasnet.cpp), each with
// torchvision's state_dict names, shapes, registration order and initialisation.
#pragma once
#include <string>

#include "util/sample_shape.hpp"
#include "nn/graph.hpp"

namespace cnnscale::nn {

ModelGraph torchvision_mobilenet_v2(const SampleShape& in, int classes);
bool is_torchvision_densenet(const std::string& name);  // densenet121/161/169/201
ModelGraph torchvision_densenet(const std::string& name, const SampleShape& in, int classes);
bool is_torchvision_regnet(const std::string& name);  // regnet_y_400mf ... regnet_x_32gf
ModelGraph torchvision_regnet(const std::string& name, const SampleShape& in, int classes);
bool is_torchvision_mnasnet(const std::string& name);  // mnasnet0_5, 0_75, 1_0, 1_3
ModelGraph torchvision_mnasnet(const std::string& name, const SampleShape& in, int classes);
bool is_torchvision_mobilenet_v3(const std::string& name);  // mobilenet_v3_large, mobilenet_v3_small
ModelGraph torchvision_mobilenet_v3(const std::string& name, const SampleShape& in, int classes);
bool is_torchvision_efficientnet(const std::string& name);  // efficientnet_b0 ... efficientnet_b7
ModelGraph torchvision_efficientnet(const std::string& name, const SampleShape& in, int classes);
bool is_torchvision_convnext(const std::string& name);  // convnext_tiny, _small, _base, _large
ModelGraph torchvision_convnext(const std::string& name, const SampleShape& in, int classes);
bool is_torchvision_shufflenet(const std::string& name);  // shufflenet_v2_x0_5, _x1_0, _x1_5, _x2_0
ModelGraph torchvision_shufflenet(const std::string& name, const SampleShape& in, int classes);
bool is_torchvision_vgg(const std::string& name);  // vgg11 … vgg19, vgg11_bn … vgg19_bn
ModelGraph torchvision_vgg(const std::string& name, const SampleShape& in, int classes);
// squeezenet1_0 / squeezenet1_1
ModelGraph torchvision_squeezenet(const std::string& name, const SampleShape& in, int classes);

}  // namespace cnnscale::nn
