// resnet_tool.cpp — the cnnscale side of the torchvision ResNet cross-checks
// (tests/nn/resnet_torchvision.sh, bf16_torch.sh on the CPU model; resnet_torch_gpu.sh on
// the GPU model):
//   resnet_tool isa
//     prints the instruction set oneDNN runs its CPU kernels with here (after
//     ONEDNN_MAX_CPU_ISA): sse41, avx, avx2, avx512_core, avx512_core_bf16, ...
//   resnet_tool init MODEL C H W CLASSES SEED DIR [--zero-init-residual]
//     writes the freshly initialised model as a checkpoint (DIR/step-00000000.h5;
//     DIR "-": only the counts)
//   resnet_tool dump MODEL C H W CLASSES CKPT OUT.f32
//     loads CKPT and writes its flat parameter buffer (param_count() floats, running
//     statistics and num_batches_tracked included) as raw float32, and prints each
//     parameter as "param NAME OFFSET NUMEL": what a peer without HDF5 (h5py) reads
//   resnet_tool eval MODEL C H W CLASSES CKPT IN.f32 N OUT.f32
//     loads CKPT (names, shapes, checksums) and writes the eval-mode logits (N×CLASSES
//     float32) of the N C×H×W float32 images in IN.f32
//   resnet_tool grad MODEL C H W CLASSES CKPT IN.f32 N OUT.f32 LABELS.i32 [--sgd LR,MOMENTUM,WD]
//     one training forward_backward (batch statistics, loss = mean cross-entropy) on
//     those images with int32 labels; prints "loss L", writes the flat gradient buffer
//     then the flat parameter buffer (running statistics updated by the forward), both
//     param_count() floats in the flat layout, and prints each parameter as
//     "param NAME OFFSET NUMEL". With --sgd, then one step of a fresh cnnscale SGD
//     optimiser (make_optimizer: the CUDA one for the GPU model) at that learning rate,
//     momentum and weight decay — torch.optim.SGD's first step, p -= lr·(g + wd·p) on
//     every trainable parameter — and a third block: the parameters after it.
// and prints "params P trainable T" (P counts buffers such as running_var too).
// eval and grad take trailing options:
//   --bf16            the model runs with --precision bf16 (tests/nn/bf16_torch.sh
//                     compares that with torch.autocast)
//   --device N        the GPU model on CUDA device N (nn/cuda_model.hpp) instead of the
//                     CPU model; its buffers are copied to the host for the outputs. In a
//                     build without CUDA: exit 1 with make_model's UserError
//   --tf32 on|off     the GPU model's TF32 (ModelOptions::tf32; default on, as cnnscale)
//   --cudnn-benchmark on|off  the GPU model's algorithm choice (default off here:
//                     cuDNN's heuristic; one step does not repay timing every candidate)
//   --capture DIR     grad on the CPU model only: writes DIR/graph.txt (a line per node:
//                     "K OP inputs=T,.. out=C[,H,W] kernel=K,KW stride=S pad=P p=P params=NAME,..";
//                     a volume's out=C,D,H,W; pad_end=E the conv's extra end padding;
//                     tensor 0 is the input, tensor K+1 node K's output) and DIR/node-K.f32,
//                     node K's output right after it ran, plain float32 (Net::set_capture):
//                     what tests/nn/torch_reference.py follows at float32 ties
//   --segmentation    (any mode) the model's task is segmentation: it ends in CLASSES × H × W,
//                     grad's LABELS.i32 holds N label maps of H×W (the loss the mean over the
//                     pixels) and eval writes N×CLASSES×H×W (with --depth: D×H×W maps, voxels)
//   --depth D         (any mode) the samples are C×D×H×W volumes (IN.f32 holds N of them): the
//                     model's conv, pools and batch norms are 3-D (cosmoflow, a spec)
//   --regression      (any mode) the task is regression with F.mse_loss (mean over N×CLASSES):
//                     CLASSES is the number of targets, grad's LABELS file holds N×CLASSES float32
//                     targets, eval writes N×CLASSES outputs
//   --params P.f32    after CKPT, the parameters and buffers from P.f32 instead
//                     (param_count() raw floats in the flat layout, as dump writes them):
//                     a peer without HDF5 can hand over changed weights
// Exit status: 0, 1 (an error, printed), 2 (usage).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <string>
#include <vector>

#include "nn/cuda_model.hpp"
#include "nn/model.hpp"
#include "nn/net.hpp"
#include "nn/task.hpp"
#include "train/checkpoint.hpp"
#include "train/optimizer.hpp"

using namespace cnnscale;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: resnet_tool isa\n"
               "       resnet_tool init MODEL C H W CLASSES SEED DIR [--zero-init-residual]\n"
               "       resnet_tool dump MODEL C H W CLASSES CKPT OUT.f32\n"
               "       resnet_tool eval MODEL C H W CLASSES CKPT IN.f32 N OUT.f32 [OPTIONS]\n"
               "       resnet_tool grad MODEL C H W CLASSES CKPT IN.f32 N OUT.f32 LABELS.i32 [OPTIONS] "
               "[--sgd LR,MOMENTUM,WD]\n"
               "OPTIONS: --bf16 --device N --tf32 on|off --cudnn-benchmark on|off --params P.f32 --capture DIR\n");
  return 2;
}

bool on_off(const std::string& v, bool* out) {
  if (v != "on" && v != "off") return false;
  *out = v == "on";
  return true;
}

void write_floats(std::ofstream& o, const std::vector<float>& v) {
  o.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

// The flat parameter and gradient buffers on the host, wherever the model keeps them.
std::vector<float> host_params(Model& m) {
  std::vector<float> h(m.param_count());
  m.copy_params_to_host(h.data());
  return h;
}
std::vector<float> host_grads(Model& m) {
  std::vector<float> h(m.param_count());
  if (auto* d = dynamic_cast<DeviceModel*>(&m)) {
    d->download_grads(h.data());
  } else {
    std::copy_n(m.grad_data(), m.param_count(), h.data());
  }
  return h;
}

// --capture: the graph and every node's output of the forward that just ran.
bool write_capture(const nn::Net& net, const std::string& dir) {
  const nn::Graph& g = net.graph();
  std::ofstream txt(dir + "/graph.txt");
  for (const nn::Node& nd : g.nodes) {
    txt << nd.index << ' ' << nn::op_name(nd.op) << " inputs=";
    for (size_t i = 0; i < nd.inputs.size(); ++i) txt << (i ? "," : "") << nd.inputs[i];
    txt << " out=" << nd.out.c;
    if (nd.out.volume()) txt << ',' << nd.out.d;
    if (!nd.out.flat) txt << ',' << nd.out.h << ',' << nd.out.w;
    if (nd.pad_end) txt << " pad_end=" << nd.pad_end;
    txt << " kernel=" << nd.kernel << ',' << (nd.kernel_w ? nd.kernel_w : nd.kernel) << " stride=" << nd.stride
        << " pad=" << nd.pad << " ceil=" << nd.ceil_mode << " groups=" << nd.groups << " act=" << nn::act_name(nd.act)
        << " resample=" << static_cast<int>(nd.resample) << " slope=" << std::setprecision(9) << nd.slope << std::setprecision(6) << " p=" << nd.p << " momentum=" << nd.momentum << " eps=" << nd.eps << " slice=" << nd.slice_begin << ','
        << nd.slice_end
        << " params=";
    for (size_t i = 0; i < nd.params.size(); ++i) txt << (i ? "," : "") << g.params[nd.params[i]].info.name;
    txt << '\n';
    const std::vector<float>& v = net.captured(nd.index);
    std::ofstream o(dir + "/node-" + std::to_string(nd.index) + ".f32", std::ios::binary);
    write_floats(o, v);
    if (!o) break;
  }
  if (!txt) {
    std::fprintf(stderr, "resnet_tool: cannot write the capture into %s\n", dir.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "isa" && argc == 2) {
    std::printf("%s\n", nn::cpu_isa_name());
    return 0;
  }
  std::vector<std::string> pos;
  bool segmentation = false, regression = false;
  int depth = 0;
  bool bf16 = false, zero_init_residual = false, tf32 = true, bench = false, device_opts = false, sgd = false;
  int device = -1;
  std::string params_file, capture_dir;
  OptimizerOptions sgd_opts;
  double lr = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--bf16") {
      bf16 = device_opts = true;
    } else if (a == "--segmentation") {
      segmentation = true;
    } else if (a == "--regression") {
      regression = true;
    } else if (a == "--depth" && has_value) {
      depth = std::atoi(argv[++i]);
      if (depth < 1) return usage();
    } else if (a == "--zero-init-residual") {
      zero_init_residual = true;
    } else if (a == "--device" && has_value) {
      char* end = nullptr;
      device = static_cast<int>(std::strtol(argv[++i], &end, 10));
      if (*end || device < 0) return usage();
      device_opts = true;
    } else if (a == "--tf32" && has_value) {
      if (!on_off(argv[++i], &tf32)) return usage();
      device_opts = true;
    } else if (a == "--cudnn-benchmark" && has_value) {
      if (!on_off(argv[++i], &bench)) return usage();
      device_opts = true;
    } else if (a == "--params" && has_value) {
      params_file = argv[++i];
      device_opts = true;
    } else if (a == "--capture" && has_value) {
      capture_dir = argv[++i];
    } else if (a == "--sgd" && has_value) {
      if (std::sscanf(argv[++i], "%lf,%lf,%lf", &lr, &sgd_opts.momentum, &sgd_opts.weight_decay) != 3) return usage();
      sgd = true;
    } else if (a.rfind("--", 0) == 0) {
      return usage();
    } else {
      pos.push_back(a);
    }
  }
  const size_t np = pos.size();
  const bool shape_ok = (mode == "init" && np == 7) || (mode == "dump" && np == 7) ||
                        (mode == "eval" && np == 9) || (mode == "grad" && np == 10);
  if (!shape_ok || (zero_init_residual && mode != "init") || (device_opts && mode != "eval" && mode != "grad") ||
      (sgd && mode != "grad") || (!capture_dir.empty() && (mode != "grad" || device >= 0)))
    return usage();
  // pos[k] is argv's word k + 2 of the forms above (MODEL is pos[0]).
  SampleShape shape{std::atoi(pos[1].c_str()), std::atoi(pos[2].c_str()), std::atoi(pos[3].c_str())};
  shape.depth = depth;
  const int classes = std::atoi(pos[4].c_str());
  ModelOptions mo;
  mo.zero_init_residual = zero_init_residual;
  mo.tf32 = tf32;
  mo.cudnn_benchmark = bench;
  const int64_t pixels = segmentation ? shape.plane() : 1;  // H·W (volumes: D·H·W)
  if (segmentation) mo.task = std::make_shared<const Task>(TaskKind::segmentation, classes, TaskOptions{}, pixels);
  if (regression) {
    TaskOptions to;
    to.loss = LossKind::mse;
    mo.task = std::make_shared<const Task>(TaskKind::regression, classes, to);
  }
  auto model = make_model(pos[0], shape, classes, device, mo);
  size_t trainable = 0;
  for (const auto& p : model->params()) trainable += p.trainable ? p.numel : 0;
  std::printf("params %zu trainable %zu\n", model->param_count(), trainable);
  auto opt = make_optimizer(OptimizerOptions{}, *model);
  auto print_params = [&] {
    for (const auto& p : model->params()) std::printf("param %s %zu %zu\n", p.name.c_str(), p.offset, p.numel);
  };
  if (mode == "init") {
    if (pos[6] == "-") return 0;
    model->init_params(std::strtoull(pos[5].c_str(), nullptr, 10));
    CheckpointMeta meta;
    meta.model = model->name();
    meta.model_spec = model->spec();
    meta.optimizer = opt->kind();
    std::printf("%s\n", write_checkpoint(pos[6], *model, *opt, meta, 1).c_str());
    return 0;
  }
  read_checkpoint(pos[5], *model, *opt);
  if (!params_file.empty()) {
    std::vector<float> p(model->param_count());
    std::ifstream pf(params_file, std::ios::binary);
    pf.read(reinterpret_cast<char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(float)));
    if (!pf || pf.peek() != std::char_traits<char>::eof()) {
      std::fprintf(stderr, "resnet_tool: %s does not hold exactly %zu floats\n", params_file.c_str(), p.size());
      return 1;
    }
    model->copy_params_from_host(p.data());
  }
  if (mode == "dump") {
    print_params();
    std::ofstream o(pos[6], std::ios::binary);
    write_floats(o, host_params(*model));
    if (!o) {
      std::fprintf(stderr, "resnet_tool: cannot write %s\n", pos[6].c_str());
      return 1;
    }
    return 0;
  }
  const int64_t n = std::atoll(pos[7].c_str());
  std::vector<float> x(static_cast<size_t>(n * shape.numel()));
  std::ifstream in(pos[6], std::ios::binary);
  in.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  if (!in) {
    std::fprintf(stderr, "resnet_tool: %s holds fewer than %zu floats\n", pos[6].c_str(), x.size());
    return 1;
  }
  model->prepare(n, bf16 ? Precision::bf16 : Precision::fp32);
  if (mode == "grad") {
    std::vector<int32_t> labels(static_cast<size_t>(regression ? 0 : n * pixels));
    std::vector<float> values(static_cast<size_t>(regression ? n * classes : 0));
    std::ifstream lf(pos[9], std::ios::binary);
    if (regression)
      lf.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
    else
      lf.read(reinterpret_cast<char*>(labels.data()), static_cast<std::streamsize>(labels.size() * sizeof(int32_t)));
    if (!lf) {
      std::fprintf(stderr, "resnet_tool: %s holds fewer than %lld labels\n", pos[9].c_str(), static_cast<long long>(n));
      return 1;
    }
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
    StepContext ctx;
    ctx.sample_ids = ids.data();
    ctx.loss_scale = 1.f / static_cast<float>(n * pixels);
    auto* net = dynamic_cast<nn::Net*>(model.get());
    if (!capture_dir.empty()) net->set_capture(true);
    const Targets targets = regression ? Targets::of_values(values.data()) : Targets(labels.data());
    const double loss = model->forward_backward(x.data(), targets, n, ctx, {});
    if (!capture_dir.empty() && !write_capture(*net, capture_dir)) return 1;
    model->synchronize();  // a device model's backward may still be running
    std::printf("loss %.9g\n", loss / static_cast<double>(n * pixels));
    print_params();
    std::ofstream o(pos[8], std::ios::binary);
    write_floats(o, host_grads(*model));
    write_floats(o, host_params(*model));
    if (sgd) {
      sgd_opts.kind = "sgd";
      auto step = make_optimizer(sgd_opts, *model);  // fresh: momentum buffer = g + wd·p
      step->step(model->param_data(), model->grad_data(), lr);
      model->synchronize();  // the CUDA optimiser runs on the model's stream
      write_floats(o, host_params(*model));
    }
    if (!o) {
      std::fprintf(stderr, "resnet_tool: cannot write %s\n", pos[8].c_str());
      return 1;
    }
    return 0;
  }
  std::vector<float> logits(static_cast<size_t>(n * classes * pixels));
  model->forward_eval(x.data(), n, logits.data());
  std::ofstream(pos[8], std::ios::binary)
      .write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "resnet_tool: %s\n", e.what());
  return 1;
}
