// sample_shape.hpp — the shape of one sample, C×H×W: what the data pipeline yields
// (data/batch_source.hpp) and what a model takes (nn/model.hpp). It has no default
// size: the data set or the caller says what it is.
#pragma once
#include <cstdint>

namespace cnnscale {

struct SampleShape {
  int channels = 0, height = 0, width = 0;
  int64_t numel() const { return int64_t{channels} * height * width; }
};

}  // namespace cnnscale
