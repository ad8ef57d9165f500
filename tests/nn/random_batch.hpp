// random_batch.hpp — for the nn tests: a seeded random batch (images uniform in [-1, 1),
// labels, global sample ids id_base + id_step·i) and the StepContext that trains on it.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/model.hpp"
#include "nn/rng.hpp"

namespace cnnscale::test {

struct RandomBatch {
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<int64_t> ids;
  RandomBatch(int64_t n, const SampleShape& s, int classes, uint64_t seed = 3, int64_t id_base = 100,
              int64_t id_step = 1) {
    nn::SplitMix64 r(seed);
    x.resize(static_cast<size_t>(n * s.numel()));
    for (auto& v : x) v = static_cast<float>(r.uniform(-1, 1));
    for (int64_t i = 0; i < n; ++i)
      y.push_back(static_cast<int32_t>(r.next() % classes)), ids.push_back(id_base + id_step * i);
  }
};

// Seed 11, the given step, loss scale 1/global_batch.
inline StepContext ctx_for(const RandomBatch& d, int64_t global_batch, int64_t step = 0) {
  StepContext c;
  c.seed = 11;
  c.step = step;
  c.sample_ids = d.ids.data();
  c.loss_scale = 1.f / static_cast<float>(global_batch);
  return c;
}

}  // namespace cnnscale::test
