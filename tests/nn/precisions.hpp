// precisions.hpp — the precisions a CPU model test can run on this processor: fp32
// always, bf16 when oneDNN has native bf16 here (nn::require_bf16 does not throw).
#pragma once
#include <vector>

#include "nn/exec.hpp"
#include "nn/model.hpp"

namespace cnnscale::test {

inline std::vector<Precision> precisions_here() {
  std::vector<Precision> out = {Precision::fp32};
  try {
    nn::require_bf16();
    out.push_back(Precision::bf16);
  } catch (...) {
  }
  return out;
}

}  // namespace cnnscale::test
