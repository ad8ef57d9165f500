// init.cpp — PyTorch-default parameter initialisation from a seed: conv/linear weights
// kaiming_uniform_(a=√5) (bound = √3 · √(2/(1+a²)) / √fan_in = 1/√fan_in), biases
// uniform(±1/√fan_in), batch-norm weight 1, bias 0, running_var 1. Each parameter has
// its own splitmix64 stream keyed by (seed, name), so values do not depend on order.
#include <cmath>

#include "nn/graph.hpp"
#include "nn/rng.hpp"

namespace cnnscale::nn {

void init_param(const ParamDef& p, uint64_t seed, float* data) {
  const size_t n = p.info.numel;
  double bound = 0;
  switch (p.init) {
    case Init::ones:
      for (size_t i = 0; i < n; ++i) data[i] = 1.f;
      return;
    case Init::zeros:
      for (size_t i = 0; i < n; ++i) data[i] = 0.f;
      return;
    case Init::kaiming_uniform: {
      const double a = std::sqrt(5.0);
      const double gain = std::sqrt(2.0 / (1.0 + a * a));  // leaky_relu gain
      const double std_ = gain / std::sqrt(static_cast<double>(p.fan_in));
      bound = std::sqrt(3.0) * std_;
      break;
    }
    case Init::fan_in_bias:
      bound = p.fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(p.fan_in)) : 0.0;
      break;
  }
  SplitMix64 rng(hash_combine(mix64(seed), hash_string(p.info.name)));
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(rng.uniform(-bound, bound));
}

}  // namespace cnnscale::nn
