// host_params.cpp — see host_params.hpp.
#include "nn/host_params.hpp"

#include <algorithm>

#ifdef CNNSCALE_HAVE_CUDA
#include "nn/cuda_model.hpp"
#endif

namespace cnnscale {

void copy_params_to_host(Model& m, float* host) {
#ifdef CNNSCALE_HAVE_CUDA
  if (m.on_device()) return static_cast<DeviceModel&>(m).download_params(host);
#endif
  std::copy(m.param_data(), m.param_data() + m.param_count(), host);
}

void copy_params_from_host(Model& m, const float* host) {
#ifdef CNNSCALE_HAVE_CUDA
  if (m.on_device()) return static_cast<DeviceModel&>(m).upload_params(host);
#endif
  std::copy(host, host + m.param_count(), m.param_data());
}

}  // namespace cnnscale
