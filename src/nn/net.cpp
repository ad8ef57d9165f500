// net.cpp — Net: plans, forward/backward driving, softmax cross-entropy, evaluation.
#include "nn/net.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/error.hpp"
#include "util/memory.hpp"

namespace cnnscale::nn {

Net::Net(Graph graph, std::string name, std::string spec)
    : graph_(std::move(graph)), name_(std::move(name)), spec_(std::move(spec)), eng_(dnnl::engine::kind::cpu, 0),
      stream_(eng_) {
  const size_t bytes = std::max<size_t>(graph_.param_count, 1) * sizeof(float);
  const std::string what = "allocating the parameters and gradients of model " + name_ + " (" +
                           std::to_string(graph_.param_count) + " parameters)";
  const char* hint = "choose a smaller --model, or run with more memory per rank";
  check_memory(what, 2 * bytes, hint);
  allocating(what, 2 * bytes, hint, [&] {
    params_.resize(bytes);
    grads_.resize(bytes);
  });
  init_params(0);
}

bool Net::adopt_grad_storage(float* grads) {
  if (!grads) return false;
  const size_t bytes = std::max<size_t>(graph_.param_count, 1) * sizeof(float);
  std::memcpy(grads, grads_.data(), bytes);
  grads_.adopt(grads, bytes);
  plans_.clear();  // plans point at the old buffer; prepare() builds them again
  return true;
}

void Net::prepare(int64_t max_batch, Precision precision) {
  if (max_batch < 1) fail("batch size must be at least 1, got ", max_batch);
  if (precision != precision_) plans_.clear();
  precision_ = precision;
  max_batch_ = std::max(max_batch_, max_batch);
  plan_for(max_batch_);
}

Net::Plan& Net::plan_for(int64_t n) {
  auto it = plans_.find(n);
  if (it != plans_.end()) return *it->second;
  return *(plans_[n] = build_plan(n));
}

std::unique_ptr<Net::Plan> Net::build_plan(int64_t n) {
  auto plan = std::make_unique<Plan>();
  plan->n = n;
  const int T = graph_.tensor_count();
  for (int t = 0; t < T; ++t) plan->tensors.push_back(std::make_unique<Tensor>());
  const auto& in = graph_.input;
  plan->tensors[0]->dims = {n, in.channels, in.height, in.width};
  plan->tensors[0]->needs_diff = false;
  for (const Node& node : graph_.nodes) {
    for (int t : node.inputs) {
      plan->tensors[t]->consumers++;
      plan->tensors[t]->last_consumer = node.index;
    }
    Tensor& o = *plan->tensors[node.index + 1];
    o.dims = node.out.flat ? std::vector<int64_t>{n, node.out.c}
                           : std::vector<int64_t>{n, node.out.c, node.out.h, node.out.w};
  }
  plan->tensors[0]->alloc(plain_md(plan->tensors[0]->dims), eng_);
  ExecEnv env{eng_, n, precision_, params_.f(), grads_.f(), &graph_};
  for (const Node& node : graph_.nodes) {
    std::vector<Tensor*> ins;
    for (int t : node.inputs) ins.push_back(plan->tensors[t].get());
    Tensor* fused = node.op == Op::conv && node.fused_relu ? plan->tensors[node.index + 2].get() : nullptr;
    // maxpool after a fused relu: the relu's input (the conv output), whose gradient it writes.
    if (node.op == Op::maxpool && node.relu_into_pool) fused = plan->tensors[graph_.nodes[node.inputs[0] - 1].inputs[0]].get();
    plan->execs.push_back(make_exec(node, ins, plan->tensors[node.index + 1].get(), env, fused));
  }
  const Tensor& out = *plan->tensors[graph_.output];
  if (out.md != plain_md(out.dims)) throw std::logic_error("Net: logits are not in the plain layout");
  return plan;
}

double Net::forward_backward(const float* images, const int32_t* labels, int64_t n, const StepContext& ctx,
                             const GradReadyFn& on_ready) {
  if (n <= 0) fail("forward_backward: empty batch");
  Plan& plan = plan_for(n);
  RunCtx c{&stream_, &ctx, n, ctx.training};
  Tensor& x = *plan.tensors[0];
  std::memcpy(x.data.data(), images, static_cast<size_t>(n * graph_.input.numel()) * sizeof(float));
  for (auto& e : plan.execs) e->forward(c);

  // Softmax cross-entropy (numerically stable): loss_i = logsumexp(z_i) - z_i[y_i];
  // d(sum loss)/dz = softmax(z) - onehot(y), times loss_scale.
  Tensor& out = *plan.tensors[graph_.output];
  const int C = graph_.classes;
  const float* z = out.data.f();
  float* dz = out.diff.f();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t y = labels[i];
    if (y < 0 || y >= C) fail("label ", y, " of sample ", i, " is outside [0, ", C, ")");
    const float* zi = z + i * C;
    float* di = dz + i * C;
    float m = zi[0];
    for (int j = 1; j < C; ++j) m = std::max(m, zi[j]);
    double s = 0;
    for (int j = 0; j < C; ++j) s += std::exp(static_cast<double>(zi[j] - m));
    const double lse = m + std::log(s);
    total += lse - zi[y];
    for (int j = 0; j < C; ++j) {
      const double p = std::exp(static_cast<double>(zi[j]) - lse);
      di[j] = static_cast<float>((p - (j == y ? 1.0 : 0.0)) * ctx.loss_scale);
    }
  }

  size_t reported = 0;
  for (size_t k = plan.execs.size(); k-- > 0;) {
    const Node& node = graph_.nodes[k];
    plan.execs[k]->backward_params(c);
    if (!node.params.empty() && node.flat_end > reported) {
      reported = node.flat_end;
      if (on_ready) on_ready(reported);
    }
    plan.execs[k]->backward_data(c);
  }
  if (reported < graph_.param_count && on_ready) on_ready(graph_.param_count);
  return total;
}

void Net::forward_eval(const float* images, int64_t n, float* logits) {
  if (n <= 0) return;
  if (max_batch_ == 0) prepare(std::min<int64_t>(n, 256), precision_);
  Plan& plan = plan_for(max_batch_);
  StepContext ctx;
  ctx.training = false;
  RunCtx c{&stream_, &ctx, max_batch_, false};
  const int64_t per = graph_.input.numel();
  const int C = graph_.classes;
  Tensor& x = *plan.tensors[0];
  const Tensor& out = *plan.tensors[graph_.output];
  for (int64_t off = 0; off < n; off += max_batch_) {
    const int64_t m = std::min(max_batch_, n - off);
    std::memcpy(x.data.data(), images + off * per, static_cast<size_t>(m * per) * sizeof(float));
    if (m < max_batch_)
      std::memset(x.data.f() + m * per, 0, static_cast<size_t>((max_batch_ - m) * per) * sizeof(float));
    for (auto& e : plan.execs) e->forward_eval(c);
    std::memcpy(logits + off * C, out.data.f(), static_cast<size_t>(m * C) * sizeof(float));
  }
}

void Net::init_params(uint64_t seed) {
  for (const auto& p : graph_.params) init_param(p, seed, params_.f() + p.info.offset);
}

}  // namespace cnnscale::nn
