// fuzz_checkpoint.cpp — libFuzzer target: a checkpoint file as `cnnscale train --resume`
// and `cnnscale export` read it (train/checkpoint.hpp): read_checkpoint_meta() (the root
// attributes: their presence, types, string sizes and ranges, the tuning text), then
// read_checkpoint() into a configured model and optimiser (the model spec, optimiser kind,
// every dataset's name, shape and Fletcher32, every value finite, batch-norm variances
// non-negative).
//
// Input: byte 0 picks the configured model and optimiser (below), the rest is the file,
// written as step-00000001.h5 to a directory of this process (in /dev/shm). Seeds:
// corpus/fuzz_checkpoint/, each the kind byte and a real checkpoint of `cnnscale train
// --synthetic --synthetic-samples 8 --image-size 2 --channels 1 --classes 2 --batch-size 4
// --max-steps 1 --checkpoint-every 1 --model SPEC [--optimizer adamw]`.
//
// The model: read_checkpoint() asks a Model (nn/model.hpp) for its spec, its parameters'
// names, shapes and flat offsets, and copies the values in; it never runs it. The one here
// answers as the CPU model of the seed's spec does (the same state_dict names and shapes,
// laid out in reverse registration order), without oneDNN, so that the target compiles the
// checkpoint reader and its few dependencies, not the network library. The optimiser is
// the product's (make_optimizer).
//
// What it asserts: every refusal is a UserError (CheckpointMismatch and CheckpointNonFinite
// are ones), and a refused read leaves the model and the optimiser as they were (the
// reader's contract); metadata that is accepted is within the ranges read_meta() promises;
// a checkpoint that loads holds finite values and non-negative running variances, and sets
// the optimiser's step count; no HDF5 object is left open. Anything else escaping, a crash,
// a hang, a leak or a sanitizer report is a defect (libhdf5's own crashes:
// tests/fuzz/hdf5-crashes/).
#include <hdf5.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "nn/model.hpp"
#include "train/checkpoint.hpp"
#include "train/optimizer.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"

namespace {

using cnnscale::ParamInfo;

// A model that holds parameters and answers for them; it cannot train or infer.
class ParamsOnlyModel : public cnnscale::Model {
 public:
  // params: registration order (name, shape, trainable); laid out in reverse order.
  ParamsOnlyModel(std::string spec, std::vector<ParamInfo> params) : spec_(std::move(spec)), params_(std::move(params)) {
    size_t at = 0;
    for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
      it->numel = 1;
      for (int64_t d : it->shape) it->numel *= static_cast<size_t>(d);
      it->offset = at;
      at += it->numel;
    }
    values_.assign(at, 0.f);
    grads_.assign(at, 0.f);
    for (size_t i = 0; i < at; ++i) values_[i] = 0.25f + static_cast<float>(i % 7);  // finite, variances > 0
  }
  std::string name() const override { return spec_; }
  std::string spec() const override { return spec_; }
  const std::vector<ParamInfo>& params() const override { return params_; }
  float* param_data() override { return values_.data(); }
  float* grad_data() override { return grads_.data(); }
  size_t param_count() const override { return values_.size(); }
  int classes() const override { return 2; }
  void prepare(int64_t, cnnscale::Precision) override { std::abort(); }
  double forward_backward(const float*, const cnnscale::Targets&, int64_t, const cnnscale::StepContext&,
                          const cnnscale::GradReadyFn&) override {
    std::abort();
  }
  void forward_eval(const float*, int64_t, float*) override { std::abort(); }
  void init_params(uint64_t) override { std::abort(); }

 private:
  std::string spec_;
  std::vector<ParamInfo> params_;
  std::vector<float> values_, grads_;
};

ParamInfo param(const char* name, std::vector<int64_t> shape, bool trainable = true) {
  ParamInfo p;
  p.name = name;
  p.shape = std::move(shape);
  p.trainable = trainable;
  return p;
}

struct Kind {
  const char* spec;
  const char* optimizer;
  std::vector<ParamInfo> params;
};
// Byte 0 of the input, modulo the count: the seeds' models (input 1×2×2, 2 classes).
const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = {
      {"flatten linear(2)", "sgd", {param("1.weight", {2, 4}), param("1.bias", {2})}},
      {"flatten linear(2)", "adamw", {param("1.weight", {2, 4}), param("1.bias", {2})}},
      {"bn flatten linear(2)",
       "sgd",
       {param("0.weight", {1}), param("0.bias", {1}), param("0.running_mean", {1}, false),
        param("0.running_var", {1}, false), param("0.num_batches_tracked", {}, false), param("2.weight", {2, 4}),
        param("2.bias", {2})}},
  };
  return k;
}

std::string g_dir, g_path;

// HDF5 objects of any file (files, groups, datasets, named types, attributes) open before
// the first input (none) and after each: a handle the readers leave open is a defect (and
// would keep the file open under the next input's bytes). HDF5 1.10 counts no dataspaces or
// property lists for callers (H5Inmembers refuses the library's types).
ssize_t g_baseline = 0;

ssize_t open_objects() { return H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL); }

void remove_dir() {
  if (g_dir.empty()) return;
  ::unlink(g_path.c_str());
  ::rmdir(g_dir.c_str());
}

[[noreturn]] void defect(const std::string& what) {
  std::fprintf(stderr, "fuzz_checkpoint: %s\n", what.c_str());
  std::abort();
}

void check_meta(const cnnscale::CheckpointMeta& m) {
  if (m.step < 0 || m.step > 1'000'000'000'000 || m.optimizer_steps < 0 || m.optimizer_steps > m.step ||
      m.step_in_epoch < 0 || m.step_in_epoch > m.step || m.epoch < 0 || m.epoch > m.step + 1 || m.world_size < 1 ||
      m.world_size > (1 << 24) || m.global_batch < 0 || m.global_batch > (int64_t{1} << 40))
    defect("read_meta() accepted attributes outside its ranges");
}

using State = std::vector<std::vector<float>>;
State state_of(cnnscale::Optimizer& opt) {
  State s;
  for (const auto& [name, buf] : opt.state()) s.push_back(*buf);
  return s;
}

}  // namespace

// Leaks whose allocation passes through libhdf5 are libhdf5's own (1.10.8 loses an object
// header on some damaged files: tests/fuzz/hdf5-crashes/README.md) and are not reported; a
// handle cnnscale leaves open is not a leak (HDF5 keeps it) but an open object, checked below.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5\n"; }
extern "C" const char* __lsan_default_options() { return "print_suppressions=0"; }
// libhdf5 allocates what a damaged file's sizes say (a local heap of 2^62 bytes): malloc()
// returning NULL, as it does outside ASan, and HDF5's error is the answer. C++'s operator new
// (cnnscale's allocations) is still reported.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/dev/shm/fuzz_checkpoint-XXXXXX";
  char tmpl2[] = "/tmp/fuzz_checkpoint-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  if (!d) d = ::mkdtemp(tmpl2);
  if (!d) {
    std::perror("mkdtemp");
    std::abort();
  }
  g_dir = d;
  g_path = g_dir + "/step-00000001.h5";
  std::atexit(remove_dir);
  cnnscale::Hdf5Lock lock(cnnscale::hdf5_mutex());
  H5open();
  g_baseline = open_objects();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1 << 20)) return -1;
  const Kind& kind = kinds()[data[0] % kinds().size()];
  {
    FILE* f = std::fopen(g_path.c_str(), "wb");
    if (!f || (size > 1 && std::fwrite(data + 1, 1, size - 1, f) != size - 1) || std::fclose(f) != 0) {
      std::perror(g_path.c_str());
      std::abort();
    }
  }
  try {
    check_meta(cnnscale::read_checkpoint_meta(g_path));
  } catch (const cnnscale::UserError& e) {
    if (std::getenv("FUZZ_CHECKPOINT_VERBOSE")) std::fprintf(stderr, "fuzz_checkpoint: meta: %s\n", e.what());
  }
  ParamsOnlyModel model(kind.spec, kind.params);
  cnnscale::OptimizerOptions oo;
  oo.kind = kind.optimizer;
  auto opt = cnnscale::make_optimizer(oo, model.params(), model.param_count());
  const std::vector<float> before(model.param_data(), model.param_data() + model.param_count());
  const State state_before = state_of(*opt);
  const long long steps_before = opt->steps_taken();
  try {
    const cnnscale::CheckpointMeta m = cnnscale::read_checkpoint(g_path, model, *opt);
    check_meta(m);
    const float* p = model.param_data();
    for (size_t i = 0; i < model.param_count(); ++i)
      if (!std::isfinite(p[i])) defect("read_checkpoint() loaded a non-finite parameter");
    for (const auto& s : state_of(*opt))
      for (float v : s)
        if (!std::isfinite(v)) defect("read_checkpoint() loaded a non-finite optimiser state");
    for (const auto& info : model.params())
      if (info.name.find("running_var") != std::string::npos)
        for (size_t i = 0; i < info.numel; ++i)
          if (p[info.offset + i] < 0.f) defect("read_checkpoint() loaded a negative running variance");
    if (opt->steps_taken() != m.optimizer_steps) defect("read_checkpoint() did not set the optimiser's steps");
  } catch (const cnnscale::UserError& e) {
    if (std::getenv("FUZZ_CHECKPOINT_VERBOSE")) std::fprintf(stderr, "fuzz_checkpoint: read: %s\n", e.what());
    if (!std::equal(before.begin(), before.end(), model.param_data()) || state_of(*opt) != state_before ||
        opt->steps_taken() != steps_before)
      defect(std::string("a refused checkpoint changed the model or the optimiser: ") + e.what());
  }
  {
    cnnscale::Hdf5Lock lock(cnnscale::hdf5_mutex());
    if (const ssize_t open = open_objects(); open != g_baseline)
      defect(std::to_string(open) + " HDF5 object(s) left open (" + std::to_string(g_baseline) + " before)");
  }
  return 0;
}
