// optimizer_kernels.hpp — launchers of the optimiser update kernels (optimizer_kernels.cu):
// one launch per contiguous trainable range [0, n) of the given pointers.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace cnnscale::cuda_opt {

// PyTorch SGD (dampening 0): d = g + wd·p; buf = first ? d : mom·buf + d;
// p -= lr·(nesterov ? d + mom·buf : buf); without momentum (buf == nullptr) p -= lr·d.
void sgd(float* p, const float* g, float* buf, size_t n, float lr, float mom, float wd, bool first, bool nesterov,
         cudaStream_t s);

// PyTorch AdamW: p *= decay; m = b1·m + (1-b1)·g; v = b2·v + (1-b2)·g·g;
// p -= step_size·m / (sqrt(v)·inv_sqrt_bc2 + eps).
void adamw(float* p, const float* g, float* m, float* v, size_t n, float decay, float b1, float one_minus_b1, float b2,
           float one_minus_b2, float step_size, float inv_sqrt_bc2, float eps, cudaStream_t s);

}  // namespace cnnscale::cuda_opt
