// thread_ranks.hpp — for the --sync-bn tests without MPI: W "ranks" as W models on W
// threads, whose StepContext::sum_across_ranks sums through a barrier in rank order (as
// ControlComm::sum_in_rank_order does over MPI).
#pragma once
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "nn/model.hpp"
#include "random_batch.hpp"

namespace cnnscale::test {

// The sum over W threads, added in rank order, the same on every thread.
class Exchange {
 public:
  explicit Exchange(int w) : bar_(w), slots_(static_cast<size_t>(w)) {}
  void sum(int rank, double* v, size_t n) {
    slots_[static_cast<size_t>(rank)].assign(v, v + n);
    bar_.arrive_and_wait();
    for (size_t i = 0; i < n; ++i) {
      double s = slots_[0][i];
      for (size_t r = 1; r < slots_.size(); ++r) s += slots_[r][i];
      v[i] = s;
    }
    bar_.arrive_and_wait();  // nobody refills a slot before every rank has read it
  }

 private:
  std::barrier<> bar_;
  std::vector<std::vector<double>> slots_;
};

struct RankResult {  // after one step: the loss sum, gradients, parameters (running statistics updated)
  double loss = 0;
  std::vector<float> grads, params;
};

// One training forward/backward of `split` (sample counts per rank) of batch d, every
// rank on its own model from init seed 7; sync: the ranks share batch statistics.
inline std::vector<RankResult> run_ranks(const std::string& spec, const SampleShape& shape, int classes,
                                         const test::RandomBatch& d, const std::vector<int64_t>& split, bool sync,
                                         Precision precision = Precision::fp32) {
  const int W = static_cast<int>(split.size());
  int64_t total = 0;
  for (int64_t s : split) total += s;
  Exchange ex(W);
  std::vector<RankResult> out(static_cast<size_t>(W));
  std::vector<std::thread> threads;
  int64_t first = 0;
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r, first] {
      auto m = make_model(spec, shape, classes);
      m->init_params(7);
      const int64_t n = split[static_cast<size_t>(r)];
      m->prepare(n, precision);
      StepContext ctx = test::ctx_for(d, total);
      ctx.sample_ids = d.ids.data() + first;
      if (sync) ctx.sum_across_ranks = [&ex, r](double* v, size_t k) { ex.sum(r, v, k); };
      RankResult& o = out[static_cast<size_t>(r)];
      o.loss = m->forward_backward(d.x.data() + first * shape.numel(), d.y.data() + first, n, ctx, {});
      o.grads.assign(m->grad_data(), m->grad_data() + m->param_count());
      o.params.assign(m->param_data(), m->param_data() + m->param_count());
    });
    first += split[static_cast<size_t>(r)];
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace cnnscale::test
