// staged_copier.cpp (stub) — see comm/staged_communicator.hpp: a build without CUDA has no
// device to stage from.
#include "comm/staged_communicator.hpp"
#include "util/error.hpp"

namespace cnnscale {

std::unique_ptr<DeviceCopier> make_cuda_copier(int /*device*/, int /*sharing*/) {
  fail("--device cuda: this cnnscale was built without CUDA (-DCNNSCALE_CUDA=OFF or no toolkit found); use --device "
       "cpu or rebuild with the CUDA toolkit");
}

}  // namespace cnnscale
