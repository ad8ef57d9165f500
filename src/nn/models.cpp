// models.cpp — build_model_graph and make_model: the built-in models (mnist_cnn, lenet5,
// resnet20, torchvision's resnet18/34/50/101/152) and models from a one-line spec
// (layer-index names like nn.Sequential), as a Graph that the CPU model (Net) or the
// GPU model (nn/cuda) runs. See docs/models.md.
#include <algorithm>
#include <cmath>

#include "nn/cuda_model.hpp"
#include "nn/graph.hpp"
#include "nn/models_cosmoflow.hpp"
#include "nn/models_torchvision.hpp"
#include "nn/models_unet.hpp"
#include "nn/net.hpp"
#include "nn/onnx_import.hpp"
#include "nn/spec.hpp"
#include "nn/task.hpp"
#include "nn/threads.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace nn {
namespace {

std::string mnist_spec(int classes) {
  return "conv(32,3) relu conv(64,3) relu maxpool(2) dropout(0.25) flatten linear(128) relu dropout(0.5) linear(" +
         std::to_string(classes) + ")";
}

ModelGraph mnist_cnn(const SampleShape& in, int classes) {
  GraphBuilder b(in);
  int x = b.conv(b.input(), "conv1", 32, 3, 1, 0);
  x = b.relu(x);
  x = b.conv(x, "conv2", 64, 3, 1, 0);
  x = b.relu(x);
  x = b.maxpool(x, 2, 2);
  x = b.dropout(x, 0.25);
  x = b.flatten(x);
  x = b.linear(x, "fc1", 128);
  x = b.relu(x);
  x = b.dropout(x, 0.5);
  x = b.linear(x, "fc2", classes);
  return {b.finish(x, classes), "mnist_cnn", mnist_spec(classes)};
}

// LeNet-5, modern variant: ReLU and 2×2 max-pool (not tanh/avg-pool), conv1 padded 2 so
// that a 28×28 input gives the classic 32×32 geometry.
ModelGraph lenet5(const SampleShape& in, int classes) {
  GraphBuilder b(in);
  int x = b.conv(b.input(), "conv1", 6, 5, 1, 2);
  x = b.relu(x);
  x = b.maxpool(x, 2, 2);
  x = b.conv(x, "conv2", 16, 5, 1, 0);
  x = b.relu(x);
  x = b.maxpool(x, 2, 2);
  x = b.flatten(x);
  x = b.linear(x, "fc1", 120);
  x = b.relu(x);
  x = b.linear(x, "fc2", 84);
  x = b.relu(x);
  x = b.linear(x, "fc3", classes);
  const std::string spec = "conv(6,5,1,2) relu maxpool(2) conv(16,5) relu maxpool(2) flatten linear(120) relu "
                           "linear(84) relu linear(" + std::to_string(classes) + ")";
  return {b.finish(x, classes), "lenet5", spec};
}

// ResNet-20 for CIFAR (He et al. 2016, §4.2): 3×3 conv 16, three stages of 3 basic
// blocks (16, 32, 64 channels; stride 2 at the first block of stages 2 and 3), global
// average pool, fc. Shortcuts: option B (1×1 conv stride 2 + batch-norm where the shape
// changes, identity elsewhere). Convs have no bias (followed by batch-norm).
ModelGraph resnet20(const SampleShape& in, int classes) {
  GraphBuilder b(in);
  int x = b.conv(b.input(), "conv1", 16, 3, 1, 1, false);
  x = b.bn(x, "bn1");
  x = b.relu(x);
  int planes_in = 16;
  const int planes[3] = {16, 32, 64};
  for (int s = 0; s < 3; ++s) {
    for (int k = 0; k < 3; ++k) {
      const std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(k);
      const int stride = (s > 0 && k == 0) ? 2 : 1;
      int y = b.conv(x, p + ".conv1", planes[s], 3, stride, 1, false);
      y = b.bn(y, p + ".bn1");
      y = b.relu(y);
      y = b.conv(y, p + ".conv2", planes[s], 3, 1, 1, false);
      y = b.bn(y, p + ".bn2");
      int sc = x;
      if (stride != 1 || planes_in != planes[s]) {
        sc = b.conv(x, p + ".shortcut.0", planes[s], 1, stride, 0, false);
        sc = b.bn(sc, p + ".shortcut.1");
      }
      x = b.relu(b.add(y, sc));
      planes_in = planes[s];
    }
  }
  x = b.gap(x);
  x = b.flatten(x);
  x = b.linear(x, "fc", classes);
  return {b.finish(x, classes), "resnet20", "resnet20"};
}

// torchvision's ResNets (torchvision.models.resnet, v1.5: the stride of a Bottleneck is
// on its 3×3 conv): stem conv1 7×7/2 pad 3 (no bias), bn1, relu, maxpool 3×3/2 pad 1;
// layer1..4 of BasicBlocks (expansion 1) or Bottlenecks (expansion 4) with 64, 128,
// 256, 512 planes, stride 2 at the first block of layers 2-4; downsample.0/1 (1×1 conv
// with the block's stride + bn) where the shape changes; adaptive average pool to 1×1;
// fc. Names, registration order and shapes are torchvision's state_dict ones.
// ResNeXt (resnext50_32x4d, resnext101_32x8d/64x4d) and Wide ResNet (wide_resnet50_2,
// wide_resnet101_2) are the Bottleneck ResNets with torchvision's groups and
// width_per_group: the block's 1×1 and 3×3 convs are int(planes·width_per_group/64)·groups
// wide, the 3×3 one grouped.
// Initialisation as torchvision: convs kaiming_normal_(fan_out, relu), bn 1/0, fc as
// nn.Linear; zero_init_residual zeroes each block's last bn weight.
ModelGraph torchvision_resnet(const std::string& name, const SampleShape& in, int classes, const ModelOptions& opt) {
  struct Arch {
    const char* name;
    bool bottleneck;
    int blocks[4];
    int groups = 1, width_per_group = 64;  // ResNeXt / Wide ResNet: the bottleneck's 3×3 conv
  };
  static const Arch archs[] = {{"resnet18", false, {2, 2, 2, 2}},
                               {"resnet34", false, {3, 4, 6, 3}},
                               {"resnet50", true, {3, 4, 6, 3}},
                               {"resnet101", true, {3, 4, 23, 3}},
                               {"resnet152", true, {3, 8, 36, 3}},
                               {"resnext50_32x4d", true, {3, 4, 6, 3}, 32, 4},
                               {"resnext101_32x8d", true, {3, 4, 23, 3}, 32, 8},
                               {"resnext101_64x4d", true, {3, 4, 23, 3}, 64, 4},
                               {"wide_resnet50_2", true, {3, 4, 6, 3}, 1, 128},
                               {"wide_resnet101_2", true, {3, 4, 23, 3}, 1, 128}};
  const Arch* a = nullptr;
  for (const auto& c : archs)
    if (name == c.name) a = &c;
  if (!a) internal_error("torchvision_resnet asked for ", name);
  if (in.height < 32 || in.width < 32)
    fail(name, " needs images of at least 32x32 (its stem and four stages halve the size five times), got ", in.height,
         "x", in.width, "; use resnet20 or a spec for smaller images");
  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_normal_fan_out);
  int x = b.conv(b.input(), "conv1", 64, 7, 2, 3, false);
  x = b.bn(x, "bn1");
  x = b.relu(x);
  x = b.maxpool(x, 3, 2, 1);
  const int expansion = a->bottleneck ? 4 : 1;
  int inplanes = 64;
  for (int s = 0; s < 4; ++s) {
    const int planes = 64 << s;
    for (int k = 0; k < a->blocks[s]; ++k) {
      const std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(k);
      const int stride = (s > 0 && k == 0) ? 2 : 1;
      int y;
      std::string last_bn;
      if (a->bottleneck) {
        // torchvision: width = int(planes · base_width / 64) · groups
        const int width = planes * a->width_per_group / 64 * a->groups;
        y = b.conv(x, p + ".conv1", width, 1, 1, 0, false);
        y = b.relu(b.bn(y, p + ".bn1"));
        y = b.conv(y, p + ".conv2", width, 3, stride, 1, false, a->groups);
        y = b.relu(b.bn(y, p + ".bn2"));
        y = b.conv(y, p + ".conv3", planes * expansion, 1, 1, 0, false);
        y = b.bn(y, p + ".bn3");
        last_bn = p + ".bn3";
      } else {
        y = b.conv(x, p + ".conv1", planes, 3, stride, 1, false);
        y = b.relu(b.bn(y, p + ".bn1"));
        y = b.conv(y, p + ".conv2", planes, 3, 1, 1, false);
        y = b.bn(y, p + ".bn2");
        last_bn = p + ".bn2";
      }
      if (opt.zero_init_residual) b.set_init(last_bn + ".weight", Init::zeros);
      int sc = x;
      if (stride != 1 || inplanes != planes * expansion) {  // registered after the main path, as torchvision
        sc = b.conv(x, p + ".downsample.0", planes * expansion, 1, stride, 0, false);
        sc = b.bn(sc, p + ".downsample.1");
      }
      x = b.relu(b.add(y, sc));
      inplanes = planes * expansion;
    }
  }
  x = b.gap(x);
  x = b.flatten(x);
  x = b.linear(x, "fc", classes);
  return {b.finish(x, classes), name, name};
}

bool is_torchvision_resnet(const std::string& name) {
  return name == "resnet18" || name == "resnet34" || name == "resnet50" || name == "resnet101" || name == "resnet152" ||
         name == "resnext50_32x4d" || name == "resnext101_32x8d" || name == "resnext101_64x4d" ||
         name == "wide_resnet50_2" || name == "wide_resnet101_2";
}

// Adds the layers of a spec; names are "<prefix><index>.weight" as nn.Sequential.
int build_spec(GraphBuilder& b, int x, const std::vector<LayerSpec>& layers, const std::string& prefix,
               const std::string& text) {
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& L = layers[i];
    const std::string name = prefix + std::to_string(i);
    if (L.kind == LayerKind::cat) {  // branch k's layers are NAME.k.j
      std::vector<int> ys;
      for (size_t k = 0; k < L.branches.size(); ++k)
        ys.push_back(L.branches[k].empty() ? x : build_spec(b, x, L.branches[k], name + "." + std::to_string(k) + ".", text));
      try {
        x = b.concat(ys);
      } catch (const UserError& e) {
        spec_error(text, L.pos, L.len, e.what());
      }
      continue;
    }
    if (L.kind == LayerKind::res) {
      const int y = build_spec(b, x, L.body, name + ".", text);
      try {
        x = b.add(y, x);
      } catch (const UserError& e) {
        spec_error(text, L.pos, L.len, e.what());
      }
      continue;
    }
    try {
      switch (L.kind) {
        case LayerKind::conv: x = b.conv(x, name, L.out, L.kernel, L.stride, L.pad, true, L.groups); break;
        case LayerKind::relu: x = b.relu(x); break;
        case LayerKind::deconv: x = b.deconv(x, name, L.out, L.kernel, L.stride, L.pad); break;
        case LayerKind::upsample:
          x = b.upsample(x, L.stride,
                         L.act == "upsample" ? Resample::nearest
                         : L.ceil_mode       ? Resample::bilinear_align_corners
                                             : Resample::bilinear);
          break;
        case LayerKind::act: {
          Act a = Act::relu6;
          for (Act k : {Act::relu6, Act::sigmoid, Act::silu, Act::hardswish, Act::gelu, Act::hardsigmoid,
                        Act::leaky_relu, Act::tanh, Act::scale})
            if (L.act == act_name(k)) a = k;
          x = b.act(x, a, static_cast<float>(a == Act::leaky_relu || a == Act::scale ? L.p : 0.01));
          break;
        }
        case LayerKind::maxpool: x = b.maxpool(x, L.kernel, L.stride, L.pad, L.ceil_mode); break;
        case LayerKind::avgpool: x = b.avgpool(x, L.kernel, L.stride, L.pad); break;
        case LayerKind::gap: x = b.gap(x); break;
        case LayerKind::dropout: x = b.dropout(x, L.p); break;
        case LayerKind::sdepth: x = b.stochastic_depth(x, L.p); break;
        case LayerKind::flatten: x = b.flatten(x); break;
        case LayerKind::linear: x = b.linear(x, name, L.out); break;
        case LayerKind::bn: x = b.bn(x, name); break;
        case LayerKind::slice: x = b.channel_slice(x, L.kernel, L.out); break;
        case LayerKind::shuffle: x = b.channel_shuffle(x, L.groups); break;
        case LayerKind::adaptivepool: x = b.adaptive_avgpool(x, L.kernel, L.out); break;
        case LayerKind::layernorm: x = b.layernorm2d(x, name, 1e-5); break;
        case LayerKind::layerscale: x = b.layer_scale(x, name + ".layer_scale", L.p); break;
        case LayerKind::se: x = b.se(x, name, L.out); break;
        case LayerKind::res:
        case LayerKind::cat: break;
      }
    } catch (const UserError& e) {
      spec_error(text, L.pos, L.len, e.what());
    }
  }
  return x;
}

ModelGraph spec_graph(const std::string& text, const SampleShape& input, int classes) {
  const auto layers = parse_spec(text);
  GraphBuilder b(input);
  const int x = build_spec(b, b.input(), layers, "", text);
  Graph g;
  try {
    g = b.finish(x, classes);
  } catch (const UserError& e) {
    const LayerSpec& last = layers.back();
    spec_error(text, last.pos, last.len, e.what());
  }
  const std::string canon = format_spec(layers);
  return {std::move(g), canon, canon};
}

}  // namespace

namespace {

ModelGraph any_model_graph(const std::string& name_or_spec, const SampleShape& input, int classes,
                           const ModelOptions& options) {
  // A classifier needs two classes; a regression (or multi-label) model one output or more.
  const bool classifier = !options.any_output && (!options.task || options.task->kind() == TaskKind::classification ||
                                                  options.task->kind() == TaskKind::segmentation);
  if (classes < (classifier ? 2 : 1))
    fail(classifier ? "a classifier needs at least 2 classes, got " : "a model needs at least 1 output, got ", classes);
  const auto& names = builtin_models();
  if (input.volume() && name_or_spec != "cosmoflow" && name_or_spec != "unet" &&
      std::find(names.begin(), names.end(), name_or_spec) != names.end())
    fail("--model ", name_or_spec, " is a 2-D network, but the data are volumes (", input.text(), "); for volumes use ",
         "cosmoflow, unet (3-D on volumes), a one-line spec (conv, deconv, maxpool, avgpool, bn and cat are 3-D on ",
         "volumes) or an ",
         "ONNX export of a 3-D model");
  if (is_torchvision_resnet(name_or_spec)) return torchvision_resnet(name_or_spec, input, classes, options);
  if (options.zero_init_residual)
    fail("--zero-init-residual applies to the torchvision ResNets (resnet18/34/50/101/152, resnext*, wide_resnet*), "
         "not to ", name_or_spec);
  if (is_onnx_model(name_or_spec)) return onnx_model_graph(name_or_spec, input, classes);
  if (int width = 0, kernel = 0; parse_cosmoflow_name(name_or_spec, &width, &kernel))
    return cosmoflow_model(name_or_spec, input, classes);
  if (int depth = 0, width = 0; parse_unet_name(name_or_spec, &depth, &width))
    return unet_model(name_or_spec, input, classes);
  if (name_or_spec == "mnist_cnn") return mnist_cnn(input, classes);
  if (name_or_spec == "lenet5") return lenet5(input, classes);
  if (name_or_spec == "resnet20") return resnet20(input, classes);
  if (name_or_spec == "mobilenet_v2") return torchvision_mobilenet_v2(input, classes);
  if (is_torchvision_densenet(name_or_spec)) return torchvision_densenet(name_or_spec, input, classes);
  if (is_torchvision_regnet(name_or_spec)) return torchvision_regnet(name_or_spec, input, classes);
  if (is_torchvision_mnasnet(name_or_spec)) return torchvision_mnasnet(name_or_spec, input, classes);
  if (is_torchvision_mobilenet_v3(name_or_spec)) return torchvision_mobilenet_v3(name_or_spec, input, classes);
  if (is_torchvision_efficientnet(name_or_spec)) return torchvision_efficientnet(name_or_spec, input, classes);
  if (is_torchvision_convnext(name_or_spec)) return torchvision_convnext(name_or_spec, input, classes);
  if (is_torchvision_shufflenet(name_or_spec)) return torchvision_shufflenet(name_or_spec, input, classes);
  if (is_torchvision_vgg(name_or_spec)) return torchvision_vgg(name_or_spec, input, classes);
  if (name_or_spec == "squeezenet1_0" || name_or_spec == "squeezenet1_1")
    return torchvision_squeezenet(name_or_spec, input, classes);
  return spec_graph(name_or_spec, input, classes);
}

}  // namespace

ModelGraph build_model_graph(const std::string& name_or_spec, const SampleShape& input, int classes,
                             const ModelOptions& options) {
  ensure_threads();
  ModelGraph mg = any_model_graph(name_or_spec, input, classes, options);
  const Graph& g = mg.graph;
  if (options.any_output) return mg;
  const bool segmentation = options.task && options.task->kind() == TaskKind::segmentation;
  // A dense output's and the input's positions: "K×H×W" / "K×D×H×W".
  auto dense = [&](int d, int h, int w) {
    return std::to_string(classes) + "x" + (d > 0 ? std::to_string(d) + "x" : "") + std::to_string(h) + "x" +
           std::to_string(w);
  };
  const int in_d = input.volume() ? input.depth : 0;
  if (!segmentation && g.dense_output)
    fail("the model must end in ", classes, " features (end with flatten/linear or gap), got ",
         dense(g.out_d, g.out_h, g.out_w), " (a score per ", g.out_d > 0 ? "voxel" : "pixel",
         " is a segmentation model's output: its data set needs label maps, ", g.out_d > 0 ? "N×D×H×W" : "N×H×W", ")");
  if (segmentation && (!g.dense_output || g.out_d != in_d || g.out_h != input.height || g.out_w != input.width))
    fail("a segmentation data set needs a model that ends in ", dense(in_d, input.height, input.width),
         " (a score per class and ", in_d > 0 ? "voxel" : "pixel", " of its ", input.text(), " samples), but ", mg.name,
         " ends in ", g.dense_output ? dense(g.out_d, g.out_h, g.out_w) : std::to_string(classes) + " features",
         "; end the model in conv(", classes, ",1) at the input's size (an encoder–decoder such as unet)");
  return mg;
}

}  // namespace nn

std::unique_ptr<Model> make_model(const std::string& name_or_spec, const SampleShape& input, int classes, int device,
                                  const ModelOptions& options) {
  if (device >= 0) return make_cuda_model(name_or_spec, input, classes, device, options);
  nn::ModelGraph mg = nn::build_model_graph(name_or_spec, input, classes, options);
  return std::make_unique<nn::Net>(std::move(mg.graph), std::move(mg.name), std::move(mg.spec), std::move(mg.identity),
                                   options.task);
}

}  // namespace cnnscale
