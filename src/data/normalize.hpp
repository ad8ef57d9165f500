// normalize.hpp — stored samples → normalised floats. uint8 pixels: (x/255 - mean[c]) / std[c],
// through one 256-entry lookup table per channel. int16 / float16 / float32 values (science
// data sets): (t(x) - mean[c]) / std[c] in float32, t = log1p with `prep --transform log1p`
// (CosmoFlow's counts), else identity — as torch computes `(x.log1p() - mean) / std` on a
// float32 tensor (int16 and float16 through a table per channel of all 65,536 values: the same
// float32 results). Runs in the reader thread.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch_source.hpp"
#include "data/sample_type.hpp"

namespace cnnscale {

class Normalizer {
 public:
  Normalizer() = default;
  Normalizer(SampleShape shape, const std::vector<double>& mean, const std::vector<double>& std,
             SampleType type = SampleType::u8, bool log1p = false);
  // Converts one sample (shape.numel() values of the type, as bytes) into dst.
  void apply(const uint8_t* src, float* dst) const;

 private:
  SampleShape shape_;
  SampleType type_ = SampleType::u8;
  bool log1p_ = false;
  std::vector<float> lut_;         // uint8: channels × 256; int16, float16: channels × 65536
  std::vector<float> mean_, std_;  // the others: per channel, float32
};

}  // namespace cnnscale
