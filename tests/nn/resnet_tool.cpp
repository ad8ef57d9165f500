// resnet_tool.cpp — the cnnscale side of the torchvision ResNet cross-check
// (tests/nn/resnet_torchvision.sh), on the CPU model:
//   resnet_tool init MODEL C H W CLASSES SEED DIR [--zero-init-residual]
//     writes the freshly initialised model as a checkpoint (DIR/step-00000000.h5;
//     DIR "-": only the counts)
//   resnet_tool eval MODEL C H W CLASSES CKPT IN.f32 N OUT.f32
//     loads CKPT (names, shapes, checksums) and writes the eval-mode logits (N×CLASSES
//     float32) of the N C×H×W float32 images in IN.f32
//   resnet_tool grad MODEL C H W CLASSES CKPT IN.f32 N OUT.f32 LABELS.i32
//     one training forward_backward (batch statistics, loss = mean cross-entropy) on
//     those images with int32 labels; writes the flat gradient buffer then the flat
//     parameter buffer (running statistics updated by the forward), both param_count()
//     floats in the flat layout, and prints each parameter as "param NAME OFFSET NUMEL"
// and prints "params P trainable T" (P counts buffers such as running_var too).
// eval and grad take a trailing --bf16: the model runs with --precision bf16
// (tests/nn/bf16_torch.sh compares that with torch.autocast).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "nn/model.hpp"
#include "train/checkpoint.hpp"
#include "train/optimizer.hpp"

using namespace cnnscale;

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool bf16 = mode != "init" && argc > 2 && std::string(argv[argc - 1]) == "--bf16";
  if (bf16) --argc;
  if (!((mode == "init" && (argc == 9 || argc == 10)) || (mode == "eval" && argc == 11) ||
        (mode == "grad" && argc == 12))) {
    std::fprintf(stderr, "usage: resnet_tool init MODEL C H W CLASSES SEED DIR [--zero-init-residual]\n"
                         "       resnet_tool eval MODEL C H W CLASSES CKPT IN.f32 N OUT.f32 [--bf16]\n"
                 "       resnet_tool grad MODEL C H W CLASSES CKPT IN.f32 N OUT.f32 LABELS.i32 [--bf16]\n");
    return 2;
  }
  const SampleShape shape{std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5])};
  const int classes = std::atoi(argv[6]);
  ModelOptions mo;
  mo.zero_init_residual = argc == 10 && std::string(argv[9]) == "--zero-init-residual";
  auto model = make_model(argv[2], shape, classes, -1, mo);
  size_t trainable = 0;
  for (const auto& p : model->params()) trainable += p.trainable ? p.numel : 0;
  std::printf("params %zu trainable %zu\n", model->param_count(), trainable);
  auto opt = make_optimizer(OptimizerOptions{}, *model);
  if (mode == "init") {
    if (std::string(argv[8]) == "-") return 0;
    model->init_params(std::strtoull(argv[7], nullptr, 10));
    CheckpointMeta meta;
    meta.model = model->name();
    meta.model_spec = model->spec();
    meta.optimizer = opt->kind();
    std::printf("%s\n", write_checkpoint(argv[8], *model, *opt, meta, 1).c_str());
    return 0;
  }
  read_checkpoint(argv[7], *model, *opt);
  const int64_t n = std::atoll(argv[9]);
  std::vector<float> x(static_cast<size_t>(n * shape.channels * shape.height * shape.width));
  std::ifstream in(argv[8], std::ios::binary);
  in.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  if (!in) {
    std::fprintf(stderr, "resnet_tool: %s holds fewer than %zu floats\n", argv[8], x.size());
    return 1;
  }
  model->prepare(n, bf16 ? Precision::bf16 : Precision::fp32);
  if (mode == "grad") {
    std::vector<int32_t> labels(static_cast<size_t>(n));
    std::ifstream lf(argv[11], std::ios::binary);
    lf.read(reinterpret_cast<char*>(labels.data()), static_cast<std::streamsize>(labels.size() * sizeof(int32_t)));
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
    StepContext ctx;
    ctx.sample_ids = ids.data();
    ctx.loss_scale = 1.f / static_cast<float>(n);
    const double loss = model->forward_backward(x.data(), labels.data(), n, ctx, {});
    std::printf("loss %.9g\n", loss / static_cast<double>(n));
    for (const auto& p : model->params()) std::printf("param %s %zu %zu\n", p.name.c_str(), p.offset, p.numel);
    std::ofstream o(argv[10], std::ios::binary);
    const auto bytes = static_cast<std::streamsize>(model->param_count() * sizeof(float));
    o.write(reinterpret_cast<const char*>(model->grad_data()), bytes);
    o.write(reinterpret_cast<const char*>(model->param_data()), bytes);
    return 0;
  }
  std::vector<float> logits(static_cast<size_t>(n * classes));
  model->forward_eval(x.data(), n, logits.data());
  std::ofstream(argv[10], std::ios::binary)
      .write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "resnet_tool: %s\n", e.what());
  return 1;
}
