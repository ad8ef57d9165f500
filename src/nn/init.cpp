// init.cpp — PyTorch-default parameter initialisation from a seed: conv/linear weights
// kaiming_uniform_(a=√5) (bound = √3 · √(2/(1+a²)) / √fan_in = 1/√fan_in), biases
// uniform(±1/√fan_in), batch-norm weight 1, bias 0, running_var 1. Each parameter has
// its own splitmix64 stream keyed by (seed, name), so values do not depend on order.
// The torchvision ResNets' convs: kaiming_normal_(mode='fan_out', nonlinearity='relu'),
// N(0, σ²) with σ = √2/√fan_out, normal deviates by Box–Muller over the same stream
// (both of each pair used; the distribution is torch's, not its bits). torchvision's
// MobileNet classifier: N(0, 0.01²) (normal_0_01), its bias 0. DenseNet's convs:
// kaiming_normal_() (fan_in, gain √2); SqueezeNet's: kaiming_uniform_() (a = 0:
// bound √(6/fan_in)).
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
    case Init::constant:
      for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(p.value);
      return;
    case Init::given:
      for (size_t i = 0; i < n; ++i) data[i] = (*p.given)[i];
      return;
    case Init::kaiming_uniform: {
      const double a = std::sqrt(5.0);
      const double gain = std::sqrt(2.0 / (1.0 + a * a));  // leaky_relu gain
      const double std_ = gain / std::sqrt(static_cast<double>(p.fan_in));
      bound = std::sqrt(3.0) * std_;
      break;
    }
    case Init::kaiming_uniform_relu:
      bound = std::sqrt(6.0 / static_cast<double>(p.fan_in));
      break;
    case Init::uniform_fan_out_sigmoid:
      bound = std::sqrt(3.0 / static_cast<double>(p.fan_out));
      break;
    case Init::uniform_inv_sqrt_fan_out:
      bound = 1.0 / std::sqrt(static_cast<double>(p.fan_out));
      break;
    case Init::fan_in_bias:
      bound = p.fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(p.fan_in)) : 0.0;
      break;
    case Init::kaiming_normal_fan_out:
    case Init::kaiming_normal_fan_in:
    case Init::normal_0_01:
    case Init::normal_0_02: {
      const double sigma = p.init == Init::normal_0_01           ? 0.01
                           : p.init == Init::normal_0_02           ? 0.02
                           : p.init == Init::kaiming_normal_fan_in ? std::sqrt(2.0 / static_cast<double>(p.fan_in))
                                                                   : std::sqrt(2.0) / std::sqrt(static_cast<double>(p.fan_out));
      SplitMix64 rng(hash_combine(mix64(seed), hash_string(p.info.name)));
      const double two_pi = 6.283185307179586476925286766559;
      for (size_t i = 0; i < n; i += 2) {
        const double u1 = 1.0 - rng.uniform();  // (0, 1]: log(u1) is finite
        const double u2 = rng.uniform();
        const double r = sigma * std::sqrt(-2.0 * std::log(u1));
        data[i] = static_cast<float>(r * std::cos(two_pi * u2));
        if (i + 1 < n) data[i + 1] = static_cast<float>(r * std::sin(two_pi * u2));
      }
      return;
    }
  }
  SplitMix64 rng(hash_combine(mix64(seed), hash_string(p.info.name)));
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(rng.uniform(-bound, bound));
}

}  // namespace cnnscale::nn
