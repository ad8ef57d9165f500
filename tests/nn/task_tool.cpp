// task_tool — every loss of nn/task.hpp on random outputs and targets, written for
// task_torch.sh to recompute with torch.nn.functional: per case the loss kind, options,
// outputs z (n×K), targets, our mean loss (Σ terms / denominator), d(mean)/dz (scale =
// 1/denominator, as the trainer sets it) and the evaluation numbers. Also the rejections
// (a loss against a data set of the other kind, weights of the wrong count): exit 1 if one
// is accepted. Usage: task_tool OUT_DIR
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "nn/task.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {

void write_floats(std::ofstream& f, const char* key, const std::vector<float>& v) {
  f << key;
  char b[32];
  for (float x : v) std::snprintf(b, sizeof(b), " %.9g", x), f << b;
  f << "\n";
}

bool rejects(TaskKind kind, int outputs, TaskOptions o, const char* what) {
  try {
    Task t(kind, outputs, o);
  } catch (const UserError& e) {
    std::printf("rejected as it should (%s): %s\n", what, e.what());
    return true;
  }
  std::printf("FAIL: accepted %s\n", what);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: task_tool OUT_DIR\n"), 2;
  std::ofstream f(std::string(argv[1]) + "/cases.txt");
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  int cases = 0;
  const auto run = [&](TaskKind kind, int n, int K, TaskOptions o, int P = 1) {
    const Task task(kind, K, o, P);
    std::vector<float> z(static_cast<size_t>(n * K * P)), values, dz(z.size());
    std::vector<int32_t> labels;
    for (float& x : z) x = normal(rng);
    if (cases % 3 == 0 && K > 1) z[static_cast<size_t>(P)] = z[0];  // a tie: argmax takes the first, as torch.argmax
    Targets t;
    if (kind == TaskKind::classification || kind == TaskKind::segmentation) {
      for (int i = 0; i < n * P; ++i) labels.push_back(static_cast<int32_t>(rng() % static_cast<unsigned>(K)));
      t = Targets(labels.data());
    } else {
      for (int i = 0; i < n * K; ++i)
        values.push_back(kind == TaskKind::multilabel ? (o.loss == LossKind::bce_with_logits && i % 5 == 0 ? unit(rng)
                                                                                                          : float(rng() % 2))
                                                      : z[static_cast<size_t>(i)] + normal(rng) * (i % 2 ? 0.3f : 1.f));
      if (o.loss != LossKind::bce_with_logits && !values.empty()) values[0] = z[0];  // d = 0: sign 0, as torch
      t = Targets::of_values(values.data());
    }
    const double den = task.denominator(t, n);
    const double sum = task.loss_and_grad(z.data(), t, n, den > 0 ? static_cast<float>(1.0 / den) : 0.f, dz.data());
    std::vector<double> sums;
    task.eval_accumulate(z.data(), t, n, sums);
    f << "case " << loss_name(o.loss) << " " << task_name(kind) << " " << n << " " << K << " " << o.ignore_index << " "
      << P << "\n";
    write_floats(f, "weights", o.class_weights);
    write_floats(f, "z", z);
    if (!labels.empty()) {
      f << "labels";
      for (int32_t y : labels) f << " " << y;
      f << "\n";
    } else {
      write_floats(f, "targets", values);
    }
    char b[64];
    std::snprintf(b, sizeof(b), "loss %.17g\n", den > 0 ? sum / den : 0.0);
    f << b;
    write_floats(f, "grad", dz);
    f << "metrics";
    for (const auto& [name, v] : task.eval_metrics(sums)) std::snprintf(b, sizeof(b), " %s=%.17g", name.c_str(), v), f << b;
    f << "\nend\n";
    ++cases;
  };
  for (int n : {1, 7, 32}) {
    for (int K : {1, 3, 10}) {
      if (K > 1) {
        run(TaskKind::classification, n, K, {});
        TaskOptions w;
        for (int k = 0; k < K; ++k) w.class_weights.push_back(0.25f + 0.5f * static_cast<float>(k % 4));
        run(TaskKind::classification, n, K, w);
        TaskOptions ig;
        ig.ignore_index = K - 1;
        run(TaskKind::classification, n, K, ig);
        ig.class_weights = w.class_weights;
        run(TaskKind::classification, n, K, ig);
      }
      for (LossKind l : {LossKind::mse, LossKind::l1, LossKind::smooth_l1}) {
        TaskOptions o;
        o.loss = l;
        run(TaskKind::regression, n, K, o);
      }
      TaskOptions b;
      b.loss = LossKind::bce_with_logits;
      run(TaskKind::multilabel, n, K, b);
      for (int k = 0; k < K; ++k) b.class_weights.push_back(0.5f + static_cast<float>(k));
      run(TaskKind::multilabel, n, K, b);
    }
  }
  // Segmentation: a 2×3 label map per sample (P = 6 positions), per-pixel cross-entropy.
  for (int n : {1, 3})
    for (int K : {2, 4}) {
      run(TaskKind::segmentation, n, K, {}, 6);
      TaskOptions w;
      for (int k = 0; k < K; ++k) w.class_weights.push_back(0.5f + static_cast<float>(k));
      run(TaskKind::segmentation, n, K, w, 6);
      TaskOptions ig;
      ig.ignore_index = 0;
      run(TaskKind::segmentation, n, K, ig, 6);
      ig.class_weights = w.class_weights;
      run(TaskKind::segmentation, n, K, ig, 6);
    }
  std::printf("%d cases written\n", cases);

  bool ok = true;
  TaskOptions mse;
  mse.loss = LossKind::mse;
  ok &= rejects(TaskKind::classification, 10, mse, "--loss mse on class labels");
  ok &= rejects(TaskKind::regression, 4, {}, "--loss cross-entropy on float targets");
  TaskOptions w;
  w.class_weights = {1, 2};
  ok &= rejects(TaskKind::classification, 10, w, "2 class weights for 10 classes");
  TaskOptions ig;
  ig.ignore_index = 10;
  ok &= rejects(TaskKind::classification, 10, ig, "--ignore-index 10 of 10 classes");
  mse.ignore_index = 1;
  ok &= rejects(TaskKind::regression, 4, mse, "--ignore-index with mse");
  TaskOptions seg_mse;
  seg_mse.loss = LossKind::mse;
  ok &= rejects(TaskKind::segmentation, 3, seg_mse, "--loss mse on label maps");
  try {
    parse_class_weights("1,x");
    ok = false, std::printf("FAIL: accepted --class-weights 1,x\n");
  } catch (const UserError& e) {
    std::printf("rejected as it should (--class-weights 1,x): %s\n", e.what());
  }
  // Targets the loss cannot take: a label out of range, a non-finite target, a bce target > 1.
  try {
    const Task t = Task::classification(3);
    const int32_t y[2] = {0, 3};
    float z[6] = {}, dz[6];
    t.loss_and_grad(z, Targets(y), 2, 1.f, dz);
    ok = false, std::printf("FAIL: accepted label 3 of 3 classes\n");
  } catch (const UserError& e) {
    std::printf("rejected as it should (label 3 of 3 classes): %s\n", e.what());
  }
  try {
    TaskOptions b;
    b.loss = LossKind::bce_with_logits;
    const Task t(TaskKind::multilabel, 2, b);
    const float y[2] = {0.f, 2.f};
    float z[2] = {}, dz[2];
    t.loss_and_grad(z, Targets::of_values(y), 1, 1.f, dz);
    ok = false, std::printf("FAIL: accepted a bce target of 2\n");
  } catch (const UserError& e) {
    std::printf("rejected as it should (bce target 2): %s\n", e.what());
  }
  return ok ? 0 : 1;
}
