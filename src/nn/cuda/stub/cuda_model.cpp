// cuda_model.cpp (stub) — make_cuda_model in a build without CUDA (-DCNNSCALE_CUDA=OFF
// or no toolkit found): nothing to build the GPU model with.
#include "nn/cuda_model.hpp"

#include "util/error.hpp"

namespace cnnscale {

std::unique_ptr<DeviceModel> make_cuda_model(const std::string& /*name_or_spec*/, const SampleShape& /*input*/,
                                             int /*classes*/, int device, const ModelOptions& /*options*/) {
  fail("the GPU model (CUDA device ", device,
       ") is not available: this cnnscale was built without CUDA "
       "(-DCNNSCALE_CUDA=OFF or no toolkit found); use the CPU model, or rebuild with the CUDA toolkit");
}

}  // namespace cnnscale
