// host_params.hpp — host copies of a model's flat parameters, wherever they live
// (host memory for the oneDNN model, GPU memory for the CUDA model), for
// checkpoints, replica checks and broadcasts over MPI: Model::copy_params_to_host /
// copy_params_from_host, as free functions.
#pragma once
#include "nn/model.hpp"

namespace cnnscale {

inline void copy_params_to_host(Model& m, float* host) { m.copy_params_to_host(host); }  // param_count() floats
inline void copy_params_from_host(Model& m, const float* host) { m.copy_params_from_host(host); }  // synchronous

}  // namespace cnnscale
