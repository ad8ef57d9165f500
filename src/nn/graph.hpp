// graph.hpp — the network as a static graph: nodes in topological order (also the
// PyTorch registration order), their shapes, and the parameter table with the flat
// layout (reverse registration order). Built by GraphBuilder; run by Net (net.hpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/model.hpp"
#include "util/sample_shape.hpp"

namespace cnnscale::nn {

enum class Op { conv, relu, maxpool, avgpool, dropout, flatten, linear, bn, add, act, mul, concat, stochastic_depth, layernorm, layer_scale, channel_slice,
                channel_shuffle, adaptive_avgpool, deconv, upsample };

// Up-sampling (Op::upsample), as F.interpolate's modes: 'nearest', 'bilinear' with
// align_corners False (PyTorch's default) or True (nn.UpsamplingBilinear2d's).
enum class Resample { nearest, bilinear, bilinear_align_corners };

// Element-wise activations other than ReLU (Op::act), with PyTorch's definitions and
// gradients: ReLU6 (hardtanh(0, 6): gradient where 0 < x < 6), sigmoid, SiLU (x·σ(x)),
// hard-swish (x·relu6(x+3)/6), GELU (erf form), hard-sigmoid (relu6(x+3)/6: gradient 1/6
// where -3 < x < 3, as hardsigmoid_backward), leaky ReLU (x for x > 0, else slope·x;
// gradient slope where x ≤ 0, as leaky_relu_backward), tanh, scale (slope·x: CosmoFlow's
// output scale_1p2, the factor in Node::slope).
enum class Act { relu6, sigmoid, silu, hardswish, gelu, hardsigmoid, leaky_relu, tanh, scale };
const char* act_name(Act a);  // the spec's and PyTorch's name: "relu6", "silu", ...

// A tensor's per-sample shape: c×h×w, a volume c×d×h×w (d ≥ 1: the 3-D layers, Conv3d,
// MaxPool3d, BatchNorm3d, run on it), or `flat` features (c = features, h = w = 1, d = 0).
struct Shape {
  int c = 0, h = 1, w = 1;
  bool flat = false;
  int d = 0;  // 0: not a volume
  bool volume() const { return d > 0; }
  int64_t numel() const { return int64_t{c} * (d > 0 ? d : 1) * h * w; }
};
// The dims of a batch of n tensors of shape s: {n, c}, {n, c, h, w} or {n, c, d, h, w}.
std::vector<int64_t> batch_dims(int64_t n, const Shape& s);
// "C×H×W", "C×D×H×W" or "C" (messages).
std::string shape_text(const Shape& s);

// kaiming_uniform: PyTorch's default for conv/linear weights (a=√5, bound 1/√fan_in);
// kaiming_normal_fan_out: torchvision's ResNet convs, kaiming_normal_(mode='fan_out',
// nonlinearity='relu'), i.e. N(0, 2/fan_out) with fan_out = out·k·k.
// kaiming_normal_fan_in: kaiming_normal_() with its defaults (DenseNet's convs), N(0, 2/fan_in);
// kaiming_uniform_relu: kaiming_uniform_() with its defaults (SqueezeNet's convs),
// U(±√(6/fan_in)); uniform_fan_out_sigmoid: kaiming_uniform_(mode='fan_out',
// nonlinearity='sigmoid') (MNASNet's classifier), U(±√(3/fan_out)); uniform_inv_sqrt_fan_out:
// U(±1/√fan_out) (EfficientNet's classifier: uniform_(-1/√out_features, 1/√out_features));
// normal_0_02: N(0, 0.02²) (ConvNeXt's trunc_normal_(std=0.02), whose ±2 cut is 100σ out);
// constant: ParamDef::value (ConvNeXt's layer scale, 1e-6); given: ParamDef::given, values
// from a file (an ONNX model's initializers: nn/onnx_import.hpp).
enum class Init {
  kaiming_uniform,
  fan_in_bias,
  ones,
  zeros,
  kaiming_normal_fan_out,
  normal_0_01,
  kaiming_normal_fan_in,
  kaiming_uniform_relu,
  uniform_fan_out_sigmoid,
  uniform_inv_sqrt_fan_out,
  normal_0_02,
  constant,
  given
};

struct ParamDef {
  ParamInfo info;
  Init init = Init::zeros;
  int64_t fan_in = 0;
  int64_t fan_out = 0;  // conv weights: out·k·k
  double value = 0;     // Init::constant
  std::shared_ptr<const std::vector<float>> given;  // Init::given: numel values, PyTorch's layout
};

struct Node {
  Op op = Op::relu;
  std::vector<int> inputs;   // tensor ids: 0 = network input, k+1 = output of node k
                             // (concat: two or more, distinct)
  Shape in, out;             // in = shape of inputs[0]
  int out_channels = 0;      // conv / linear
  int kernel = 0, stride = 1, pad = 0;
  // conv: extra zero padding at the end of every spatial dim (PyTorch's padding='same' for an
  // even kernel, Keras's 'same': Conv3d(k=2, padding='same') is pad 0, pad_end 1).
  int pad_end = 0;
  int groups = 1;            // conv: channel groups (PyTorch's groups; in.c = depthwise); channel_shuffle: groups
  int slice_begin = 0, slice_end = 0;  // channel_slice: the input channels [begin, end)
  Act act = Act::relu6;      // act: which activation
  float slope = 0.01f;       // act leaky_relu: the negative slope (PyTorch's default 0.01)
  Resample resample = Resample::nearest;  // upsample: the mode (the factor is `stride`)
  int kernel_w = 0;          // pools: window width (= kernel except gap on a non-square input)
  bool ceil_mode = false;    // maxpool: PyTorch's ceil_mode (the output size rounded up)
  bool bias = true;          // conv
  double p = 0.0;            // dropout; stochastic_depth: the drop probability
  double momentum = 0.1;     // bn: running-statistics momentum (PyTorch's; MNASNet's is 0.0003)
  double eps = 1e-5;         // bn, layernorm: PyTorch's eps (MobileNetV3's bn 0.001, ConvNeXt's layer norm 1e-6)
  int index = 0;             // node index (dropout hash, messages)
  bool fused_relu = false;   // relu: computed by the preceding conv (post-op); conv: has one
  // relu (fused) → maxpool with kernel == stride: the maxpool's backward also applies the
  // relu's backward (writes the conv output's gradient), the relu's backward is skipped.
  bool relu_into_pool = false;
  // bn → relu when the relu is the batch-norm output's only reader: the batch-norm writes
  // relu(bn(x)) straight into the relu's output (oneDNN's fuse_norm_relu, a bit mask as
  // workspace) and applies the relu's backward inside its own; the relu node does nothing.
  // Bit-identical to the two layers (tests/nn/test_nn_memory.cpp); saves a pass over the
  // activation forward and two backward (docs/performance.md). CNNSCALE_NO_BN_RELU_FUSION=1
  // turns it off.
  bool bn_relu = false;
  // This conv or batch-norm writes the relu after it (fused_relu / bn_relu): the relu's
  // output is its output too.
  bool writes_next_relu() const { return (op == Op::conv && fused_relu) || (op == Op::bn && bn_relu); }
  // relu (not fused) / add: the output is written over inputs[0] (data, and the gradient
  // shares one buffer too), as torchvision's ReLU(inplace=True). Only when the layer is
  // that tensor's only reader and its producer's backward does not read its own output
  // (conv without fused relu, bn, linear, add); relu's backward then works from dst.
  bool in_place = false;
  std::vector<int> params;   // indices into Graph::params (registration order)
  size_t flat_begin = 0, flat_end = 0;  // the node's range in the flat buffers
};

struct Graph {
  SampleShape input;
  int classes = 0;
  std::vector<Node> nodes;
  std::vector<ParamDef> params;  // registration (state_dict) order; info.offset = flat layout
  std::vector<ParamInfo> infos;  // same order, for Model::params()
  size_t param_count = 0;
  int output = 0;                // tensor id of the logits (flat, classes; dense: classes×H×W or ×D×H×W)
  // A dense output (segmentation): the logits are classes × H × W per sample, a score per
  // class and pixel, as PyTorch's segmentation models end (a 1×1 conv to the classes).
  bool dense_output = false;
  int out_h = 1, out_w = 1;      // the dense output's H×W (1×1 when flat)
  int out_d = 0;                 // a dense 3-D output's depth (3-D segmentation: classes × D × H × W); else 0
  int64_t out_positions() const { return int64_t{out_d > 0 ? out_d : 1} * out_h * out_w; }  // per sample
  int64_t output_numel() const { return int64_t{classes} * out_positions(); }                 // per sample
  int tensor_count() const { return static_cast<int>(nodes.size()) + 1; }
};

// "conv", "relu", "maxpool", ... (messages, tools).
const char* op_name(Op op);

// Builds a Graph node by node. Each call returns the id of the tensor it produces.
// Shape mistakes throw UserError (a spec-level caller adds the position).
class GraphBuilder {
 public:
  explicit GraphBuilder(const SampleShape& input);
  int input() const { return 0; }
  const Shape& shape(int tensor) const { return shapes_.at(tensor); }

  // PyTorch's Conv2d(in, out, k, stride, pad, groups=groups, bias=bias): groups must divide
  // both channel counts; the weight is out × in/groups × k × k.
  // On a volume: Conv3d with a k×k×k kernel (groups 1), weight out × in × k × k × k.
  // pad_end: extra padding at the end of each spatial dim (Node::pad_end).
  int conv(int x, const std::string& name, int out, int k, int stride, int pad, bool bias = true, int groups = 1,
           int pad_end = 0);
  // PyTorch's ConvTranspose2d(in, out, k, stride, pad, bias=bias) (groups 1, no output
  // padding, dilation 1): output (in − 1)·stride − 2·pad + k; the weight is in × out × k × k,
  // initialised as PyTorch's (kaiming-uniform(a=√5) with fan_in = out·k², its dim 1).
  int deconv(int x, const std::string& name, int out, int k, int stride, int pad, bool bias = true);
  // F.interpolate(x, scale_factor=scale, mode=...): H·scale × W·scale, no parameters.
  int upsample(int x, int scale, Resample mode);
  int relu(int x);
  int act(int x, Act a, float slope = 0.01f);  // an element-wise activation (Op::act); slope: leaky_relu's
  // Pools as PyTorch's MaxPool2d / AvgPool2d(count_include_pad=True): floor output
  // size; max-pool padding acts as -inf, average-pool padding as 0 counted in the window.
  // ceil_mode: PyTorch's MaxPool2d(ceil_mode=True): the output size rounded up, the last
  // window (which must start inside the input or its left padding) clipped to the input.
  // On a volume: MaxPool3d / AvgPool3d with k×k×k windows.
  int maxpool(int x, int k, int stride, int pad = 0, bool ceil_mode = false);
  int avgpool(int x, int k, int stride, int pad = 0);
  int gap(int x);  // AdaptiveAvgPool2d(1): an h×w window, any (also non-square) input
  int dropout(int x, double p);
  int flatten(int x);
  int linear(int x, const std::string& name, int out);
  int bn(int x, const std::string& name, double momentum = 0.1, double eps = 1e-5);  // BatchNorm3d on a volume
  int add(int a, int b);
  // x (c×h×w) times s (c×1×1) per channel (Op::mul: the scale of squeeze-and-excitation).
  int mul(int x, int s);
  // torchvision.ops.SqueezeExcitation(C, squeeze, activation, scale_activation):
  // x · gate(fc2(act(fc1(gap(x))))), fc1, fc2 1×1 convolutions with bias, parameters
  // NAME.fc1.*, NAME.fc2.*; act is ReLU (relu = true) or an Op::act, gate an Op::act
  // (torchvision's defaults: ReLU and sigmoid; MobileNetV3: hard-sigmoid; EfficientNet: SiLU).
  int se(int x, const std::string& name, int squeeze, bool relu = true, Act act = Act::silu,
         Act gate = Act::sigmoid);
  // torchvision.ops.StochasticDepth(p, "row") (Op::stochastic_depth): in training each
  // sample is kept with probability 1 − p and then scaled by 1/(1 − p), or zeroed; the
  // draw is a function of (seed, step, node, global sample id) as dropout's
  // (dropout_mask.hpp), so a step does not depend on how the batch is split over ranks.
  // Evaluation, and p = 0: the identity.
  int stochastic_depth(int x, double p);
  // ConvNeXt's LayerNorm2d(C, eps) (Op::layernorm): nn.LayerNorm over the channels of each
  // position of a c×h×w tensor; parameters NAME.weight (ones), NAME.bias (zeros), C each.
  int layernorm2d(int x, const std::string& name, double eps);
  // ConvNeXt's layer scale (Op::layer_scale): x · γ per channel, γ the parameter NAME itself
  // (C×1×1, every value `init`).
  int layer_scale(int x, const std::string& name, double init);
  // nn.Linear(C, out) applied at every position of a c×h×w tensor (ConvNeXt's permute →
  // Linear → permute): a 1×1 convolution with bias whose weight is registered as out × C,
  // nn.Linear's shape (the same bytes as out × C × 1 × 1).
  int pointwise_linear(int x, const std::string& name, int out);
  // x[:, begin:end] of a c×h×w tensor (Op::channel_slice; ShuffleNetV2's x.chunk(2, dim=1)).
  int channel_slice(int x, int begin, int end);
  // torchvision's channel_shuffle(x, groups) (Op::channel_shuffle): output channel i·g + k is
  // input channel k·(C/g) + i; groups must divide C.
  int channel_shuffle(int x, int groups);
  // nn.AdaptiveAvgPool2d((oh, ow)) (Op::adaptive_avgpool; VGG's 7×7): PyTorch's bins, any
  // input size (an output larger than the input repeats values).
  int adaptive_avgpool(int x, int oh, int ow);
  // torch.cat(xs, dim=1): two or more distinct tensors of one h×w (or all flat), their
  // channels one after another in the order given (Op::concat).
  int concat(const std::vector<int>& xs);

  // Init of the conv weights registered from now on (default: PyTorch's kaiming_uniform;
  // the torchvision ResNets use kaiming_normal_fan_out).
  void set_conv_init(Init init) { conv_init_ = init; }
  // Overrides the init of an already registered parameter (zero_init_residual).
  void set_init(const std::string& name, Init init);
  // The parameter NAME starts from these values (Init::given; an ONNX initializer): a
  // UserError when their count is not the parameter's.
  void set_given(const std::string& name, std::shared_ptr<const std::vector<float>> values);

  // Finishes: the output must be `classes` features (a c×1×1 tensor is flattened).
  Graph finish(int output, int classes);

 private:
  int push(Node n, Shape out);
  int pool(Op op, int x, int kh, int kw, int stride, int pad, bool ceil_mode = false);  // maxpool / avgpool
  // The layers that have no 3-D form yet refuse a volume input (UserError naming `what`).
  void no_volume(int x, const char* what) const;
  void param(Node& n, const std::string& name, std::vector<int64_t> shape, bool trainable, bool decay, Init init,
             int64_t fan_in);
  Graph g_;
  std::vector<Shape> shapes_;
  Init conv_init_ = Init::kaiming_uniform;
  int windowed(Op op, int x, const std::string& name, int out, int k, int stride, int pad, bool bias, int groups,
               std::vector<int64_t> w, Shape out_shape, int pad_end = 0);  // conv's and deconv's node and parameters
};

// A model's graph with its name and canonical spec: what the CPU model (Net) and the
// GPU model (nn/cuda) both run, so that they share names, spec errors and the flat layout.
struct ModelGraph {
  Graph graph;
  std::string name, spec;
  // What a run's identity (train/run_dir.hpp) records for the model; empty: the spec. An
  // ONNX file's is "onnx sha256:HEX" of the bytes it was read from: its content, not its
  // path (as for the data set), so a moved copy resumes and an edited file does not.
  std::string identity = {};
};

// The graph of a built-in model (mnist_cnn, lenet5, resnet20, the torchvision ResNets
// resnet18/34/50/101/152) or of a one-line spec, for inputs of the given shape
// (models.cpp; the UserErrors of make_model in model.hpp).
// Also applies the default thread count once (nn::ensure_threads).
// The graph's output must fit options.task: flat `classes` scores per sample, or for a
// segmentation task `classes` × H × W of the input's H×W (UserErrors naming the fix).
ModelGraph build_model_graph(const std::string& name_or_spec, const SampleShape& input, int classes,
                             const ModelOptions& options = {});

// The GPU model's bf16 activation store (--precision bf16; docs/gpu.md "bf16 on the
// GPU"): per tensor id, 1 where the tensor is kept as bf16 NHWC between layers, 0 where
// it stays fp32 NCHW. A convolution writes bf16; batch-norm, relu and the pools keep their
// input's type; an add is bf16 when both inputs are; the network input, flatten (which
// widens to fp32 in PyTorch's C·H·W order), dropout and linear are fp32, and so is any
// tensor read by dropout or linear. The rule is a fixpoint that only ever turns tensors
// fp32 (a type a reader cannot take flows back to the convolution that wrote it, which
// can write either), so every layer sees inputs of one type and output of that type,
// conv and flatten excepted. The CPU model's rule (net.cpp) differs where oneDNN takes
// any type (its pools/flatten/linear read bf16); here the fp32 layers are the classifier
// only, which the GPU converts anyway.
std::vector<char> gpu_bf16_tensors(const Graph& g);

// The GPU model's batch-norm fusion (CNNSCALE_GPU_BN=own; docs/gpu.md; CudaNet::
// assign_fusion runs it, the CUDA layers follow it; planned here so that the CPU tests
// check it on every model). Given `nhwc`, per tensor id whether the tensor is kept in the
// NHWC activation store (gpu_bf16_tensors, or the fp32 store; empty: none), and `fuse`:
//  - which batch norms absorb the layers after them (bn: per node, `out` the tensor the
//    batch norm writes, -1 its own; `z` the residual it adds before the ReLU, -1 none;
//    `relu`), where the store's tensors allow and the batch norm's output has one reader
//    that is not the network's output:
//      bn → relu          (the relu's input its only reader)      → relu(bn(x))
//      bn → add → relu    (the add's output read by the relu only) → relu(bn(x) + z)
//    An add that another batch norm already absorbed leaves this one unfused (the
//    downsampling batch norm of a ResNet block, whose output is then z); so does an add of
//    the batch norm's own input (z = x: dz and dx would be one gradient, written twice);
//  - absorbed: per node, whether a fused batch norm does its work (it runs nothing);
//  - dead: per tensor id, never written nor read (a fused batch norm writes past its own
//    output and an absorbed add's): no buffers; empty when none;
//  - order: the nodes that run, in forward order: node order without the absorbed nodes,
//    a batch norm that absorbed an add moved to the add's place, where z is ready
//    (backward runs it reversed);
//  - ready_after[i]: every gradient of the flat range [0, value) is final once the node
//    at order[i] has run its backward (the flat layout is reverse registration order, so
//    in plain reverse node order this is each node's flat_end).
// Without `fuse` (or without a store): no batch norm fused, every node in node order.
struct BnFusion {
  int out = -1, z = -1;
  bool relu = false;
};
struct FusionPlan {
  std::vector<BnFusion> bn;          // per node; empty without fusion
  std::vector<char> absorbed;        // per node; empty without fusion
  std::vector<char> dead;            // per tensor id; empty: none
  std::vector<int> order;            // node indices
  std::vector<size_t> ready_after;   // per order position
};
FusionPlan plan_gpu_fusion(const Graph& g, const std::vector<char>& nhwc, bool fuse);

// Initialises one parameter as PyTorch does by default (see model.hpp), from seed
// (init.cpp): the CPU and the GPU model start from the same bits.
void init_param(const ParamDef& p, uint64_t seed, float* data);

}  // namespace cnnscale::nn
