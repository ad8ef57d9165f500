// task.hpp — what a model's outputs are trained to be: the targets of a batch, the loss
// with its gradient, and the evaluation numbers. The one place that knows a task by
// name: the model calls loss_and_grad after its forward, the trainer asks for the
// denominator and the evaluation sums, and neither knows which loss it is.
//
// Losses are PyTorch's (torch.nn.functional), reduction 'mean', exactly:
//   cross-entropy    l_i = -w[y_i] · log softmax(z_i)[y_i], mean = Σ l_i / Σ w[y_i] over
//                    samples whose label is not --ignore-index (weight, ignore_index as
//                    F.cross_entropy's; without either, Σ w = N); segmentation: the same per
//                    pixel, z N×C×H×W and y N×H×W as F.cross_entropy takes them, the mean over
//                    the N·H·W pixels (or their weights)
//   mse              Σ (z - y)² / (N·K)
//   l1               Σ |z - y| / (N·K)         (gradient sign(z - y), 0 where equal, as torch)
//   smooth-l1        Σ s(z - y) / (N·K), s(d) = 0.5·d²/β for |d| < β else |d| - 0.5·β (β = 1)
//   bce-with-logits  Σ w[k]·(max(z,0) - z·y + log(1 + e^-|z|)) / (N·K) (weight broadcast over
//                    the K outputs, as F.binary_cross_entropy_with_logits' weight of size K)
// Exact data parallelism: a rank's loss_and_grad returns the SUM of its samples' loss
// terms and writes d(Σ terms)/dz × scale; the denominator of the mean is a sum over the
// global batch too (denominator()), so with scale = 1/(global denominator) the gradients
// summed over ranks are those of the global batch's mean. Where the denominator depends
// on the labels (class weights, ignore index: fixed_denominator() false) the trainer sums
// it over ranks before the step; otherwise it is N (per sample) and needs no collective.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/task_kind.hpp"

namespace cnnscale {

// One batch's targets, as the data set holds them.
struct Targets {
  const int32_t* labels = nullptr;  // classification: one class index per sample; segmentation: per pixel
  const float* values = nullptr;    // regression: K floats per sample; multi-label: K 0/1 values
  Targets() = default;
  // Class indices (the classification data sets; how every caller before tasks passed them).
  Targets(const int32_t* class_labels) : labels(class_labels) {}  // NOLINT: implicit on purpose
  static Targets of_values(const float* v) {
    Targets t;
    t.values = v;
    return t;
  }
};

enum class LossKind { cross_entropy, mse, l1, smooth_l1, bce_with_logits };

// "cross-entropy", "mse", "l1", "smooth-l1", "bce-with-logits"; parse_loss throws UserError
// naming the choices.
const char* loss_name(LossKind k);
LossKind parse_loss(const std::string& text);
// The data sets a loss trains on: cross-entropy class labels, bce-with-logits 0/1 targets,
// the others float targets.
TaskKind loss_task(LossKind k);
// The loss a data set of this task trains with unless --loss says otherwise.
LossKind default_loss(TaskKind k);

// --class-weights "1,2.5,0.5": UserError naming what is not a number ≥ 0.
std::vector<float> parse_class_weights(const std::string& text);

struct TaskOptions {
  LossKind loss = LossKind::cross_entropy;
  // cross-entropy: one weight per class (F.cross_entropy's weight); bce-with-logits: one per
  // output. Empty: all 1.
  std::vector<float> class_weights;
  // cross-entropy: samples of this label count neither in the loss nor in the denominator
  // (F.cross_entropy's ignore_index); -1: none. Classification: a class; segmentation: any label ≥ 0
  // (255, as torchvision's references, for pixels of no class, e.g. a padded crop's).
  int ignore_index = -1;
};

// Evaluation numbers, in the order they are shown; the first is the task's headline
// (accuracy, RMSE).
using Metrics = std::vector<std::pair<std::string, double>>;

class Task {
 public:
  // outputs: what the model emits per sample and position (classes, or K targets); pixels:
  // the positions per sample (segmentation: H·W, the outputs then C×H×W per sample; 1
  // otherwise). Throws UserError for options that do not fit (weights of another count, an
  // ignore index outside [0, outputs)).
  Task(TaskKind data, int outputs, TaskOptions options, int64_t pixels = 1);
  // Cross-entropy over class labels, no weights: what every model trained before tasks.
  static Task classification(int classes) { return Task(TaskKind::classification, classes, {}); }

  TaskKind kind() const { return kind_; }
  LossKind loss() const { return opt_.loss; }
  int outputs() const { return outputs_; }
  // The positions per sample (segmentation: pixels) and so the loss's terms per sample when
  // the denominator is fixed: the trainer's loss_scale is 1 / (global batch × this).
  int64_t pixels() const { return pixels_; }
  const TaskOptions& options() const { return opt_; }
  // The plain cross-entropy of the classification data sets (what the GPU model computes
  // on the device).
  bool plain_cross_entropy() const;
  // One line for logs and run.json: "cross-entropy", "mse over 4 targets",
  // "cross-entropy (class weights 1,2,0.5; ignore index 3)".
  std::string describe() const;

  // Checks a batch's targets (labels in [0, outputs), values finite; UserError naming
  // sample i otherwise), returns Σ of the samples' loss terms and writes
  // dz = d(Σ terms)/dz × scale (n × outputs floats; may alias nothing).
  double loss_and_grad(const float* z, const Targets& t, int64_t n, float scale, float* dz) const;
  // The batch's share of the mean's denominator (see above).
  double denominator(const Targets& t, int64_t n) const;
  bool fixed_denominator() const;

  // Evaluation: sums over samples (add them over ranks elementwise), then the numbers.
  size_t eval_sum_count() const;
  void eval_accumulate(const float* z, const Targets& t, int64_t n, std::vector<double>& sums) const;
  Metrics eval_metrics(const std::vector<double>& sums) const;
  // The mean loss of the sums above (the same definition as training's).
  double eval_loss(const std::vector<double>& sums) const;

 private:
  void check(const Targets& t, int64_t n) const;
  double term(const float* z, const Targets& t, int64_t i, float scale, float* dz) const;
  double weight_of(int32_t label) const;  // cross-entropy: the label's weight, 0 for --ignore-index
  TaskKind kind_;
  int outputs_;
  int64_t pixels_ = 1;
  TaskOptions opt_;
};

}  // namespace cnnscale
