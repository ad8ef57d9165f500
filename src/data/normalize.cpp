// normalize.cpp — see normalize.hpp.
#include "data/normalize.hpp"

namespace cnnscale {

Normalizer::Normalizer(SampleShape shape, const std::vector<double>& mean, const std::vector<double>& std)
    : shape_(shape), lut_(static_cast<size_t>(shape.channels) * 256) {
  for (int c = 0; c < shape.channels; ++c)
    for (int v = 0; v < 256; ++v)
      lut_[c * 256 + v] = static_cast<float>((v / 255.0 - mean[c]) / std[c]);
}

void Normalizer::apply(const uint8_t* src, float* dst) const {
  const int64_t plane = int64_t{shape_.height} * shape_.width;
  for (int c = 0; c < shape_.channels; ++c) {
    const float* t = lut_.data() + c * 256;
    const uint8_t* s = src + c * plane;
    float* d = dst + c * plane;
    for (int64_t k = 0; k < plane; ++k) d[k] = t[s[k]];
  }
}

}  // namespace cnnscale
