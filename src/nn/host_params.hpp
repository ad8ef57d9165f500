// host_params.hpp — host copies of a model's flat parameters, wherever they live
// (host memory for the oneDNN model, GPU memory for the CUDA model), for
// checkpoints, replica checks and broadcasts over MPI.
#pragma once
#include "nn/model.hpp"

namespace cnnscale {

void copy_params_to_host(Model& m, float* host);          // param_count() floats
void copy_params_from_host(Model& m, const float* host);  // synchronous

}  // namespace cnnscale
