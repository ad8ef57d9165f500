// optimizer.cpp — see optimizer.hpp.
#include "train/optimizer.hpp"

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "train/cuda_optimizer.hpp"
#include "util/error.hpp"
#include "util/memory.hpp"

namespace cnnscale {
std::vector<std::pair<size_t, size_t>> trainable_ranges(const std::vector<ParamInfo>& params) {
  std::vector<std::pair<size_t, size_t>> r;
  for (const auto& p : params) {
    if (!p.trainable) continue;
    if (!r.empty() && r.back().second == p.offset) r.back().second = p.offset + p.numel;
    else r.emplace_back(p.offset, p.offset + p.numel);
  }
  return r;
}

AdamWScalars adamw_scalars(const OptimizerOptions& o, long long t, double lr) {
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
  return {static_cast<float>(1.0 - lr * o.weight_decay), static_cast<float>(o.beta1), static_cast<float>(o.beta2),
          static_cast<float>(lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2)), static_cast<float>(o.eps)};
}

namespace {

// 1 when x is NaN or ±Inf: one compare, vectorised with the update around it (an OR
// reduction; no -ffast-math in this build, so it is not folded away).
inline unsigned not_finite(float x) { return !(std::fabs(x) <= FLT_MAX); }

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, const std::vector<ParamInfo>& params, size_t n)
      : o_(o), check_(o.check_finite), ranges_(trainable_ranges(params)), buf_(o.momentum != 0 ? n : 0, 0.f) {}
  std::string kind() const override { return "sgd"; }
  void step(float* p, const float* g, double lr) override {
    bad_ = check_ ? update<true>(p, g, lr) : update<false>(p, g, lr);
    ++steps_;
  }
  bool wrote_finite() const override { return bad_ == 0; }
  std::vector<std::pair<std::string, std::vector<float>*>> state() override {
    if (buf_.empty()) return {};
    return {{"momentum_buffer", &buf_}};
  }
  long long steps_taken() const override { return steps_; }
  void set_steps_taken(long long s) override { steps_ = s; }

 private:
  // Returns how many written values are not finite (0 when Check is false).
  template <bool Check>
  unsigned update(float* p, const float* g, double lr) {
    const float mom = static_cast<float>(o_.momentum), wd = static_cast<float>(o_.weight_decay);
    const float flr = static_cast<float>(lr);
    const bool first = steps_ == 0;
    unsigned bad = 0;
    for (auto [b, e] : ranges_) {
      if (mom == 0.f) {
        for (size_t i = b; i < e; ++i) {
          p[i] -= flr * (g[i] + wd * p[i]);
          if constexpr (Check) bad |= not_finite(p[i]);
        }
        continue;
      }
      float* buf = buf_.data();
      for (size_t i = b; i < e; ++i) {
        float d = g[i] + wd * p[i];
        buf[i] = first ? d : mom * buf[i] + d;  // torch: buf = d on the first step
        p[i] -= flr * (o_.nesterov ? d + mom * buf[i] : buf[i]);
        if constexpr (Check) bad |= not_finite(p[i]) | not_finite(buf[i]);
      }
    }
    return bad;
  }

  OptimizerOptions o_;
  bool check_;
  std::vector<std::pair<size_t, size_t>> ranges_;
  std::vector<float> buf_;
  long long steps_ = 0;
  unsigned bad_ = 0;
};

class AdamW final : public Optimizer {
 public:
  AdamW(const OptimizerOptions& o, const std::vector<ParamInfo>& params, size_t n)
      : o_(o), check_(o.check_finite), ranges_(trainable_ranges(params)), m_(n, 0.f), v_(n, 0.f) {}
  std::string kind() const override { return "adamw"; }
  void step(float* p, const float* g, double lr) override {
    ++steps_;
    bad_ = check_ ? update<true>(p, g, lr) : update<false>(p, g, lr);
  }
  bool wrote_finite() const override { return bad_ == 0; }
  std::vector<std::pair<std::string, std::vector<float>*>> state() override {
    return {{"exp_avg", &m_}, {"exp_avg_sq", &v_}};
  }
  long long steps_taken() const override { return steps_; }
  void set_steps_taken(long long s) override { steps_ = s; }

 private:
  // Vectorised: this file is compiled with -fno-math-errno (src/train/CMakeLists.txt), so
  // std::sqrt has no errno branch; sqrtps rounds as sqrtss does (the same bits).
  template <bool Check>
  unsigned update(float* p, const float* g, double lr) {
    const AdamWScalars s = adamw_scalars(o_, steps_, lr);
    const float decay = s.decay, b1 = s.b1, b2 = s.b2, step_size = s.step_size, inv_sqrt_bc2 = s.inv_sqrt_bc2,
                eps = s.eps;
    float* m = m_.data();
    float* v = v_.data();
    unsigned bad = 0;
    for (auto [b, e] : ranges_) {
      for (size_t i = b; i < e; ++i) {
        p[i] *= decay;
        m[i] = b1 * m[i] + (1.f - b1) * g[i];
        v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
        // m need not be checked: a NaN or Inf in m makes p NaN or Inf (0·Inf is NaN when
        // the lr is 0), while an Inf in v leaves p finite (m / Inf = 0).
        if constexpr (Check) bad |= not_finite(p[i]) | not_finite(v[i]);
      }
    }
    return bad;
  }

  OptimizerOptions o_;
  bool check_;
  std::vector<std::pair<size_t, size_t>> ranges_;
  std::vector<float> m_, v_;
  long long steps_ = 0;
  unsigned bad_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, const std::vector<ParamInfo>& params,
                                          size_t param_count) {
  if (o.momentum < 0 || o.weight_decay < 0) fail("--momentum and --weight-decay must not be negative");
  if (o.kind == "sgd") {
    if (o.nesterov && o.momentum <= 0) fail("--nesterov needs --momentum > 0 (as in PyTorch)");
    return std::make_unique<Sgd>(o, params, param_count);
  }
  if (o.kind == "adamw") {
    if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1)) fail("--betas must lie in [0, 1)");
    return std::make_unique<AdamW>(o, params, param_count);
  }
  fail("--optimizer ", o.kind, " is not supported; use sgd or adamw");
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, Model& model) {
  OptimizerOptions o = options;
  // CNNSCALE_NAN_GUARD=off: no finiteness check in the update either (bench/nan-guard-cost.sh).
  if (const char* guard = std::getenv("CNNSCALE_NAN_GUARD"); guard && std::strcmp(guard, "off") == 0)
    o.check_finite = false;
  if (model.on_device()) return make_cuda_optimizer(o, model.params(), model.param_count(), model.stream());
  const uint64_t bytes = model.param_count() * sizeof(float) * (o.kind == "adamw" ? 2 : 1);
  const std::string what = "allocating the " + o.kind + " optimizer state of " +
                           std::to_string(model.param_count()) + " parameters";
  const char* hint = "choose a smaller --model, or run with more memory per rank";
  check_memory(what, bytes, hint);
  return allocating(what, bytes, hint, [&] { return make_optimizer(o, model.params(), model.param_count()); });
}

}  // namespace cnnscale
