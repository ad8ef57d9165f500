// communicator.cpp — the default Communicator::broadcast_ranges (host buffers): the
// ranges packed into one message.
#include "comm/communicator.hpp"

#include <algorithm>

namespace cnnscale {

void Communicator::broadcast_ranges(void* base, const std::vector<std::pair<size_t, size_t>>& float_ranges,
                                    int root) {
  size_t floats = 0;
  for (const auto& [b, e] : float_ranges) floats += e - b;
  if (floats == 0) return;
  float* p = static_cast<float*>(base);
  std::vector<float>& packed = ranges_scratch_;  // sized once; a step allocates nothing
  packed.resize(floats);
  if (rank() == root) {
    float* s = packed.data();
    for (const auto& [b, e] : float_ranges) s = std::copy(p + b, p + e, s);
  }
  broadcast(packed.data(), floats * sizeof(float), root);
  if (rank() != root) {
    const float* r = packed.data();
    for (const auto& [b, e] : float_ranges) {
      std::copy_n(r, e - b, p + b);
      r += e - b;
    }
  }
}

}  // namespace cnnscale
