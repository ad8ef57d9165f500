// cmd_export.cpp — `cnnscale export RUN_DIR|CHECKPOINT.h5 --onnx OUT.onnx`: a trained
// model's inference graph as ONNX (nn/onnx_export.hpp) for ONNX Runtime, TensorRT, …
#include <cstdio>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "nn/graph.hpp"
#include "nn/model.hpp"
#include "nn/net.hpp"
#include "nn/onnx_export.hpp"
#include "nn/onnx_import.hpp"
#include "train/checkpoint.hpp"
#include "train/optimizer.hpp"
#include "train/run_dir.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"

#ifndef CNNSCALE_VERSION
#define CNNSCALE_VERSION "dev"
#endif

namespace cnnscale::cli {

int cmd_export(int argc, char** argv) {
  CommandSpec spec{
      "export", "cnnscale export RUN_DIR|CHECKPOINT.h5 --onnx OUT.onnx [options]",
      "Writes a trained model as an ONNX file for inference (ONNX Runtime, TensorRT, OpenVINO, ...):\n"
      "the checkpoint's weights (RUN_DIR: its newest sound checkpoint), batch norms with their running\n"
      "statistics, no dropout, the parameters under their state_dict names, input N x C x H x W with\n"
      "N dynamic and H, W the size the model was trained at, output N x classes logits (a segmentation model's:\n"
      "N x classes x H x W) (opset 17).\n"
      "Any model cnnscale trains: built in, a one-line spec, or imported from ONNX. Its logits equal\n"
      "cnnscale's evaluation logits (docs/models.md, \"Trained models out\").",
      "Examples:\n"
      "  cnnscale export runs/rn50 --onnx rn50.onnx\n"
      "  cnnscale export runs/rn50/checkpoints/step-00001000.h5 --onnx rn50-1000.onnx\n"
      "  python3 -c \"import onnxruntime as ort; s = ort.InferenceSession('rn50.onnx'); ...\""};
  po::options_description desc("Options");
  desc.add_options()("source", po::value<std::string>(), "a run directory or a checkpoint file (positional)")(
      "onnx", po::value<std::string>(), "the ONNX file to write (required)")(
      "force", po::bool_switch(), "replace OUT.onnx when it exists")(
      "input-shape", po::value<std::string>(),
      "C,H,W (a volume's C,D,H,W) of the model's input, for checkpoints written before cnnscale recorded it (it says when)")(
      "classes", po::value<int>(), "the model's classes, for such checkpoints too")(
      "model", po::value<std::string>(),
      "FILE.onnx: where a run's ONNX model now lies, when it is no longer at the path the checkpoint records; its "
      "content must be the run's (SHA-256 checked)");
  auto parsed = parse_options(spec, argc, argv, desc, {{"source", 1}});
  if (parsed.help) {
    print_help(spec, desc);
    return 0;
  }
  const auto& vm = parsed.vm;
  if (!vm.count("source")) fail("export: no run directory or checkpoint given; usage: ", spec.usage);
  if (!vm.count("onnx")) fail("export: --onnx OUT.onnx is required (the file to write)");
  const std::string src = vm["source"].as<std::string>(), out = vm["onnx"].as<std::string>();
  if (out.size() < 6 || out.compare(out.size() - 5, 5, ".onnx") != 0)
    fail("export: --onnx ", out, ": the file name must end in .onnx");
  struct stat st {};
  if (!vm["force"].as<bool>() && lstat(out.c_str(), &st) == 0)
    fail("export: --onnx ", out, " exists; remove it, choose another name, or add --force to replace it");
  check_output_file(out, "--onnx");

  // The checkpoint: the file itself, or the run's newest one that reads back sound.
  std::vector<std::string> cands = {src};
  if (stat(src.c_str(), &st) != 0) fail("export: ", src, ": no such run directory or checkpoint file");
  if (S_ISDIR(st.st_mode)) {
    cands = checkpoint_candidates(src + "/checkpoints");
    if (cands.empty()) cands = checkpoint_candidates(src);
    if (cands.empty())
      fail("export: ", src, " holds no checkpoint (a run writes them into RUN_DIR/checkpoints with --checkpoint-every "
           "or at its end)");
  }
  std::string bytes, path, skipped;
  CheckpointMeta meta;
  SampleShape in;
  int classes = 0;
  for (const auto& c : cands) {
    path = c;
    try {
      meta = read_checkpoint_meta(path);
    } catch (const UserError& e) {
      if (cands.size() == 1) throw;
      std::fprintf(stderr, "cnnscale: export: skipping %s: %s\n", path.c_str(), e.what());
      skipped = path;
      continue;
    }
    in = SampleShape{static_cast<int>(meta.input_channels), static_cast<int>(meta.input_height),
                     static_cast<int>(meta.input_width), static_cast<int>(meta.input_depth)};
    classes = static_cast<int>(meta.classes);
    if (vm.count("input-shape")) {
      const std::string v = vm["input-shape"].as<std::string>();
      int a[4] = {0, 0, 0, 0};
      char extra = 0;
      const int got = std::sscanf(v.c_str(), "%d,%d,%d,%d%c", &a[0], &a[1], &a[2], &a[3], &extra);
      if ((got != 3 && got != 4) || a[0] < 1 || a[1] < 1 || a[2] < 1 || (got == 4 && a[3] < 1))
        fail("export: --input-shape ", v, ": give C,H,W, e.g. 3,224,224, or a volume's C,D,H,W, e.g. 4,128,128,128");
      in = got == 3 ? SampleShape{a[0], a[1], a[2]} : SampleShape{a[0], a[2], a[3], a[1]};
    }
    if (vm.count("classes")) classes = vm["classes"].as<int>();
    if (in.channels < 1 || classes < 1)
      fail("export: ", path, " does not record the model's input shape and classes (written before cnnscale did); "
           "give --input-shape C,H,W and --classes K as the run trained with");
    // An ONNX model is rebuilt from its file: the recorded path, or --model where it lies now;
    // either way its content must be the one the run trained (the config's SHA-256).
    const std::string* recorded = nullptr;
    const RunConfig config = RunConfig::parse(meta.config);
    if (nn::is_onnx_model(meta.model_spec)) recorded = config.get("model");
    std::string model_spec = meta.model_spec;
    if (vm.count("model")) {
      if (!nn::is_onnx_model(meta.model_spec))
        fail("export: --model applies to a run of an ONNX model; ", path, " holds ", meta.model_spec,
             ", which cnnscale builds itself (leave --model out)");
      model_spec = vm["model"].as<std::string>();
      if (!nn::is_onnx_model(model_spec)) fail("export: --model ", model_spec, ": give the run's FILE.onnx");
    }
    nn::ModelGraph mg;
    try {
      ModelOptions any;
      any.any_output = true;  // a segmentation model's dense output too
      mg = nn::build_model_graph(model_spec, in, classes, any);
    } catch (const UserError& e) {
      fail("export: the model of ", path, " (", model_spec, ") cannot be rebuilt: ", e.what(),
           nn::is_onnx_model(model_spec) && !vm.count("model")
               ? " (if the run's ONNX file was moved, give --model FILE.onnx where it is now)"
               : "");
    }
    if (recorded && recorded->rfind("onnx ", 0) == 0 && *recorded != mg.identity)
      fail("export: ", model_spec, " is not the file ", path, " was trained from: its content changed (", path,
           " records ", recorded->substr(5), ", the file has ", mg.identity.substr(5),
           "); give the run's file with --model FILE.onnx");
    // the CPU model from the graph just built (make_model would read an ONNX file a second time)
    auto model = std::make_unique<nn::Net>(mg.graph, mg.name, mg.spec, mg.identity);
    OptimizerOptions oo;
    oo.kind = meta.optimizer;
    auto opt = make_optimizer(oo, *model);
    try {
      read_checkpoint(path, *model, *opt);
    } catch (const CheckpointMismatch&) {
      throw;
    } catch (const UserError& e) {
      if (cands.size() == 1) throw;
      std::fprintf(stderr, "cnnscale: export: skipping %s: %s\n", path.c_str(), e.what());
      skipped = path;
      continue;
    }
    bytes = nn::onnx_export(mg, model->param_data(), CNNSCALE_VERSION);
    break;
  }
  if (bytes.empty()) fail("export: no checkpoint of ", src, " reads back sound (the last tried: ", skipped, ")");
  write_file_atomic(out, bytes);
  std::printf("wrote %s: %s at step %lld (%s), input N x %s, %d outputs, %zu bytes, opset 17\n", out.c_str(),
              meta.model.c_str(), static_cast<long long>(meta.step), path.c_str(), in.text().c_str(), classes,
              bytes.size());
  return 0;
}

}  // namespace cnnscale::cli
