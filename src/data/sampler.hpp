// sampler.hpp — the global sample order of an epoch and each rank's slice of it.
//
// The order is a pure function of (seed, epoch): a Fisher–Yates shuffle of
// [0, samples) driven by a splitmix64 generator seeded from (seed, epoch), with
// Lemire's unbiased bounded integers. Nothing here depends on the world size, the
// number of shards, the platform or the standard library's <random>.
//
// Global batch s of epoch e is positions [s*G, (s+1)*G) of that permutation, G the
// global batch (world × per-rank batch). Rank r takes positions [r*B, (r+1)*B) of it.
//   drop_last = true  (default): steps_per_epoch = floor(N / G); the N mod G samples at
//       the end of the permutation are not used in that epoch (a different tail each
//       epoch, since the permutation changes).
//   drop_last = false: steps_per_epoch = ceil(N / G); positions past N wrap to the start
//       of the same epoch's permutation (position p reads permutation[p mod N]), so the
//       last batch is full and its first (G - N mod G) wrapped samples are seen twice
//       that epoch. Every other sample is seen exactly once.
// Both require G <= N (a global batch never holds one sample twice).
#pragma once
#include <cstdint>
#include <vector>

namespace cnnscale {

// One step of splitmix64 (Steele, Lea, Flood 2014): advances state, returns 64 bits.
uint64_t splitmix64_next(uint64_t& state);
// Stateless 64-bit mix (the splitmix64 finaliser).
uint64_t mix64(uint64_t x);

// A small deterministic generator: splitmix64 with an unbiased below(n).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64_next(state_); }
  // Uniform integer in [0, bound), bound >= 1 (Lemire 2019, with rejection).
  uint64_t below(uint64_t bound);

 private:
  uint64_t state_;
};

// The permutation of [0, n) used in `epoch` under `seed`.
std::vector<int64_t> epoch_permutation(uint64_t seed, int epoch, int64_t n);

class Sampler {
 public:
  // Throws UserError if samples < 1, global_batch < 1 or global_batch > samples.
  Sampler(int64_t samples, int64_t global_batch, bool drop_last, uint64_t seed);

  int64_t samples() const { return samples_; }
  int64_t global_batch() const { return global_batch_; }
  bool drop_last() const { return drop_last_; }
  int64_t steps_per_epoch() const { return steps_; }

  // Global sample indices of global batch `step` of `epoch`, in batch order.
  void global_batch_ids(int epoch, int64_t step, std::vector<int64_t>& out);
  // Rank `rank`'s slice (per_rank samples starting at rank*per_rank) of that batch.
  void rank_slice(int epoch, int64_t step, int rank, int64_t per_rank, std::vector<int64_t>& out);

 private:
  const std::vector<int64_t>& permutation(int epoch);
  int64_t samples_, global_batch_;
  bool drop_last_;
  uint64_t seed_;
  int64_t steps_;
  int cached_epoch_ = -1;
  std::vector<int64_t> perm_;
};

}  // namespace cnnscale
