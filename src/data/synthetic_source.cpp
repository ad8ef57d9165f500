// synthetic_source.cpp — see synthetic_source.hpp.
#include "data/synthetic_source.hpp"

#include <algorithm>
#include <utility>

#include "data/contiguous_eval.hpp"
#include "data/prefetcher.hpp"
#include "data/sampler.hpp"
#include "data/worker_pool.hpp"
#include "util/error.hpp"

namespace cnnscale {

void synthetic_sample(uint64_t seed, int split, int64_t index, SampleShape shape, int classes, float* image,
                      int32_t* label) {
  const uint64_t key = mix64(seed ^ mix64(static_cast<uint64_t>(index) * 2 + static_cast<uint64_t>(split) + 1));
  const int32_t l = static_cast<int32_t>(key % static_cast<uint64_t>(classes));
  *label = l;
  uint64_t state = key;
  const int64_t n = shape.numel();
  // splitmix64_next written out (the call did not inline across files) and p % classes
  // as a wrapping counter: the same values, about 5x faster (a 224x224 batch of 128 took
  // ~50 ms per step on the first GPU run: as long as the GPU's step).
  int64_t r = 0;
  for (int64_t p = 0; p < n; ++p) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0,1)
    image[p] = 2.0f * u - 1.0f + (r == l ? 1.0f : 0.0f);
    if (++r == classes) r = 0;
  }
}

namespace {

void check(const SyntheticOptions& o, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) internal_error("synthetic source asked for rank ", rank, " of ", world);
  if (o.samples < 1) fail("--synthetic-samples must be at least 1");
  if (o.classes < 2) fail("synthetic data need at least 2 classes");
  if (o.shape.channels < 1 || o.shape.height < 1 || o.shape.width < 1) fail("synthetic sample shape must be positive");
  if (o.batch_per_rank < 1) fail("--batch-size must be at least 1");
  if (o.batch_per_rank * world > o.samples)
    fail("--batch-size ", o.batch_per_rank, " on ", world, " rank(s) needs ", o.batch_per_rank * world,
         " samples per step but the synthetic split has ", o.samples, "; use --batch-size ",
         std::max<int64_t>(1, o.samples / world), " or less (or more synthetic samples)");
}

class SyntheticSource : public BatchSource {
 public:
  SyntheticSource(const SyntheticOptions& o, int rank, int world)
      : o_(o),
        rank_(rank),
        sampler_(o.samples, o.batch_per_rank * world, o.drop_last, o.seed),
        pool_(std::max(o.threads, 1)),
        prefetch_([this](int e, int64_t s, Batch& b) { produce(e, s, b); }, sampler_.steps_per_epoch(), o.prefetch) {}
  SampleShape shape() const override { return o_.shape; }
  int classes() const override { return o_.classes; }
  int64_t samples() const override { return o_.samples; }
  int64_t steps_per_epoch() const override { return sampler_.steps_per_epoch(); }
  void seek(int epoch, int64_t step) override {
    if (epoch < 0 || step < 0 || step >= sampler_.steps_per_epoch())
      fail("cannot resume at epoch ", epoch, " step ", step, ": a synthetic epoch has ", sampler_.steps_per_epoch(),
           " steps with this global batch");
    prefetch_.seek(epoch, step);
  }
  void next(Batch& out) override { prefetch_.next(out); }
  double take_wait_seconds() override { return prefetch_.take_wait_seconds(); }
  void set_batch_hook(BatchHook hook) override { prefetch_.set_hook(std::move(hook)); }

 private:
  void produce(int epoch, int64_t step, Batch& b) {
    const int64_t n = o_.batch_per_rank, numel = o_.shape.numel();
    sampler_.rank_slice(epoch, step, rank_, n, b.sample_ids);
    b.epoch = epoch;
    b.step_in_epoch = step;
    b.count = n;
    b.rank_offset = int64_t{rank_} * n;
    b.images.resize(static_cast<size_t>(n * numel));
    b.labels.resize(static_cast<size_t>(n));
    // --data-threads: the samples over the source's worker pool, as the HDF5 source's
    // augmentation (a sample is a pure function of its index: the bytes do not depend on
    // which thread makes it).
    pool_.run(n, [&](int64_t k, int) {
      synthetic_sample(o_.seed, 0, b.sample_ids[k], o_.shape, o_.classes, b.images.data() + k * numel, &b.labels[k]);
    });
  }
  SyntheticOptions o_;
  int rank_;
  Sampler sampler_;
  WorkerPool pool_;      // --data-threads
  Prefetcher prefetch_;  // last: stops its thread first
};

class SyntheticEvalSource : public ContiguousEvalSource {
 public:
  SyntheticEvalSource(const SyntheticOptions& o, int rank, int world)
      : ContiguousEvalSource(o.test_samples, o.shape.numel(), rank, world), o_(o) {}

 protected:
  void fill(Batch& out, int64_t first, int64_t n) override {
    const int64_t numel = o_.shape.numel();
    for (int64_t k = 0; k < n; ++k)
      synthetic_sample(o_.seed, 1, first + k, o_.shape, o_.classes, out.images.data() + k * numel, &out.labels[k]);
  }

 private:
  SyntheticOptions o_;
};

}  // namespace

std::unique_ptr<BatchSource> make_synthetic_train_source(const SyntheticOptions& o, int rank, int world) {
  check(o, rank, world);
  if (o.prefetch < 0) fail("--prefetch must be 0 or more");
  return std::make_unique<SyntheticSource>(o, rank, world);
}

std::unique_ptr<EvalSource> make_synthetic_eval_source(const SyntheticOptions& o, int rank, int world) {
  check(o, rank, world);
  if (o.test_samples < 1) return nullptr;
  return std::make_unique<SyntheticEvalSource>(o, rank, world);
}

}  // namespace cnnscale
