// sync_bn_tool — for sync_bn_torch.sh: one --sync-bn training step of a small net on 3
// "ranks" (threads, unequal split 2 + 3 + 3 of a batch of 8; thread_ranks.hpp), written
// as text for PyTorch to recompute with nn.BatchNorm2d on the whole batch.
// Usage: sync_bn_tool OUT_DIR. Writes OUT_DIR/{spec,init,data,after,grads}.txt:
//   init/after: "name<TAB>d0,d1,..<TAB>v v v" per parameter (state_dict order), before
//   and after the step (after: rank 0's; the running statistics moved); grads: the
//   trainable gradients summed over ranks; data: "x<TAB>..." and "y<TAB>..."; the loss
//   sum over ranks is the line "loss<TAB><TAB>v" of after.txt.
#include <cstdio>
#include <string>
#include <vector>

#include "nn/model.hpp"
#include "random_batch.hpp"
#include "thread_ranks.hpp"

using namespace cnnscale;

namespace {

void write_params(const std::string& path, const Model& m, const std::vector<float>& flat, bool trainable_only) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  for (const auto& p : m.params()) {
    if (trainable_only && !p.trainable) continue;
    std::fprintf(f, "%s\t", p.name.c_str());
    for (size_t i = 0; i < p.shape.size(); ++i) std::fprintf(f, "%s%lld", i ? "," : "", (long long)p.shape[i]);
    std::fprintf(f, "\t");
    for (size_t k = 0; k < p.numel; ++k) std::fprintf(f, "%s%.9g", k ? " " : "", flat[p.offset + k]);
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sync_bn_tool OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  const std::string spec = "conv(4,3,1,1) bn relu conv(5,3,1,1) bn relu flatten linear(3)";
  const SampleShape shape{2, 6, 6};
  const int classes = 3;
  const std::vector<int64_t> split{2, 3, 3};
  const test::RandomBatch d(8, shape, classes, 17);
  auto m = make_model(spec, shape, classes);
  m->init_params(7);  // as run_ranks
  std::vector<float> init(m->param_data(), m->param_data() + m->param_count());
  const auto rs = test::run_ranks(spec, shape, classes, d, split, true);
  std::vector<float> grads(init.size(), 0.f);
  double loss = 0;
  for (const auto& r : rs) {
    loss += r.loss;
    for (size_t i = 0; i < grads.size(); ++i) grads[i] += r.grads[i];
  }
  write_params(out + "/init.txt", *m, init, false);
  write_params(out + "/after.txt", *m, rs[0].params, false);
  write_params(out + "/grads.txt", *m, grads, true);
  FILE* f = std::fopen((out + "/after.txt").c_str(), "a");
  std::fprintf(f, "loss\t\t%.17g\n", loss);
  std::fclose(f);
  f = std::fopen((out + "/data.txt").c_str(), "w");
  std::fprintf(f, "x\t8,2,6,6\t");
  for (size_t i = 0; i < d.x.size(); ++i) std::fprintf(f, "%s%.9g", i ? " " : "", d.x[i]);
  std::fprintf(f, "\ny\t8\t");
  for (size_t i = 0; i < d.y.size(); ++i) std::fprintf(f, "%s%d", i ? " " : "", d.y[i]);
  std::fprintf(f, "\n");
  std::fclose(f);
  f = std::fopen((out + "/spec.txt").c_str(), "w");
  std::fprintf(f, "%s\n", spec.c_str());
  std::fclose(f);
  return 0;
}
