// normalize.hpp — uint8 pixels → normalised floats, (x/255 - mean[c]) / std[c], through
// one 256-entry lookup table per channel. Runs in the reader thread.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch_source.hpp"

namespace cnnscale {

class Normalizer {
 public:
  Normalizer() = default;
  Normalizer(SampleShape shape, const std::vector<double>& mean, const std::vector<double>& std);
  // Converts one sample (shape.numel() bytes) into dst.
  void apply(const uint8_t* src, float* dst) const;

 private:
  SampleShape shape_;
  std::vector<float> lut_;  // channels × 256
};

}  // namespace cnnscale
