// contiguous_eval.cpp — see contiguous_eval.hpp.
#include "data/contiguous_eval.hpp"

#include <algorithm>

#include "util/error.hpp"

namespace cnnscale {

ContiguousEvalSource::ContiguousEvalSource(int64_t samples, int64_t sample_numel, int rank, int world)
    : samples_(samples),
      numel_(sample_numel),
      begin_(samples * rank / world),
      end_(samples * (rank + 1) / world),
      pos_(begin_) {}

void ContiguousEvalSource::rewind() {
  pos_ = begin_;
  step_ = 0;
}

bool ContiguousEvalSource::next(Batch& out, int64_t max_batch) {
  if (max_batch < 1) internal_error("evaluation batch must be at least 1");
  if (pos_ >= end_) return false;
  const int64_t n = std::min(max_batch, end_ - pos_);
  out.epoch = 0;
  out.step_in_epoch = step_++;
  out.count = n;
  out.rank_offset = pos_ - begin_;
  out.sample_ids.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out.sample_ids[static_cast<size_t>(k)] = pos_ + k;
  out.labels.resize(static_cast<size_t>(n));
  out.images.resize(static_cast<size_t>(n * numel_));
  fill(out, pos_, n);
  pos_ += n;
  return true;
}

}  // namespace cnnscale
