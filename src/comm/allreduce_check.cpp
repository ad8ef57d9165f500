// allreduce_check.cpp — see allreduce_check.hpp.
#include "comm/allreduce_check.hpp"

#include "util/bf16.hpp"

namespace cnnscale {

float pattern_value(size_t i, int rank, DType t) {
  if (t == DType::bf16) return static_cast<float>((i + static_cast<size_t>(rank)) % 2);
  return static_cast<float>((i * 7 + static_cast<size_t>(rank)) % 16);
}

float expected_sum(size_t i, int world, DType t) {
  float s = 0;
  for (int r = 0; r < world; ++r) s += pattern_value(i, r, t);
  return s;
}

void fill_pattern(void* host, size_t count, DType t, int rank) {
  if (t == DType::f32) {
    auto* p = static_cast<float*>(host);
    for (size_t i = 0; i < count; ++i) p[i] = pattern_value(i, rank, t);
  } else {
    auto* p = static_cast<uint16_t*>(host);
    for (size_t i = 0; i < count; ++i) p[i] = float_to_bf16(pattern_value(i, rank, t));
  }
}

size_t count_wrong(const void* host, size_t count, DType t, int world) {
  size_t wrong = 0;
  if (t == DType::f32) {
    auto* p = static_cast<const float*>(host);
    for (size_t i = 0; i < count; ++i) wrong += p[i] != expected_sum(i, world, t);
  } else {
    auto* p = static_cast<const uint16_t*>(host);
    for (size_t i = 0; i < count; ++i) wrong += bf16_to_float(p[i]) != expected_sum(i, world, t);
  }
  return wrong;
}

}  // namespace cnnscale
