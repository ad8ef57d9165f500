// contiguous_eval.hpp — the exactly-once evaluation split every EvalSource shares:
// rank r of W takes the contiguous range [N·r/W, N·(r+1)/W) of the split, in order,
// in batches of at most max_batch (the last one may be short). No padding, no
// duplicates. A subclass only says how to fill n samples starting at a global index.
#pragma once
#include <cstdint>

#include "data/batch_source.hpp"

namespace cnnscale {

class ContiguousEvalSource : public EvalSource {
 public:
  ContiguousEvalSource(int64_t samples, int64_t sample_numel, int rank, int world);
  int64_t samples() const override { return samples_; }
  int64_t local_samples() const override { return end_ - begin_; }
  void rewind() override;
  bool next(Batch& out, int64_t max_batch) final;

 protected:
  // Fills out.images (already n × sample_numel) and out.labels (already n) with the
  // samples first .. first+n-1 of the split.
  virtual void fill(Batch& out, int64_t first, int64_t n) = 0;

 private:
  int64_t samples_, numel_, begin_, end_, pos_, step_ = 0;
};

}  // namespace cnnscale
