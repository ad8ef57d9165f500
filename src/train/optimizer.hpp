// optimizer.hpp — parameter updates with PyTorch's exact semantics, on the model's
// flat buffers: SGD (momentum, dampening 0, Nesterov, L2 weight decay added to the
// gradient) and AdamW (decoupled weight decay). Non-trainable ranges (batch-norm
// running statistics) are never touched. State is flat too, for checkpoints.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "nn/model.hpp"

namespace cnnscale {

struct OptimizerOptions {
  std::string kind = "sgd";      // sgd | adamw
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool check_finite = true;      // host optimisers: wrote_finite() (off: CNNSCALE_NAN_GUARD=off)
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of params from grads (flat, n elements) at learning rate lr.
  virtual void step(float* params, const float* grads, double lr) = 0;
  virtual std::string kind() const = 0;
  // Named flat state buffers (e.g. "momentum_buffer", "exp_avg", "exp_avg_sq"), to
  // WRITE (a checkpoint being loaded, a broadcast). A device optimiser hands out host
  // copies and uploads them at commit_state() or, failing that, at the next step().
  virtual std::vector<std::pair<std::string, std::vector<float>*>> state() = 0;
  // The same buffers to READ (a checkpoint being written): a device optimiser copies
  // its state down and goes on from its device copy; nothing is uploaded again.
  virtual std::vector<std::pair<std::string, const std::vector<float>*>> state_view() {
    std::vector<std::pair<std::string, const std::vector<float>*>> out;
    for (auto& [name, buf] : state()) out.emplace_back(name, buf);
    return out;
  }
  // After writing state(): a device optimiser uploads it now (call it where no
  // collective is in flight; step() would otherwise wait for the stream it is on).
  virtual void commit_state() {}
  virtual long long steps_taken() const = 0;
  virtual void set_steps_taken(long long s) = 0;
  // After step(): false when a value it wrote (a parameter or a state element) is NaN or
  // ±Inf (issue 39 item 1). The host optimisers check as they write: one compare per
  // value in a loop bound by memory (docs/performance.md, "NaN guard"), none with
  // CNNSCALE_NAN_GUARD=off. The device optimiser does not check and says true: on the GPU
  // a NaN parameter reaches the next step's loss (cuDNN's ReLU and pooling propagate
  // NaN), and a checkpoint refuses it (train/checkpoint.hpp).
  virtual bool wrote_finite() const { return true; }
};

// The flat [begin, end) ranges an optimiser updates: trainable parameters only,
// merged where contiguous (batch-norm running statistics are left out).
std::vector<std::pair<size_t, size_t>> trainable_ranges(const std::vector<ParamInfo>& params);

// The per-step scalars of AdamW at step t (1-based) and learning rate lr, shared by
// the CPU and CUDA optimisers so that both compute exactly the same update:
//   p *= decay;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²;
//   p -= step_size · m / (√v · inv_sqrt_bc2 + eps)
struct AdamWScalars {
  float decay, b1, b2, step_size, inv_sqrt_bc2, eps;
};
AdamWScalars adamw_scalars(const OptimizerOptions& o, long long t, double lr);

// Throws UserError for an unknown kind or a bad value.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, const std::vector<ParamInfo>& params,
                                          size_t param_count);

// The optimiser for `model`'s parameters where they live: the CPU one above for a host
// model, the CUDA one on the model's stream for a device model (train/cuda_optimizer.hpp).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, Model& model);

}  // namespace cnnscale
