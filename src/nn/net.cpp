// net.cpp — Net: plans, forward/backward driving (the loss is the task's, nn/task.hpp), evaluation.
#include "nn/net.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>

#include "util/error.hpp"
#include "util/finite.hpp"
#include "util/memory.hpp"

namespace cnnscale::nn {

namespace {

// Whether a tensor's data (any layout; padding is zero) holds a NaN.
bool tensor_has_nan(const Tensor& t) {
  const size_t bytes = t.md.get_size();
  const void* p = t.mem.get_data_handle();
  if (t.md.data_type() == dt::bf16) return has_nan_bf16(static_cast<const uint16_t*>(p), bytes / 2);
  return has_nan_f32(static_cast<const float*>(p), bytes / 4);
}

void set_first_nan(Tensor& t) {
  void* p = t.mem.get_data_handle();
  if (t.md.data_type() == dt::bf16) {
    const uint16_t nan16 = 0x7fc0;
    std::memcpy(p, &nan16, 2);
  } else {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(p, &nan, 4);
  }
}

}  // namespace


Net::Net(Graph graph, std::string name, std::string spec, std::string identity, std::shared_ptr<const Task> task)
    : graph_(std::move(graph)), name_(std::move(name)), spec_(std::move(spec)), identity_(std::move(identity)),
      task_(task ? std::move(task) : std::make_shared<const Task>(Task::classification(graph_.classes))),
      eng_(dnnl::engine::kind::cpu, 0), stream_(eng_) {
  if (task_->outputs() != graph_.classes)
    fail("model ", name_, " has ", graph_.classes, " outputs per sample but its task (", task_->describe(), ") takes ",
         task_->outputs());
  const size_t bytes = std::max<size_t>(graph_.param_count, 1) * sizeof(float);
  const std::string what = "allocating the parameters and gradients of model " + name_ + " (" +
                           std::to_string(graph_.param_count) + " parameters)";
  const SampleShape& in = graph_.input;
  const std::string hint = "choose a smaller --model or a smaller input (its input is " + in.text() +
                           ": the data set's sample shape, or the size that --augment or --image-size sets; the first "
                           "linear layer grows with it), or run with more memory per rank";
  check_memory(what, 2 * bytes, hint);
  allocating(what, 2 * bytes, hint, [&] {
    params_.resize(bytes);
    grads_.resize(bytes);
  });
  init_params(0);
  // The NaN guard's scans (net.hpp): the input of every node that drops a NaN, unless it
  // cannot hold one that was not seen already: a batch-norm's output (its statistics
  // and γ, β are checked), the output of a node that drops NaNs (its own input is
  // scanned where needed), and flatten/dropout/stochastic depth/add/concat of such tensors (finite inputs give
  // no NaN there). What is left to scan is where a NaN can be born and then dropped: the
  // input images, and conv (without a fused ReLU), linear, avgpool or add outputs
  // feeding a ReLU or max-pool. Each tensor once.
  const std::function<bool(int)> covered = [&](int t) {
    if (t == 0) return false;
    const Node& p = graph_.nodes[static_cast<size_t>(t - 1)];
    switch (p.op) {
      case Op::bn: case Op::relu: case Op::maxpool: return true;
      case Op::conv: return p.fused_relu;
      case Op::flatten: case Op::dropout: case Op::stochastic_depth: return covered(p.inputs[0]);
      case Op::add: case Op::concat: return std::all_of(p.inputs.begin(), p.inputs.end(), covered);
      default: return false;
    }
  };
  nan_covered_.resize(static_cast<size_t>(graph_.tensor_count()));
  for (int t = 0; t < graph_.tensor_count(); ++t) nan_covered_[static_cast<size_t>(t)] = covered(t);
  nan_checks_.resize(graph_.nodes.size());
  std::vector<bool> scanned(static_cast<size_t>(graph_.tensor_count()), false);
  for (const Node& node : graph_.nodes) {
    const bool drops = (node.op == Op::relu && !node.fused_relu) || node.op == Op::maxpool ||
                       (node.op == Op::conv && node.fused_relu);
    if (!drops || node.inputs.empty()) continue;
    const int t = node.inputs[0];
    if (covered(t) || scanned[static_cast<size_t>(t)]) continue;
    scanned[static_cast<size_t>(t)] = true;
    nan_checks_[static_cast<size_t>(node.index)].push_back(t);
  }
  // CNNSCALE_NAN_GUARD=off: no scans (bench/nan-guard-cost.sh measures what they cost).
  if (const char* g = std::getenv("CNNSCALE_NAN_GUARD"); g && std::string(g) == "off") {
    nan_checks_.assign(nan_checks_.size(), {});
    scan_grads_ = false;
  }
  if (const char* e = std::getenv("CNNSCALE_TEST_NAN"); e && *e) {
    long long step = -1;
    int node = -2;
    const bool grad = std::sscanf(e, "%lld:g%d", &step, &node) == 2;
    if ((!grad && std::sscanf(e, "%lld:%d", &step, &node) != 2) || step < 0 || node < (grad ? 0 : -1) ||
        node >= static_cast<int>(graph_.nodes.size()) ||
        (grad && graph_.nodes[static_cast<size_t>(node)].flat_end == graph_.nodes[static_cast<size_t>(node)].flat_begin))
      fail("CNNSCALE_TEST_NAN='", e, "' is not STEP:NODE with -1 (the input images) <= NODE < ", graph_.nodes.size(),
           ", or STEP:gNODE with NODE a layer that has parameters (a test hook: unset it)");
    test_nan_step_ = step;
    (grad ? test_nan_grad_node_ : test_nan_node_) = node;
  }
}

bool Net::adopt_grad_storage(float* grads) {
  if (!grads) return false;
  const size_t bytes = std::max<size_t>(graph_.param_count, 1) * sizeof(float);
  std::memcpy(grads, grads_.data(), bytes);
  grads_.adopt(grads, bytes);
  plans_.clear();  // plans point at the old buffer; prepare() builds them again
  return true;
}

void Net::release_step_memory() {
  for (auto& [n, plan] : plans_) {
    plan->grad_arena.release_pages();
    plan->transients.release_pages();
    for (auto& t : plan->tensors) {
      t->data.release_pages();
      t->diff.release_pages();
      t->scratch.release_pages();
    }
  }
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
  plan->tensors[0]->dims = in.volume() ? std::vector<int64_t>{n, in.channels, in.depth, in.height, in.width}
                                       : std::vector<int64_t>{n, in.channels, in.height, in.width};
  plan->tensors[0]->needs_diff = false;
  for (const Node& node : graph_.nodes) {
    for (int t : node.inputs) {
      plan->tensors[t]->consumers++;
      plan->tensors[t]->last_consumer = node.index;
    }
    Tensor& o = *plan->tensors[node.index + 1];
    o.dims = batch_dims(n, node.out);
  }
  const size_t owned_before = Buffer::owned_total();
  plan_gradients(*plan);
  plan->tensors[0]->alloc(plain_md(plan->tensors[0]->dims), eng_);
  Transients transients;
  ExecEnv env{eng_, n, precision_, params_.f(), grads_.f(), &graph_, &transients};
  for (const Node& node : graph_.nodes) {
    transients.node = node.index;
    std::vector<Tensor*> ins;
    for (int t : node.inputs) ins.push_back(plan->tensors[t].get());
    Tensor* fused = node.writes_next_relu() ? plan->tensors[node.index + 2].get() : nullptr;
    // maxpool after a fused relu: the relu's input (the conv output), whose gradient it writes.
    if (node.op == Op::maxpool && node.relu_into_pool) fused = plan->tensors[graph_.nodes[node.inputs[0] - 1].inputs[0]].get();
    plan->execs.push_back(make_exec(node, ins, plan->tensors[node.index + 1].get(), env, fused));
  }
  const Tensor& out = *plan->tensors[graph_.output];
  if (out.md != plain_md(out.dims)) {
    if (!graph_.dense_output) throw std::logic_error("Net: logits are not in the plain layout");
    const md_t plain = plain_md(out.dims);
    plan->plain_out.resize(plain.get_size());
    plan->plain_dz.resize(plain.get_size());
    plan->plain_out_mem = dnnl::memory(plain, eng_, plan->plain_out.data());
    plan->plain_dz_mem = dnnl::memory(plain, eng_, plan->plain_dz.data());
    plan->to_plain = dnnl::reorder(out.mem, plan->plain_out_mem);
    plan->from_plain = dnnl::reorder(plan->plain_dz_mem, out.diff_mem);
  }
  // The transient region: each node's conversions one after another, sized by the
  // node that needs the most (nodes run one at a time).
  std::map<int, size_t> node_bytes;
  for (const auto& [k, cv] : transients.uses) node_bytes[k] += (cv->transient_bytes + 63) / 64 * 64;
  size_t region = 0;
  for (const auto& kb : node_bytes) region = std::max(region, kb.second);
  plan->transients.resize(region);
  node_bytes.clear();
  for (const auto& [k, cv] : transients.uses) {
    cv->out.set_data_handle(static_cast<char*>(plan->transients.data()) + node_bytes[k]);
    node_bytes[k] += (cv->transient_bytes + 63) / 64 * 64;
  }

  PlanMemory& m = plan->memory;
  size_t tensor_owned = plan->grad_arena.bytes();  // the transient region counts as a layer buffer
  for (const auto& t : plan->tensors) {
    m.activations += t->data.bytes();
    m.gradients += t->diff.bytes() + t->scratch.bytes();
    tensor_owned += t->data.bytes() + t->diff.bytes() + t->scratch.bytes();
    if (t->needs_diff && t->diff_slot && t->diff_ptr() != t->diff_slot && t->diff.bytes()) m.fallbacks++;
  }
  m.gradients += plan->grad_arena.bytes();
  m.layer_buffers = Buffer::owned_total() - owned_before - tensor_owned;
  m.weights = params_.bytes() + grads_.bytes();
  const char* verbose = std::getenv("CNNSCALE_PLAN_MEMORY");
  if (verbose && *verbose && std::string(verbose) != "0") {
    auto mib = [](size_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
    std::fprintf(stderr,
                 "cnnscale: plan memory %s batch %lld: activations %.1f MiB, gradients %.1f MiB (arena; peak live "
                 "%.1f MiB, one buffer each %.1f MiB, %d fallbacks), layer buffers %.1f MiB, weights+grads %.1f MiB\n",
                 name_.c_str(), static_cast<long long>(n), mib(m.activations), mib(m.gradients),
                 mib(m.gradients_peak_live), mib(m.gradients_unshared), m.fallbacks, mib(m.layer_buffers),
                 mib(m.weights));
  }
  return plan;
}

const PlanMemory& Net::plan_memory(int64_t n) const {
  auto it = plans_.find(n);
  if (it == plans_.end()) throw std::logic_error("Net::plan_memory: no plan for this batch size (prepare first)");
  return it->second->memory;
}

// Gradient arena (exec.hpp, PlanMemory): every gradient is an item live over the node
// range [producer, last reader] (backward runs the nodes in reverse, so the last reader
// writes it first and the producer reads it last; the logits' gradient is written by the
// loss, after every node). Tensors that the layers make share one gradient buffer (conv +
// fused relu, in-place relu/add, a flatten view) are one item over the union of their
// ranges; the scratch of a tensor read twice is an item over its non-last readers. Items
// are placed greedily, largest first (equal sizes by range start), at the lowest offset
// that no item with an overlapping range occupies. Sizes are bounded from the shape and type
// alone (channels padded to 16, as oneDNN's blocked layouts); a layout larger than that
// falls back to its own buffer (PlanMemory::fallbacks). Reuse only changes where bytes
// live: every gradient is written whole before it is read, so results are bit-identical
// to one buffer each.
void Net::plan_gradients(Plan& plan) {
  const int T = graph_.tensor_count();
  const int K = static_cast<int>(graph_.nodes.size());
  std::vector<int> parent(T);
  for (int t = 0; t < T; ++t) parent[t] = t;
  std::function<int(int)> root = [&](int t) { return parent[t] == t ? t : parent[t] = root(parent[t]); };
  auto unite = [&](int a, int b) { parent[root(a)] = root(b); };
  std::vector<std::vector<int>> readers(T);
  for (const Node& node : graph_.nodes)
    for (int t : node.inputs) readers[t].push_back(node.index);
  for (const Node& node : graph_.nodes) {
    const int o = node.index + 1;
    if (node.writes_next_relu()) unite(o, o + 1);
    if (node.in_place) unite(node.inputs[0], o);
    if (node.op == Op::flatten && readers[node.inputs[0]].size() == 1 && plan.tensors[node.inputs[0]]->needs_diff)
      unite(node.inputs[0], o);
  }
  // Element bytes per tensor: under bf16 the activations are bf16 from the first
  // convolution on (exec.hpp's layers keep their input's type), except what dropout and
  // linear write (f32); the input images are f32.
  std::vector<size_t> esize(static_cast<size_t>(T), sizeof(float));
  for (const Node& node : graph_.nodes) {
    size_t& e = esize[static_cast<size_t>(node.index + 1)];
    switch (node.op) {
      case Op::conv: case Op::deconv: e = precision_ == Precision::bf16 ? 2 : 4; break;
      case Op::dropout: case Op::linear: case Op::mul: case Op::concat: case Op::layernorm: case Op::layer_scale:
      case Op::channel_slice: case Op::channel_shuffle: case Op::adaptive_avgpool: case Op::upsample:
        e = 4;
        break;
      default: e = esize[static_cast<size_t>(node.inputs[0])];
    }
  }
  auto bound = [&](int ti) {
    const Tensor& t = *plan.tensors[static_cast<size_t>(ti)];
    size_t e = esize[static_cast<size_t>(ti)];
    for (size_t i = 0; i < t.dims.size(); ++i)
      e *= static_cast<size_t>(i == 1 && t.dims.size() >= 4 ? (t.dims[i] + 15) / 16 * 16 : t.dims[i]);
    return (e + 63) / 64 * 64;
  };
  struct Item {
    size_t bytes = 0, offset = 0;
    int begin = 0, end = 0;
    int tensor = -1;  // scratch: that tensor's; gradient: -1 (the group's root is the key)
  };
  std::map<int, Item> groups;  // by root tensor
  std::vector<Item> items;
  for (int t = 1; t < T; ++t) {
    const Tensor& x = *plan.tensors[t];
    if (!x.needs_diff) continue;
    const int begin = t - 1, end = readers[t].empty() ? K : readers[t].back();
    auto [it, fresh] = groups.try_emplace(root(t));
    Item& g = it->second;
    g.bytes = std::max(g.bytes, bound(t));
    g.begin = fresh ? begin : std::min(g.begin, begin);
    g.end = fresh ? end : std::max(g.end, end);
    if (readers[t].size() > 1) {
      Item s;
      s.bytes = bound(t);
      s.begin = readers[t].front();
      s.end = readers[t][readers[t].size() - 2];
      s.tensor = t;
      items.push_back(s);
    }
  }
  const size_t first_group = items.size();
  for (const auto& rg : groups) items.push_back(rg.second);
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Largest first; among equal sizes by range start (for same-size items this is the
  // interval-graph greedy, which needs no more slots than items live at once).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return items[a].bytes != items[b].bytes ? items[a].bytes > items[b].bytes : items[a].begin < items[b].begin;
  });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t i : order) {
    Item& it = items[i];
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping placed items
    for (size_t j : placed)
      if (items[j].begin <= it.end && it.begin <= items[j].end)
        busy.push_back({items[j].offset, items[j].offset + items[j].bytes});
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [b, e] : busy) {
      if (off + it.bytes <= b) break;
      off = std::max(off, e);
    }
    it.offset = off;
    total = std::max(total, off + it.bytes);
    placed.push_back(i);
  }
  PlanMemory& m = plan.memory;
  for (int k = 0; k <= K; ++k) {
    size_t live = 0;
    for (const Item& it : items)
      if (it.begin <= k && k <= it.end) live += it.bytes;
    m.gradients_peak_live = std::max(m.gradients_peak_live, live);
  }
  for (const Item& it : items) m.gradients_unshared += it.bytes;
  plan.grad_arena.resize(total);
  char* base = static_cast<char*>(plan.grad_arena.data());
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    if (i < first_group) {
      Tensor& x = *plan.tensors[it.tensor];
      x.scratch_slot = base + it.offset;
      x.scratch_slot_bytes = it.bytes;
    }
  }
  for (int t = 1; t < T; ++t) {
    Tensor& x = *plan.tensors[t];
    if (!x.needs_diff) continue;
    const size_t g = first_group + static_cast<size_t>(std::distance(groups.begin(), groups.find(root(t))));
    x.diff_slot = base + items[g].offset;
    x.diff_slot_bytes = items[g].bytes;
  }
}

void Net::test_nan(Plan& plan, int node) {
  set_first_nan(*plan.tensors[static_cast<size_t>(node + 1)]);
  const std::string what = node < 0 ? std::string("the input images")
                                    : "the output of layer " + std::to_string(node) + " (" +
                                          op_name(graph_.nodes[static_cast<size_t>(node)].op) + ")";
  std::fprintf(stderr, "CNNSCALE_TEST_NAN: a NaN written into %s at step %lld%s\n", what.c_str(),
               static_cast<long long>(test_nan_step_),
               nan_covered_[static_cast<size_t>(node + 1)] ? " (covered: it cannot hold a NaN its inputs did not)" : "");
}

void Net::capture(Plan& plan, size_t k) {
  captured_.resize(graph_.nodes.size());
  const Tensor& t = *plan.tensors[k + 1];
  const md_t plain = plain_md(t.dims);
  std::vector<float>& v = captured_[k];
  v.assign(plain.get_size() / sizeof(float), 0.f);
  dnnl::memory src(t.md, eng_, t.mem.get_data_handle()), dst(plain, eng_, v.data());
  dnnl::reorder(src, dst).execute(stream_, src, dst);
  stream_.wait();
}

double Net::forward_backward(const float* images, const Targets& targets, int64_t n, const StepContext& ctx,
                             const GradReadyFn& on_ready) {
  if (n <= 0) fail("forward_backward: empty batch");
  Plan& plan = plan_for(n);
  RunCtx c{&stream_, &ctx, n, ctx.training};
  Tensor& x = *plan.tensors[0];
  std::memcpy(x.data.data(), images, static_cast<size_t>(n * graph_.input.numel()) * sizeof(float));
  non_finite_where_.clear();
  const auto op_text = [&](size_t k) { return "layer " + std::to_string(k) + " (" + op_name(graph_.nodes[k].op) + ")"; };
  if (test_nan_node_ == -1 && ctx.step == test_nan_step_) test_nan(plan, -1);
  for (size_t k = 0; k < plan.execs.size(); ++k) {
    if (non_finite_where_.empty())
      for (int t : nan_checks_[k])
        if (tensor_has_nan(*plan.tensors[static_cast<size_t>(t)]))
          non_finite_where_ = "a NaN in the input of " + op_text(k) +
                              (t == 0 ? " (the input images)" : ", the output of " + op_text(static_cast<size_t>(t - 1)));
    plan.execs[k]->forward(c);
    if (capture_) capture(plan, k);
    if (static_cast<int>(k) == test_nan_node_ && ctx.step == test_nan_step_) test_nan(plan, static_cast<int>(k));
    if (non_finite_where_.empty() && plan.execs[k]->saw_non_finite())
      non_finite_where_ = "a NaN or Inf in the input of " + op_text(k) + " (its batch statistics are not finite)";
  }

  // The loss and d(Σ terms)/d(output) × loss_scale, from the task (nn/task.hpp), on the
  // plain f32 N×C(×H×W) logits (a dense output in another layout: through plain copies).
  Tensor& out = *plan.tensors[graph_.output];
  const bool convert = plan.plain_out.bytes() > 0;
  if (convert) {
    plan.to_plain.execute(stream_, out.mem, plan.plain_out_mem);
    stream_.wait();
  }
  const double total = task_->loss_and_grad(convert ? plan.plain_out.f() : out.data_ptr(), targets, n,
                                            ctx.loss_scale, convert ? plan.plain_dz.f() : out.diff_ptr());
  if (convert) {
    plan.from_plain.execute(stream_, plan.plain_dz_mem, out.diff_mem);
    stream_.wait();
  }

  size_t reported = 0;
  if (on_ready) on_ready(0);  // backward begins
  for (size_t k = plan.execs.size(); k-- > 0;) {
    const Node& node = graph_.nodes[k];
    plan.execs[k]->backward_params(c);
    if (static_cast<int>(k) == test_nan_grad_node_ && ctx.step == test_nan_step_) {
      grads_.f()[node.flat_begin] = std::numeric_limits<float>::quiet_NaN();
      std::fprintf(stderr, "CNNSCALE_TEST_NAN: a NaN written into the parameter gradients of %s at step %lld\n",
                   op_text(k).c_str(), static_cast<long long>(ctx.step));
    }
    // A NaN/Inf born in backward: this node's parameter gradients, scanned now while
    // they are in cache and before any other thread sums them (issue 28 item 2; the
    // step agreement then stops or skips the step on every rank).
    if (scan_grads_ && non_finite_where_.empty() && node.flat_end > node.flat_begin &&
        !all_finite_f32(grads_.f() + node.flat_begin, node.flat_end - node.flat_begin))
      non_finite_where_ = "a NaN or Inf in the parameter gradients of " + op_text(k) + " (born in backward)";
    if (!node.params.empty() && node.flat_end > reported) {
      reported = node.flat_end;
      if (on_ready) on_ready(reported);
    }
    plan.execs[k]->backward_data(c);
  }
  if (reported < graph_.param_count && on_ready) on_ready(graph_.param_count);
  // A NaN that a ReLU or max-pool dropped: the loss PyTorch would have computed.
  return non_finite_where_.empty() ? total : std::numeric_limits<double>::quiet_NaN();
}

void Net::forward_eval(const float* images, int64_t n, float* logits) {
  if (n <= 0) return;
  if (max_batch_ == 0) prepare(std::min<int64_t>(n, 256), precision_);
  Plan& plan = plan_for(max_batch_);
  StepContext ctx;
  ctx.training = false;
  RunCtx c{&stream_, &ctx, max_batch_, false};
  const int64_t per = graph_.input.numel();
  const int64_t C = graph_.output_numel();  // per sample: classes (dense: classes × H × W)
  Tensor& x = *plan.tensors[0];
  const Tensor& out = *plan.tensors[graph_.output];
  const bool convert = plan.plain_out.bytes() > 0;
  for (int64_t off = 0; off < n; off += max_batch_) {
    const int64_t m = std::min(max_batch_, n - off);
    std::memcpy(x.data.data(), images + off * per, static_cast<size_t>(m * per) * sizeof(float));
    if (m < max_batch_)
      std::memset(x.data.f() + m * per, 0, static_cast<size_t>((max_batch_ - m) * per) * sizeof(float));
    for (auto& e : plan.execs) e->forward_eval(c);
    if (convert) {
      plan.to_plain.execute(stream_, {{DNNL_ARG_FROM, out.mem}, {DNNL_ARG_TO, plan.plain_out_mem}});
      stream_.wait();
    }
    std::memcpy(logits + off * C, convert ? plan.plain_out.f() : out.data_ptr(),
                static_cast<size_t>(m * C) * sizeof(float));
  }
}

void Net::init_params(uint64_t seed) {
  for (const auto& p : graph_.params) init_param(p, seed, params_.f() + p.info.offset);
}

}  // namespace cnnscale::nn
