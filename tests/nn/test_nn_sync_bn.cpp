// test_nn_sync_bn.cpp — batch-norm with global statistics (--sync-bn,
// StepContext::sum_across_ranks) without MPI: W "ranks" are W models on W threads whose
// callback sums through a barrier in rank order (as ControlComm::sum_in_rank_order).
//   - W ranks with an unequal split of one batch (3 + 5, 1 + 2 + 2 + 3; a bn after
//     conv, in a residual body, reading a tensor that the add reads too, on the network
//     input): loss, the
//     gradients summed over ranks and the running statistics against the double
//     precision reference on the whole batch (reference.hpp; gradients by central
//     finite differences, as test_nn_gradcheck); every rank's running statistics equal
//     bit for bit;
//   - resnet20: W ranks ≡ one model on the whole batch (relative difference per
//     parameter < 1e-5: fp32 sums in another order), while per-rank statistics (no
//     callback) differ from it by far more, so the comparison can fail.
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "nn/model.hpp"
#include "nn/net.hpp"
#include "random_batch.hpp"
#include "reference.hpp"
#include "thread_ranks.hpp"

using namespace cnnscale;
using test::RankResult;
using test::run_ranks;

namespace {

std::vector<double> summed_grads(const std::vector<RankResult>& rs) {
  std::vector<double> g(rs[0].grads.size(), 0.0);
  for (const auto& r : rs)
    for (size_t i = 0; i < g.size(); ++i) g[i] += r.grads[i];
  return g;
}

// Largest ||a − b|| / ||b|| over trainable parameters.
double max_rel_diff(const nn::Graph& g, const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (const auto& p : g.params) {
    if (!p.info.trainable) continue;
    double num = 0, den = 0;
    for (size_t k = 0; k < p.info.numel; ++k) {
      const double d = a[p.info.offset + k] - b[p.info.offset + k];
      num += d * d;
      den += b[p.info.offset + k] * b[p.info.offset + k];
    }
    if (den > 0) worst = std::max(worst, std::sqrt(num / den));
  }
  return worst;
}

// W ranks with sync vs the double reference on the whole batch.
void check_against_reference(const std::string& spec, const SampleShape& shape, int classes,
                             const std::vector<int64_t>& split) {
  SCOPED_TRACE(spec);
  int64_t total = 0;
  for (int64_t s : split) total += s;
  const test::RandomBatch d(total, shape, classes, 21);
  const auto rs = run_ranks(spec, shape, classes, d, split, true);

  auto m = make_model(spec, shape, classes);
  m->init_params(7);
  const auto& g = dynamic_cast<nn::Net&>(*m).graph();
  const std::vector<double> P(m->param_data(), m->param_data() + m->param_count());
  const StepContext ctx = test::ctx_for(d, total);
  const auto ref = nn::ref::forward(g, P, d.x.data(), d.y.data(), total, ctx, true);

  double loss = 0;
  for (const auto& r : rs) loss += r.loss;
  EXPECT_NEAR(loss, ref.loss_sum, 1e-5 * std::abs(ref.loss_sum));

  // Running statistics: bitwise the same on every rank, and the reference's global
  // mean and unbiased variance with momentum 0.1 from (0, 1).
  for (size_t r = 1; r < rs.size(); ++r) EXPECT_EQ(rs[r].params, rs[0].params) << "rank " << r;
  int checked_bn = 0;
  for (const auto& nd : g.nodes) {
    if (nd.op != nn::Op::bn) continue;
    const auto& st = ref.bn.at(nd.index);
    const size_t mo = g.params[nd.params[2]].info.offset, vo = g.params[nd.params[3]].info.offset;
    const double unbias = static_cast<double>(st.count) / static_cast<double>(st.count - 1);
    for (size_t ch = 0; ch < st.mean.size(); ++ch) {
      EXPECT_NEAR(rs[0].params[mo + ch], 0.1 * st.mean[ch], 1e-6 + 1e-5 * std::abs(0.1 * st.mean[ch]));
      const double rv = 0.9 + 0.1 * st.var[ch] * unbias;
      EXPECT_NEAR(rs[0].params[vo + ch], rv, 1e-5 * rv) << "running_var channel " << ch;
    }
    ++checked_bn;
  }
  EXPECT_GT(checked_bn, 0);

  // Gradients summed over ranks vs central differences of the reference.
  const std::vector<double> grad = summed_grads(rs);
  const double h = 1e-6;
  double max_fd = 0, max_err = 0;
  for (const auto& p : g.params) {
    if (!p.info.trainable) continue;
    for (size_t k = 0; k < p.info.numel; ++k) {
      const size_t i = p.info.offset + k;
      std::vector<double> Q = P;
      Q[i] = P[i] + h;
      const double lp = nn::ref::forward(g, Q, d.x.data(), d.y.data(), total, ctx, true).loss_sum;
      Q[i] = P[i] - h;
      const double lm = nn::ref::forward(g, Q, d.x.data(), d.y.data(), total, ctx, true).loss_sum;
      const double fd = (lp - lm) / (2 * h) * ctx.loss_scale;
      max_fd = std::max(max_fd, std::abs(fd));
      max_err = std::max(max_err, std::abs(grad[i] - fd));
    }
  }
  ASSERT_GT(max_fd, 1e-6) << "degenerate test: no gradient";
  EXPECT_LE(max_err, 2e-3 * max_fd);
}

}  // namespace

TEST(SyncBn, TwoUnequalRanksMatchTheReference) {
  check_against_reference("conv(4,3,1,1) bn relu flatten linear(3)", {2, 5, 5}, 3, {3, 5});
}

TEST(SyncBn, FourRanksResidualMatchTheReference) {
  check_against_reference("conv(4,3,1,1) bn relu res(conv(4,3,1,1) bn relu conv(4,3,1,1) bn) relu flatten linear(3)",
                          {1, 6, 6}, 3, {1, 2, 2, 3});
}

TEST(SyncBn, InputWithTwoReaders) {  // the residual's input feeds the inner bn and the add
  check_against_reference("conv(4,3,1,1) bn res(bn relu conv(4,3,1,1)) relu flatten linear(3)", {2, 5, 5}, 3, {3, 2});
}

TEST(SyncBn, OnTheNetworkInput) {  // no data gradient there: no backward message
  check_against_reference("bn conv(3,3) relu flatten linear(3)", {2, 5, 5}, 3, {2, 3});
}

TEST(SyncBn, OneRankEqualsPlainBatchNorm) {
  // W = 1 through the callback (global = local statistics) vs oneDNN's own statistics.
  const SampleShape shape{3, 8, 8};
  const test::RandomBatch d(6, shape, 10, 5);
  const auto a = run_ranks("resnet20", shape, 10, d, {6}, true);
  const auto b = run_ranks("resnet20", shape, 10, d, {6}, false);
  auto m = make_model("resnet20", shape, 10);
  const auto& g = dynamic_cast<nn::Net&>(*m).graph();
  EXPECT_NEAR(a[0].loss, b[0].loss, 1e-5 * std::abs(b[0].loss));
  const std::vector<double> ga(a[0].grads.begin(), a[0].grads.end()), gb(b[0].grads.begin(), b[0].grads.end());
  EXPECT_LT(max_rel_diff(g, ga, gb), 1e-5);
}

TEST(SyncBn, Resnet20RanksEqualOneRankOnTheWholeBatch) {
  const SampleShape shape{3, 8, 8};
  const test::RandomBatch d(8, shape, 10, 9);
  auto m = make_model("resnet20", shape, 10);
  const auto& g = dynamic_cast<nn::Net&>(*m).graph();
  const auto whole = run_ranks("resnet20", shape, 10, d, {8}, false);
  const std::vector<double> gw(whole[0].grads.begin(), whole[0].grads.end());
  for (const std::vector<int64_t>& split :
       {std::vector<int64_t>{4, 4}, std::vector<int64_t>{3, 5}, std::vector<int64_t>{2, 2, 2, 2}}) {
    SCOPED_TRACE(std::to_string(split.size()) + " ranks, first " + std::to_string(split[0]));
    const auto synced = run_ranks("resnet20", shape, 10, d, split, true);
    const auto local = run_ranks("resnet20", shape, 10, d, split, false);
    const double rel_sync = max_rel_diff(g, summed_grads(synced), gw);
    const double rel_local = max_rel_diff(g, summed_grads(local), gw);
    EXPECT_LT(rel_sync, 1e-5);
    EXPECT_GT(rel_local, 1e-3) << "per-rank statistics should change the gradients";
    for (size_t r = 1; r < synced.size(); ++r) EXPECT_EQ(synced[r].params, synced[0].params);
    // Running statistics of the whole batch.
    for (const auto& p : g.params) {
      if (p.info.trainable) continue;
      for (size_t k = 0; k < p.info.numel; ++k) {
        const float want = whole[0].params[p.info.offset + k];
        EXPECT_NEAR(synced[0].params[p.info.offset + k], want, 1e-5 * std::abs(want) + 1e-7) << p.info.name;
      }
    }
  }
}

TEST(SyncBn, Bf16RanksCloseToOneRankOnTheWholeBatch) {
  // --precision bf16: the statistics and correction passes read and write bf16
  // activations; two synced ranks give the whole batch's result up to bf16 rounding,
  // unsynced ranks do not.
  const auto isa = dnnl::get_effective_cpu_isa();
  if (isa != dnnl::cpu_isa::avx512_core_bf16 && isa != dnnl::cpu_isa::avx512_core_amx)
    GTEST_SKIP() << "no native bf16 on this processor";
  const SampleShape shape{3, 8, 8};
  const test::RandomBatch d(8, shape, 10, 9);
  auto m = make_model("resnet20", shape, 10);
  const auto& g = dynamic_cast<nn::Net&>(*m).graph();
  const auto whole = run_ranks("resnet20", shape, 10, d, {8}, false, Precision::bf16);
  const auto whole32 = run_ranks("resnet20", shape, 10, d, {8}, false);
  const std::vector<double> gw(whole[0].grads.begin(), whole[0].grads.end());
  const auto synced = run_ranks("resnet20", shape, 10, d, {4, 4}, true, Precision::bf16);
  const auto local = run_ranks("resnet20", shape, 10, d, {4, 4}, false, Precision::bf16);
  const double loss = synced[0].loss + synced[1].loss;
  EXPECT_NEAR(loss, whole[0].loss, 2e-2 * std::abs(whole[0].loss));
  EXPECT_NEAR(loss, whole32[0].loss, 2e-2 * std::abs(whole32[0].loss));
  const double rel_sync = max_rel_diff(g, summed_grads(synced), gw);
  const double rel_local = max_rel_diff(g, summed_grads(local), gw);
  std::printf("bf16: synced vs whole batch %.3g, unsynced vs whole batch %.3g\n", rel_sync, rel_local);
  EXPECT_LT(rel_sync, rel_local / 3);
  for (const auto& p : g.params) {  // running statistics of the whole batch (f32 statistics of bf16 data)
    if (p.info.trainable) continue;
    for (size_t k = 0; k < p.info.numel; ++k) {
      const float want = whole[0].params[p.info.offset + k];
      EXPECT_NEAR(synced[0].params[p.info.offset + k], want, 1e-2 * std::abs(want) + 1e-3) << p.info.name;
    }
  }
}

TEST(SyncBn, SmallSpatialBlocked) {  // 2×2 and 1×1 maps, 16 and 32 channels (nChw16c)
  check_against_reference("conv(16,3,2,1) bn relu conv(32,3,2,1) bn relu flatten linear(3)", {3, 4, 4}, 3, {3, 5});
}
