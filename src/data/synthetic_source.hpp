// synthetic_source.hpp — `train --synthetic`: samples that are a pure function of
// (seed, global sample index), so 1-rank and W-rank runs see identical global
// batches without any files. Pixels are uniform noise in [-1, 1) plus +1 on the
// pixels p with p mod classes == label (weakly learnable); label = hash mod classes.
// The order of an epoch comes from the same Sampler as the HDF5 reader.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/batch_source.hpp"

namespace cnnscale {

struct SyntheticOptions {
  int64_t samples = 60000;       // train split
  int64_t test_samples = 10000;  // evaluation split (indices disjoint from train)
  SampleShape shape{1, 28, 28};
  int classes = 10;
  int64_t batch_per_rank = 64;
  uint64_t seed = 0;
  bool drop_last = true;
  int prefetch = 2;
  int threads = 1;  // --data-threads: threads making one batch (the prefetcher's and a WorkerPool's)
};

// Writes the synthetic sample `index` of split `split` (0 train, 1 test).
void synthetic_sample(uint64_t seed, int split, int64_t index, SampleShape shape, int classes, float* image,
                      int32_t* label);

std::unique_ptr<BatchSource> make_synthetic_train_source(const SyntheticOptions& o, int rank, int world);
std::unique_ptr<EvalSource> make_synthetic_eval_source(const SyntheticOptions& o, int rank, int world);

}  // namespace cnnscale
