// dropout_mask.hpp — the dropout keep/drop decision as a pure function of
// (seed, step, layer index, global sample id, element index), so that a step's result
// does not depend on how the global batch is split across ranks.
// One 64-bit hash yields the 32-bit uniforms of two consecutive elements.
#pragma once
#include <cmath>
#include <cstdint>

#include "nn/rng.hpp"

namespace cnnscale::nn {

// Per-sample key: everything but the element index.
CNNSCALE_HD inline uint64_t dropout_sample_key(uint64_t seed, int64_t step, int layer, int64_t sample_id) {
  uint64_t h = hash_combine(mix64(seed ^ 0x64726F706F7574ull), static_cast<uint64_t>(step));
  h = hash_combine(h, static_cast<uint64_t>(layer));
  return hash_combine(h, static_cast<uint64_t>(sample_id));
}

// Threshold t such that an element is dropped when its 32-bit uniform u < t, i.e.
// with probability round(p * 2^32) / 2^32 (exact for p = 0.25, 0.5, ...).
inline uint64_t dropout_threshold(double p) { return static_cast<uint64_t>(std::llround(p * 4294967296.0)); }

// 32-bit uniform of element `index` of the sample with key `key`.
CNNSCALE_HD inline uint32_t dropout_uniform(uint64_t key, int64_t index) {
  const uint64_t h = mix64(key + kGolden * static_cast<uint64_t>((index >> 1) + 1));
  return (index & 1) ? static_cast<uint32_t>(h) : static_cast<uint32_t>(h >> 32);
}

CNNSCALE_HD inline bool dropout_keep(uint64_t key, int64_t index, uint64_t threshold) {
  return dropout_uniform(key, index) >= threshold;
}

}  // namespace cnnscale::nn
