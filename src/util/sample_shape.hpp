// sample_shape.hpp — the shape of one sample, C×H×W or a volume C×D×H×W: what the data
// pipeline yields (data/batch_source.hpp) and what a model takes (nn/model.hpp). It has no
// default size: the data set or the caller says what it is.
#pragma once
#include <cstdint>
#include <string>

namespace cnnscale {

struct SampleShape {
  int channels = 0, height = 0, width = 0;
  // A volume's depth D (≥ 1: the sample is C×D×H×W and the model's layers are 3-D); 0 for
  // an image. The bytes are PyTorch's contiguous order either way.
  int depth = 0;
  bool volume() const { return depth > 0; }
  // Elements of one spatial plane of one channel: H·W, or D·H·W for a volume (what a
  // per-channel mean and std run over).
  int64_t plane() const { return int64_t{depth > 0 ? depth : 1} * height * width; }
  int64_t numel() const { return int64_t{channels} * plane(); }
  // "3x32x32" or "4x128x128x128" (messages, run identity).
  std::string text() const {
    return std::to_string(channels) + "x" + (depth > 0 ? std::to_string(depth) + "x" : "") + std::to_string(height) +
           "x" + std::to_string(width);
  }
};

}  // namespace cnnscale
