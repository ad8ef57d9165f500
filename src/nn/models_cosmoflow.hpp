// models_cosmoflow.hpp — the built-in CosmoFlow (models_cosmoflow.cpp: its layout, names and options).
#pragma once
#include <string>

#include "nn/graph.hpp"
#include "util/sample_shape.hpp"

namespace cnnscale::nn {

// "cosmoflow" (width 32, kernel 2), "cosmoflow(W)" or "cosmoflow(W,K)": true and the two;
// false for another name; a UserError for a cosmoflow(...) that does not parse or is out of range.
bool parse_cosmoflow_name(const std::string& name, int* width, int* kernel);
// CosmoFlow for volumes of `in` (C×D×H×W, each side at least 32: UserError otherwise), ending
// in `targets` regression outputs in (−1.2, 1.2).
ModelGraph cosmoflow_model(const std::string& name, const SampleShape& in, int targets);

}  // namespace cnnscale::nn
