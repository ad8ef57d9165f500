// task.cpp — the losses (PyTorch's definitions, reduction 'mean'), their gradients and the
// evaluation numbers per task. Sums in double, as the softmax cross-entropy always was.
#include "nn/task.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/error.hpp"

namespace cnnscale {

namespace {

constexpr LossKind kLosses[] = {LossKind::cross_entropy, LossKind::mse, LossKind::l1, LossKind::smooth_l1,
                                LossKind::bce_with_logits};

std::string loss_choices() {
  std::string s;
  for (LossKind k : kLosses) s += (s.empty() ? "" : ", ") + std::string(loss_name(k));
  return s;
}

double sign(double d) { return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0; }

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g", v);
  return b;
}

}  // namespace

const char* loss_name(LossKind k) {
  switch (k) {
    case LossKind::cross_entropy: return "cross-entropy";
    case LossKind::mse: return "mse";
    case LossKind::l1: return "l1";
    case LossKind::smooth_l1: return "smooth-l1";
    case LossKind::bce_with_logits: return "bce-with-logits";
  }
  return "?";
}

LossKind parse_loss(const std::string& text) {
  for (LossKind k : kLosses)
    if (text == loss_name(k)) return k;
  fail("--loss '", text, "' is not a loss cnnscale knows; choose one of ", loss_choices());
}

TaskKind loss_task(LossKind k) {
  switch (k) {
    case LossKind::cross_entropy: return TaskKind::classification;
    case LossKind::bce_with_logits: return TaskKind::multilabel;
    default: return TaskKind::regression;
  }
}

LossKind default_loss(TaskKind k) {
  switch (k) {
    case TaskKind::classification: return LossKind::cross_entropy;
    case TaskKind::regression: return LossKind::mse;
    case TaskKind::multilabel: return LossKind::bce_with_logits;
    case TaskKind::segmentation: return LossKind::cross_entropy;
  }
  return LossKind::cross_entropy;
}

std::vector<float> parse_class_weights(const std::string& text) {
  std::vector<float> w;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    char* end = nullptr;
    const double v = item.empty() ? -1 : std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 3.4e38)
      fail("--class-weights '", text, "': '", item, "' is not a weight; give numbers ≥ 0 separated by commas, one per ",
           "class (e.g. 1,2.5,0.5)");
    w.push_back(static_cast<float>(v));
    if (comma == std::string::npos) return w;
    at = comma + 1;
  }
}

Task::Task(TaskKind data, int outputs, TaskOptions options, int64_t pixels)
    : kind_(data), outputs_(outputs), pixels_(pixels), opt_(std::move(options)) {
  if (outputs_ < 1) fail("a task needs at least one output per sample (got ", outputs_, ")");
  if (pixels_ < 1 || (kind_ != TaskKind::segmentation && pixels_ != 1))
    internal_error("a ", task_name(kind_), " task of ", pixels_, " positions per sample");
  const LossKind l = opt_.loss;
  if (kind_ == TaskKind::segmentation && l != LossKind::cross_entropy)
    fail("--loss ", loss_name(l), " does not train label maps; a segmentation data set trains with cross-entropy ",
         "per pixel (leave out --loss)");
  // bce-with-logits also trains on 0/1 float targets that a regression data set holds.
  const bool fits = loss_task(l) == kind_ || kind_ == TaskKind::segmentation || (l == LossKind::bce_with_logits && kind_ == TaskKind::regression) ||
                    (kind_ == TaskKind::multilabel && l != LossKind::cross_entropy);
  if (!fits) {
    if (kind_ == TaskKind::classification)
      fail("--loss ", loss_name(l), " needs float targets per sample, but this data set holds class labels (",
           task_name(kind_), "); train it with --loss cross-entropy, or prep float targets with `cnnscale prep ",
           "--targets DATASET` for a regression");
    fail("--loss ", loss_name(l), " needs class labels, but this data set holds ", outputs_, " float target",
         outputs_ == 1 ? "" : "s", " per sample (", task_name(kind_), "); choose one of mse, l1, smooth-l1, ",
         "bce-with-logits");
  }
  if (!opt_.class_weights.empty()) {
    if (l != LossKind::cross_entropy && l != LossKind::bce_with_logits)
      fail("--class-weights applies to cross-entropy and bce-with-logits, not to --loss ", loss_name(l));
    if (static_cast<int>(opt_.class_weights.size()) != outputs_)
      fail("--class-weights lists ", opt_.class_weights.size(), " weights but the model has ", outputs_,
           l == LossKind::cross_entropy ? " classes" : " outputs", "; give one weight per ",
           l == LossKind::cross_entropy ? "class" : "output");
    for (float w : opt_.class_weights)
      if (!std::isfinite(w) || w < 0) fail("--class-weights: ", number(w), " is not a finite weight ≥ 0");
  }
  if (opt_.ignore_index >= 0) {
    if (l != LossKind::cross_entropy) fail("--ignore-index applies to cross-entropy only, not to --loss ", loss_name(l));
    // Segmentation: any label (torchvision's references use 255 for pixels that belong to no
    // class, such as a padded crop's); classification: one of the classes (another would
    // ignore nothing: a typo).
    if (opt_.ignore_index >= outputs_ && kind_ != TaskKind::segmentation)
      fail("--ignore-index ", opt_.ignore_index, " is not a class of this data set (0..", outputs_ - 1, ")");
  }
}

bool Task::plain_cross_entropy() const {
  return kind_ == TaskKind::classification && opt_.loss == LossKind::cross_entropy && opt_.class_weights.empty() &&
         opt_.ignore_index < 0;
}

std::string Task::describe() const {
  std::string s = loss_name(opt_.loss);
  if (kind_ == TaskKind::segmentation) {
    s += " over " + std::to_string(outputs_) + " classes per pixel";
  } else if (kind_ != TaskKind::classification) {
    s += " over ";
    s += std::to_string(outputs_);
    s += outputs_ == 1 ? " target" : " targets";
  }
  std::string extra;
  for (size_t i = 0; i < opt_.class_weights.size(); ++i) {
    extra += i ? "," : "class weights ";
    extra += number(opt_.class_weights[i]);
  }
  if (opt_.ignore_index >= 0) {
    if (!extra.empty()) extra += "; ";
    extra += "ignore index ";
    extra += std::to_string(opt_.ignore_index);
  }
  return extra.empty() ? s : s + " (" + extra + ")";
}

bool Task::fixed_denominator() const {
  return !(opt_.loss == LossKind::cross_entropy && (!opt_.class_weights.empty() || opt_.ignore_index >= 0));
}

double Task::weight_of(int32_t y) const {
  if (y == opt_.ignore_index) return 0.0;
  return opt_.class_weights.empty() ? 1.0 : static_cast<double>(opt_.class_weights[static_cast<size_t>(y)]);
}

double Task::denominator(const Targets& t, int64_t n) const {
  if (fixed_denominator()) return static_cast<double>(n * pixels_);
  double s = 0;
  for (int64_t i = 0; i < n * pixels_; ++i) s += weight_of(t.labels[i]);
  return s;
}

void Task::check(const Targets& t, int64_t n) const {
  const int K = outputs_;
  if (opt_.loss == LossKind::cross_entropy) {
    if (!t.labels) internal_error("cross-entropy without class labels");
    for (int64_t i = 0; i < n * pixels_; ++i)
      if ((t.labels[i] < 0 || t.labels[i] >= K) && t.labels[i] != opt_.ignore_index)
        fail("label ", t.labels[i], " of sample ", i / pixels_,
             pixels_ > 1 ? " (pixel " + std::to_string(i % pixels_) + ")" : std::string(), " is outside [0, ", K, ")");
    return;
  }
  if (!t.values) internal_error("--loss ", loss_name(opt_.loss), " without float targets");
  for (int64_t i = 0; i < n * K; ++i) {
    const float y = t.values[i];
    if (!std::isfinite(y)) fail("target ", i % K, " of sample ", i / K, " is not finite (", number(y), ")");
    if (opt_.loss == LossKind::bce_with_logits && (y < 0.f || y > 1.f))
      fail("target ", i % K, " of sample ", i / K, " is ", number(y),
           "; bce-with-logits takes targets in [0, 1] (probabilities or 0/1 labels)");
  }
}

// Sample i's loss term; with dz, also d(term)/dz × scale.
double Task::term(const float* z, const Targets& t, int64_t i, float scale, float* dz) const {
  const int K = outputs_;
  if (opt_.loss == LossKind::cross_entropy) {
    // Per position p (one for classification): l = logsumexp(z) - z[y]; dl/dz = softmax(z) -
    // onehot(y), numerically stable; the classes of position p lie `P` floats apart.
    const int64_t P = pixels_;
    const float* zi = z + i * K * P;
    float* di = dz ? dz + i * K * P : nullptr;
    double term = 0;
    for (int64_t p = 0; p < P; ++p) {
      const int32_t y = t.labels[i * P + p];
      const double w = weight_of(y);
      double m = zi[p];
      for (int j = 1; j < K; ++j) m = std::max(m, static_cast<double>(zi[j * P + p]));
      double s = 0;
      for (int j = 0; j < K; ++j) s += std::exp(zi[j * P + p] - m);
      const double lse = m + std::log(s);
      if (di)
        for (int j = 0; j < K; ++j) {
          const double q = std::exp(static_cast<double>(zi[j * P + p]) - lse);
          di[j * P + p] = static_cast<float>(w * (q - (j == y ? 1.0 : 0.0)) * scale);
        }
      if (w != 0) term += w * (lse - zi[y * P + p]);
    }
    return term;
  }
  const float* zi = z + i * K;
  float* di = dz ? dz + i * K : nullptr;
  const float* yi = t.values + i * K;
  const double inv_k = 1.0 / K;
  double sum = 0;
  for (int k = 0; k < K; ++k) {
    const double zk = zi[k], yk = yi[k], d = zk - yk;
    double l = 0, g = 0;
    switch (opt_.loss) {
      case LossKind::mse: l = d * d, g = 2 * d; break;
      case LossKind::l1: l = std::abs(d), g = sign(d); break;
      case LossKind::smooth_l1: {
        const double ad = std::abs(d);
        if (ad < 1.0) l = 0.5 * d * d, g = d;
        else l = ad - 0.5, g = sign(d);
        break;
      }
      case LossKind::bce_with_logits: {
        const double w = opt_.class_weights.empty() ? 1.0 : static_cast<double>(opt_.class_weights[static_cast<size_t>(k)]);
        l = w * (std::max(zk, 0.0) - zk * yk + std::log1p(std::exp(-std::abs(zk))));
        g = w * (1.0 / (1.0 + std::exp(-zk)) - yk);
        break;
      }
      case LossKind::cross_entropy: break;
    }
    sum += l;
    if (di) di[k] = static_cast<float>(g * inv_k * scale);
  }
  return sum * inv_k;
}

double Task::loss_and_grad(const float* z, const Targets& t, int64_t n, float scale, float* dz) const {
  check(t, n);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += term(z, t, i, scale, dz);
  return total;
}

// Sums: [0] samples, [1] Σ loss terms, [2] Σ denominator, then per task:
// classification and segmentation: [3] right, [4] counted (samples or pixels not of
// --ignore-index); segmentation also [5..5+C) intersections and [5+C..5+2C) unions per class;
// regression: [3..3+K) Σ|d| per target, [3+K..3+2K) Σ d²;
// multilabel: [3] elements right at the 0.5 threshold (logit 0).
size_t Task::eval_sum_count() const {
  switch (kind_) {
    case TaskKind::classification: return 5;
    case TaskKind::segmentation: return 5 + 2 * static_cast<size_t>(outputs_);
    case TaskKind::regression: return 3 + 2 * static_cast<size_t>(outputs_);
    case TaskKind::multilabel: return 4;
  }
  return 3;
}

void Task::eval_accumulate(const float* z, const Targets& t, int64_t n, std::vector<double>& sums) const {
  sums.resize(eval_sum_count(), 0.0);
  check(t, n);
  const int K = outputs_;
  sums[0] += static_cast<double>(n);
  const int64_t P = pixels_;
  for (int64_t i = 0; i < n; ++i) {
    sums[1] += term(z, t, i, 1.f, nullptr);
    const float* zi = z + i * K * P;
    switch (kind_) {
      case TaskKind::classification:
      case TaskKind::segmentation:
        for (int64_t p = 0; p < P; ++p) {
          const int32_t y = t.labels[i * P + p];
          sums[2] += fixed_denominator() ? 1.0 : weight_of(y);
          if (y == opt_.ignore_index) continue;  // neither right nor wrong
          int best = 0;  // the first of equal maxima, as torch.argmax
          for (int j = 1; j < K; ++j)
            if (zi[j * P + p] > zi[best * P + p]) best = j;
          sums[3] += best == y;
          sums[4] += 1;
          if (kind_ == TaskKind::segmentation) {
            sums[5 + static_cast<size_t>(y)] += best == y;                      // intersection of class y
            sums[5 + static_cast<size_t>(K + y)] += 1;                          // union: y's pixels ...
            if (best != y) sums[5 + static_cast<size_t>(K + best)] += 1;        // ... and best's wrong ones
          }
        }
        break;
      case TaskKind::regression:
        sums[2] += 1;
        for (int k = 0; k < K; ++k) {
          const double d = static_cast<double>(zi[k]) - t.values[i * K + k];
          sums[3 + static_cast<size_t>(k)] += std::abs(d);
          sums[3 + static_cast<size_t>(K + k)] += d * d;
        }
        break;
      case TaskKind::multilabel:
        sums[2] += 1;
        for (int k = 0; k < K; ++k) sums[3] += (zi[k] > 0.f) == (t.values[i * K + k] >= 0.5f);
        break;
    }
  }
}

double Task::eval_loss(const std::vector<double>& sums) const { return sums[2] > 0 ? sums[1] / sums[2] : 0.0; }

Metrics Task::eval_metrics(const std::vector<double>& sums) const {
  const double n = sums[0];
  const int K = outputs_;
  Metrics m;
  if (n <= 0) return m;
  switch (kind_) {
    case TaskKind::classification: m.emplace_back("accuracy", sums[4] > 0 ? sums[3] / sums[4] : 0.0); break;
    case TaskKind::segmentation: {  // mean IoU over the classes present in labels or predictions
      double iou = 0;
      int present = 0;
      for (int k = 0; k < K; ++k)
        if (const double u = sums[5 + static_cast<size_t>(K + k)]; u > 0) iou += sums[5 + static_cast<size_t>(k)] / u, ++present;
      m.emplace_back("miou", present ? iou / present : 0.0);
      m.emplace_back("pixel_accuracy", sums[4] > 0 ? sums[3] / sums[4] : 0.0);
      // Per class (files only): its IoU, for the classes in the labels or the predictions
      // (the others, left out of the mean above, have none).
      for (int k = 0; k < K; ++k)
        if (const double u = sums[5 + static_cast<size_t>(K + k)]; u > 0)
          m.emplace_back("iou_" + std::to_string(k), sums[5 + static_cast<size_t>(k)] / u);
      break;
    }
    case TaskKind::multilabel: m.emplace_back("accuracy", sums[3] / (n * K)); break;
    case TaskKind::regression: {
      double a = 0, s = 0;
      for (int k = 0; k < K; ++k) a += sums[3 + static_cast<size_t>(k)], s += sums[3 + static_cast<size_t>(K + k)];
      m.emplace_back("rmse", std::sqrt(s / (n * K)));
      m.emplace_back("mae", a / (n * K));
      if (K > 1)
        for (int k = 0; k < K; ++k) {
          m.emplace_back("rmse_" + std::to_string(k), std::sqrt(sums[3 + static_cast<size_t>(K + k)] / n));
          m.emplace_back("mae_" + std::to_string(k), sums[3 + static_cast<size_t>(k)] / n);
        }
      break;
    }
  }
  m.emplace_back("loss", eval_loss(sums));
  return m;
}

}  // namespace cnnscale
