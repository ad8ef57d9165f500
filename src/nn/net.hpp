// net.hpp — Net: the Model implementation that runs a Graph on the CPU through oneDNN.
// Owns the flat parameter/gradient buffers and one Plan (tensors + primitives) per
// batch size, created once and reused; evaluation runs on the training plan (padded).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/exec.hpp"
#include "nn/graph.hpp"
#include "nn/model.hpp"

namespace cnnscale::nn {

// What a plan holds (bytes, for one batch size), computed as it is built. Gradients
// (and the scratch of tensors read twice) live in one arena where tensors whose backward
// lifetimes do not overlap share bytes: a tensor's gradient is live from the backward of
// its last reader (which writes it first) to its producer's backward (which reads it last).
struct PlanMemory {
  size_t activations = 0;          // activation data (in-place relu/add share their input's)
  size_t gradients = 0;            // the gradient arena + gradient/scratch buffers outside it
  size_t gradients_peak_live = 0;  // most gradient+scratch bytes live at one backward step:
                                   // a lower bound for any assignment
  size_t gradients_unshared = 0;   // one buffer per gradient and scratch (no reuse), for reference
  size_t layer_buffers = 0;        // owned by the layers: layout/precision conversions (the
                                   // node-local ones in one shared region), pooling
                                   // workspaces, dropout masks, batch-norm statistics
  size_t weights = 0;              // parameters + their gradients (Net's flat buffers)
  int fallbacks = 0;               // gradients whose layout did not fit their slot (own buffer)
};

class Net : public Model {
 public:
  // task: null for cross-entropy over the graph's classes (ModelOptions::task).
  Net(Graph graph, std::string name, std::string spec, std::string identity = {},
      std::shared_ptr<const Task> task = nullptr);
  std::string name() const override { return name_; }
  std::string spec() const override { return spec_; }
  std::string identity() const override { return identity_.empty() ? spec_ : identity_; }
  const std::vector<ParamInfo>& params() const override { return graph_.infos; }
  float* param_data() override { return params_.f(); }
  float* grad_data() override { return grads_.f(); }
  size_t param_count() const override { return graph_.param_count; }
  int classes() const override { return graph_.classes; }
  void prepare(int64_t max_batch, Precision precision) override;
  double forward_backward(const float* images, const Targets& targets, int64_t n, const StepContext& ctx,
                          const GradReadyFn& on_ready) override;
  void forward_eval(const float* images, int64_t n, float* logits) override;
  void init_params(uint64_t seed) override;
  bool adopt_grad_storage(float* grads) override;
  void release_step_memory() override;
  std::string non_finite_where() const override { return non_finite_where_; }

  const Graph& graph() const { return graph_; }
  // The memory of the plan for batch size n (built by prepare / forward_backward);
  // CNNSCALE_PLAN_MEMORY=1 prints it to stderr when a plan is built.
  const PlanMemory& plan_memory(int64_t n) const;
  // Tests (the torch cross-checks, tests/nn/torch_reference.py): when on, every training
  // forward keeps a plain-layout f32 copy of each node's output as it was right after
  // that node ran (a fused conv's or batch-norm's output is its ReLU's), so that a
  // reference can follow this forward's own decisions where they are ties in float32
  // (a ReLU input or a max-pool pair within rounding of each other). Off: no cost.
  void set_capture(bool on) { capture_ = on; }
  const std::vector<float>& captured(int node) const { return captured_.at(static_cast<size_t>(node)); }

 private:
  struct Plan {
    int64_t n = 0;
    Buffer grad_arena;  // declared before the tensors and execs, which point into them
    Buffer transients;  // node-local conversions (exec.hpp, Transients)
    std::vector<std::unique_ptr<Tensor>> tensors;
    std::vector<std::unique_ptr<Exec>> execs;
    PlanMemory memory;
    // A dense output (segmentation) in a layout other than plain f32 NCHW (a conv's
    // blocked or bf16 output): the task reads it and writes its gradient in plain copies.
    // The two reorders are made once with the plan, not per step.
    Buffer plain_out, plain_dz;
    dnnl::memory plain_out_mem, plain_dz_mem;
    dnnl::reorder to_plain, from_plain;  // logits → plain_out; plain_dz → the logits' gradient
  };
  Plan& plan_for(int64_t n);
  std::unique_ptr<Plan> build_plan(int64_t n);
  void plan_gradients(Plan& plan);

  Graph graph_;
  std::string name_, spec_, identity_;
  std::shared_ptr<const Task> task_;
  Buffer params_, grads_;
  dnnl::engine eng_;
  dnnl::stream stream_;
  Precision precision_ = Precision::fp32;
  int64_t max_batch_ = 0;
  std::map<int64_t, std::unique_ptr<Plan>> plans_;
  bool capture_ = false;
  std::vector<std::vector<float>> captured_;  // by node, when capture_
  // NaN guard (issue 28 item 2): oneDNN's ReLU (alone or fused into a conv) and max-pool
  // turn a NaN input into 0 or step over it, where PyTorch propagates it. Before node k
  // runs forward, the tensors nan_checks_[k] are scanned (its input, when k drops NaN and
  // the input is not a batch-norm's output: a batch-norm reports a NaN/Inf input through
  // its statistics, Exec::saw_non_finite). Cost: docs/performance.md.
  std::vector<std::vector<int>> nan_checks_;
  std::vector<bool> nan_covered_;  // per tensor: cannot hold a NaN its inputs did not (net.cpp)
  std::string non_finite_where_;
  bool scan_grads_ = true;  // each node's parameter gradients, right after its backward
  // CNNSCALE_TEST_NAN=STEP:NODE (tests only): after node NODE's forward at optimiser
  // step STEP (0-based), its output's first element becomes NaN (NODE -1: the input
  // images, before the first node); a line on stderr says where, and whether that
  // tensor is covered (a NaN cannot arise there by itself).
  void test_nan(Plan& plan, int node);
  void capture(Plan& plan, size_t node);
  int64_t test_nan_step_ = -1;
  int test_nan_node_ = -2;       // -2: none
  int test_nan_grad_node_ = -2;  // STEP:gNODE: into node NODE's parameter gradients, after its backward
};

}  // namespace cnnscale::nn
