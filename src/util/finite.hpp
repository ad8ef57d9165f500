// finite.hpp — scans for NaN and Inf in float32 and bfloat16 buffers (issue 28 item 2).
// Integer scans of the exponent bits: one read pass, no float compares (so -ffast-math
// could not fold them away), vectorised by the compiler (an unsigned max reduction).
// Measured on the mnist_cnn and resnet50 benchmarks: docs/performance.md.
#pragma once
#include <cstddef>
#include <cstdint>

namespace cnnscale {

// True when some element is a NaN (Inf does not count: ReLU and max-pool treat ±Inf as
// PyTorch does; only a NaN is what they drop).
bool has_nan_f32(const float* p, size_t n);
bool has_nan_bf16(const uint16_t* p, size_t n);
// True when every element is finite (neither NaN nor ±Inf).
bool all_finite_f32(const float* p, size_t n);

}  // namespace cnnscale
