// models_unet.hpp — the built-in U-Net (models_unet.cpp: its layout, names and options).
#pragma once
#include <string>

#include "nn/graph.hpp"
#include "util/sample_shape.hpp"

namespace cnnscale::nn {

// "unet" (depth 4, width 64) or "unet(D,W)": true and the two; false for another name; a
// UserError for a unet(...) that does not parse or is out of range.
bool parse_unet_name(const std::string& name, int* depth, int* width);
// The U-Net for inputs of `in` (H, W multiples of 2^D: UserError otherwise), ending in
// classes × H × W (a segmentation model).
ModelGraph unet_model(const std::string& name, const SampleShape& in, int classes);

}  // namespace cnnscale::nn
