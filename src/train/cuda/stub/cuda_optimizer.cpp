// cuda_optimizer.cpp (stub) — make_cuda_optimizer in a build without CUDA: there is no
// device model to update either, so reaching this is a UserError.
#include "train/cuda_optimizer.hpp"

#include "util/error.hpp"

namespace cnnscale {

std::unique_ptr<Optimizer> make_cuda_optimizer(const OptimizerOptions& /*o*/, const std::vector<ParamInfo>& /*params*/,
                                               size_t /*param_count*/, void* /*stream*/) {
  fail("the CUDA optimizer is not available: this cnnscale was built without CUDA (-DCNNSCALE_CUDA=OFF or no "
       "toolkit found)");
}

}  // namespace cnnscale
