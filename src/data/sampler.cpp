// sampler.cpp — see sampler.hpp.
#include "data/sampler.hpp"

#include "util/error.hpp"

namespace cnnscale {

uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t SplitMix64::below(uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

std::vector<int64_t> epoch_permutation(uint64_t seed, int epoch, int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  SplitMix64 rng(mix64(seed ^ 0x6a09e667f3bcc909ull) ^ mix64(static_cast<uint64_t>(epoch) + 0x3c6ef372fe94f82bull));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

Sampler::Sampler(int64_t samples, int64_t global_batch, bool drop_last, uint64_t seed)
    : samples_(samples), global_batch_(global_batch), drop_last_(drop_last), seed_(seed) {
  if (samples < 1) fail("the split has no samples; nothing to train on");
  if (global_batch < 1) fail("the global batch must be at least 1 sample");
  if (global_batch > samples)
    fail("the global batch of ", global_batch, " samples is larger than the split's ", samples,
         " samples; lower --batch-size or use fewer ranks");
  steps_ = drop_last ? samples / global_batch : (samples + global_batch - 1) / global_batch;
}

const std::vector<int64_t>& Sampler::permutation(int epoch) {
  if (epoch != cached_epoch_) {
    perm_ = epoch_permutation(seed_, epoch, samples_);
    cached_epoch_ = epoch;
  }
  return perm_;
}

void Sampler::global_batch_ids(int epoch, int64_t step, std::vector<int64_t>& out) {
  rank_slice(epoch, step, 0, global_batch_, out);
}

void Sampler::rank_slice(int epoch, int64_t step, int rank, int64_t per_rank, std::vector<int64_t>& out) {
  if (step < 0 || step >= steps_ || epoch < 0)
    internal_error("sampler position (epoch ", epoch, ", step ", step, ") outside 0..", steps_ - 1);
  if (rank < 0 || (rank + 1) * per_rank > global_batch_)
    internal_error("rank ", rank, " slice of ", per_rank, " exceeds the global batch of ", global_batch_);
  const auto& p = permutation(epoch);
  out.resize(static_cast<size_t>(per_rank));
  const int64_t base = step * global_batch_ + rank * per_rank;
  for (int64_t k = 0; k < per_rank; ++k) out[k] = p[(base + k) % samples_];
}

}  // namespace cnnscale
