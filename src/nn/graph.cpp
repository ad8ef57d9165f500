// graph.cpp — GraphBuilder: shape inference, parameter registration, flat layout.
#include "nn/graph.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "util/error.hpp"

namespace cnnscale::nn {

std::vector<int64_t> batch_dims(int64_t n, const Shape& s) {
  if (s.flat) return {n, s.c};
  if (s.volume()) return {n, s.c, s.d, s.h, s.w};
  return {n, s.c, s.h, s.w};
}

std::string shape_text(const Shape& s) {
  if (s.flat) return std::to_string(s.c);
  return std::to_string(s.c) + "x" + (s.volume() ? std::to_string(s.d) + "x" : "") + std::to_string(s.h) + "x" +
         std::to_string(s.w);
}

GraphBuilder::GraphBuilder(const SampleShape& input) {
  g_.input = input;
  if (input.channels < 1 || input.height < 1 || input.width < 1 || input.depth < 0)
    fail("bad input shape ", input.channels, "x", input.height, "x", input.width);
  Shape s{input.channels, input.height, input.width, false};
  s.d = input.depth;
  shapes_.push_back(s);
}

void GraphBuilder::no_volume(int x, const char* what) const {
  if (shape(x).volume())
    fail(what, " has no 3-D form in cnnscale yet and its input is a volume (", shape_text(shape(x)),
         "); the 3-D layers are conv, deconv, maxpool, avgpool, bn, relu, the activations, dropout, add, concat "
         "and flatten");
}

int GraphBuilder::push(Node n, Shape out) {
  n.index = static_cast<int>(g_.nodes.size());
  n.in = shapes_.at(n.inputs.at(0));
  n.out = out;
  g_.nodes.push_back(std::move(n));
  shapes_.push_back(out);
  return static_cast<int>(shapes_.size()) - 1;
}

void GraphBuilder::param(Node& n, const std::string& name, std::vector<int64_t> shape, bool trainable, bool decay,
                         Init init, int64_t fan_in) {
  ParamDef d;
  d.info.name = name;
  d.info.numel = 1;
  for (auto s : shape) d.info.numel *= static_cast<size_t>(s);
  d.info.shape = std::move(shape);
  d.info.trainable = trainable;
  d.info.decay = decay;
  d.init = init;
  d.fan_in = fan_in;
  for (const auto& p : g_.params)
    if (p.info.name == name) fail("duplicate parameter name ", name);
  n.params.push_back(static_cast<int>(g_.params.size()));
  g_.params.push_back(std::move(d));
}

static int out_size(int in, int k, int stride, int pad, int pad_end = 0) {
  return (in + 2 * pad + pad_end - k) / stride + 1;
}

int GraphBuilder::conv(int x, const std::string& name, int out, int k, int stride, int pad, bool bias, int groups,
                       int pad_end) {
  const Shape s = shape(x);
  if (s.flat) fail("conv needs a c×h×w input, got a flat one (conv after flatten/linear)");
  const int p2 = 2 * pad + pad_end;
  if (s.h + p2 < k || s.w + p2 < k || (s.volume() && s.d + p2 < k))
    fail("conv kernel ", k, " is larger than its (padded) input ", shape_text(s));
  if (pad >= k) fail("conv padding ", pad, " must be smaller than the kernel ", k);
  if (pad_end < 0 || pad + pad_end >= k) fail("conv end padding ", pad_end, " must leave the padding below the kernel ", k);
  if (groups < 1 || s.c % groups != 0 || out % groups != 0)
    fail("conv groups ", groups, " must divide both its input channels (", s.c, ") and its output channels (", out,
         "), as PyTorch's Conv2d requires");
  if (s.volume() && groups != 1) fail("a 3-D conv takes groups 1 only in cnnscale, got ", groups);
  Shape o{out, out_size(s.h, k, stride, pad, pad_end), out_size(s.w, k, stride, pad, pad_end), false};
  // PyTorch's fans of a weight out × in/groups × k × k (torch.nn.init's
  // _calculate_fan_in_and_fan_out: dims 1 and 0 times k²): in/groups·k² and out·k² (k³ in 3-D).
  std::vector<int64_t> w{out, s.c / groups, k, k};
  if (s.volume()) {
    o.d = out_size(s.d, k, stride, pad, pad_end);
    w.push_back(k);
  }
  return windowed(Op::conv, x, name, out, k, stride, pad, bias, groups, w, o, pad_end);
}

int GraphBuilder::deconv(int x, const std::string& name, int out, int k, int stride, int pad, bool bias) {
  const Shape s = shape(x);
  if (s.flat) fail("deconv needs a c×h×w input, got a flat one (deconv after flatten/linear)");
  if (k < 1 || stride < 1 || pad < 0) fail("deconv needs kernel ≥ 1, stride ≥ 1 and padding ≥ 0");
  auto size = [&](int i) { return int64_t{i - 1} * stride - 2 * pad + k; };
  const int64_t oh = size(s.h), ow = size(s.w), od = s.volume() ? size(s.d) : 1;
  if (oh < 1 || ow < 1 || od < 1)
    fail("deconv padding ", pad, " leaves no output for its ", shape_text(s), " input (kernel ", k, ", stride ", stride,
         ")");
  if (oh > (1 << 24) || ow > (1 << 24) || od > (1 << 24)) fail("deconv output of its ", shape_text(s), " input is too large");
  // A ConvTranspose2d weight is in × out × k × k (ConvTranspose3d: × k): torch.nn.init's
  // fan_in is its dim 1 (out·k², out·k³).
  std::vector<int64_t> w{s.c, out, k, k};
  Shape o{out, static_cast<int>(oh), static_cast<int>(ow), false};
  if (s.volume()) {
    w.push_back(k);
    o.d = static_cast<int>(od);
  }
  return windowed(Op::deconv, x, name, out, k, stride, pad, bias, 1, w, o);
}

// conv and deconv: the node, its weight (PyTorch's dims `w`, fans dims 1 and 0 times k²) and
// bias (bound 1/√fan_in).
int GraphBuilder::windowed(Op op, int x, const std::string& name, int out, int k, int stride, int pad, bool bias,
                           int groups, std::vector<int64_t> w, Shape out_shape, int pad_end) {
  Node n;
  n.op = op;
  n.inputs = {x};
  n.out_channels = out;
  n.kernel = k;
  n.stride = stride;
  n.pad = pad;
  n.pad_end = pad_end;
  n.bias = bias;
  n.groups = groups;
  int64_t window = 1;  // k² (k³ for a 3-D weight)
  for (size_t i = 2; i < w.size(); ++i) window *= w[i];
  const int64_t fan_in = w[1] * window;
  param(n, name + ".weight", w, true, true, conv_init_, fan_in);
  g_.params.back().fan_out = w[0] * window;
  if (bias) param(n, name + ".bias", {out}, true, false, Init::fan_in_bias, fan_in);
  return push(std::move(n), out_shape);
}

int GraphBuilder::upsample(int x, int scale, Resample mode) {
  const Shape s = shape(x);
  if (s.flat) fail("upsampling needs a c×h×w input, got a flat one (after flatten/linear)");
  no_volume(x, "upsampling");
  if (scale < 1 || scale > 64) fail("the up-sampling factor ", scale, " is not one of 1..64");
  Node n;
  n.op = Op::upsample;
  n.inputs = {x};
  n.stride = scale;
  n.resample = mode;
  return push(std::move(n), Shape{s.c, s.h * scale, s.w * scale, false});
}

int GraphBuilder::act(int x, Act a, float slope) {
  Node n;
  n.op = Op::act;
  n.act = a;
  n.slope = slope;
  n.inputs = {x};
  return push(std::move(n), shape(x));
}

int GraphBuilder::relu(int x) {
  Node n;
  n.op = Op::relu;
  n.inputs = {x};
  return push(std::move(n), shape(x));
}

// PyTorch's pooling output size (floor mode): padding at most half the window, as
// PyTorch requires (so every window holds at least one real input).
// PyTorch's pooling output size with ceil_mode: ceil instead of floor, but the last
// window must start inside the input or its left padding.
static int ceil_out_size(int in, int k, int stride, int pad) {
  int o = (in + 2 * pad - k + stride - 1) / stride + 1;
  if ((o - 1) * stride >= in + pad) --o;
  return o;
}

static Shape pool_shape(const Shape& s, int kh, int kw, int stride, int pad, const char* what, bool ceil_mode) {
  if (s.flat) fail(what, " needs a c×h×w input, got a flat one");
  if (2 * pad > kh || 2 * pad > kw)
    fail(what, " padding ", pad, " must be at most half the kernel ", kh, " (as PyTorch)");
  if (s.h + 2 * pad < kh || s.w + 2 * pad < kw) {
    if (pad == 0) fail(what, " kernel ", kh, " is larger than its input ", shape_text(s));
    fail(what, " kernel ", kh, " is larger than its padded input ", s.h + 2 * pad, "x", s.w + 2 * pad);
  }
  if (s.volume() && (kh != kw || s.d + 2 * pad < kh))
    fail(what, " kernel ", kh, " is larger than its input ", shape_text(s));
  Shape o{s.c, out_size(s.h, kh, stride, pad), out_size(s.w, kw, stride, pad), false};
  if (s.volume()) o.d = out_size(s.d, kh, stride, pad);
  if (ceil_mode) {
    o.h = ceil_out_size(s.h, kh, stride, pad), o.w = ceil_out_size(s.w, kw, stride, pad);
    if (s.volume()) o.d = ceil_out_size(s.d, kh, stride, pad);
  }
  return o;
}

int GraphBuilder::pool(Op op, int x, int kh, int kw, int stride, int pad, bool ceil_mode) {
  Node n;
  n.op = op;
  n.inputs = {x};
  n.kernel = kh;
  n.kernel_w = kw;
  n.stride = stride;
  n.pad = pad;
  n.ceil_mode = ceil_mode;
  Shape o = pool_shape(shape(x), kh, kw, stride, pad, op == Op::maxpool ? "maxpool" : "avgpool", ceil_mode);
  return push(std::move(n), o);
}

int GraphBuilder::maxpool(int x, int k, int stride, int pad, bool ceil_mode) {
  return pool(Op::maxpool, x, k, k, stride, pad, ceil_mode);
}

int GraphBuilder::avgpool(int x, int k, int stride, int pad) { return pool(Op::avgpool, x, k, k, stride, pad); }

int GraphBuilder::gap(int x) {
  const Shape s = shape(x);
  if (s.flat) fail("gap needs a c×h×w input, got a flat one");
  no_volume(x, "gap (global average pooling)");
  // One h×w window (a single output whatever the stride; s.h keeps the square case's
  // node as it always was).
  return pool(Op::avgpool, x, s.h, s.w, s.h, 0);
}

int GraphBuilder::dropout(int x, double p) {
  Node n;
  n.op = Op::dropout;
  n.inputs = {x};
  n.p = p;
  return push(std::move(n), shape(x));
}

int GraphBuilder::stochastic_depth(int x, double p) {
  if (!(p >= 0 && p <= 1)) fail("stochastic depth needs a probability in [0, 1], got ", p);
  if (shape(x).flat) fail("stochastic depth needs a c×h×w input, got a flat one");
  no_volume(x, "stochastic depth");
  Node n;
  n.op = Op::stochastic_depth;
  n.inputs = {x};
  n.p = p;
  return push(std::move(n), shape(x));
}

int GraphBuilder::layernorm2d(int x, const std::string& name, double eps) {
  const Shape s = shape(x);
  if (s.flat) fail("layernorm2d needs a c×h×w input, got a flat one");
  no_volume(x, "layernorm2d");
  Node n;
  n.op = Op::layernorm;
  n.eps = eps;
  n.inputs = {x};
  param(n, name + ".weight", {s.c}, true, false, Init::ones, 0);
  param(n, name + ".bias", {s.c}, true, false, Init::zeros, 0);
  return push(std::move(n), s);
}

int GraphBuilder::layer_scale(int x, const std::string& name, double init) {
  const Shape s = shape(x);
  if (s.flat) fail("layer scale needs a c×h×w input, got a flat one");
  no_volume(x, "layer scale");
  Node n;
  n.op = Op::layer_scale;
  n.inputs = {x};
  param(n, name, {s.c, 1, 1}, true, false, Init::constant, 0);
  g_.params.back().value = init;
  return push(std::move(n), s);
}

int GraphBuilder::pointwise_linear(int x, const std::string& name, int out) {
  const int in = shape(x).c;
  const int y = conv(x, name, out, 1, 1, 0, true);
  ParamDef& w = g_.params[static_cast<size_t>(g_.nodes[static_cast<size_t>(y - 1)].params[0])];
  w.info.shape = {out, in};
  w.fan_out = out;  // nn.Linear's fans: in, out
  return y;
}

int GraphBuilder::channel_slice(int x, int begin, int end) {
  const Shape s = shape(x);
  if (s.flat) fail("a channel slice needs a c×h×w input, got a flat one");
  no_volume(x, "a channel slice");
  if (begin < 0 || end > s.c || begin >= end)
    fail("channel slice [", begin, ", ", end, ") is not inside the input's ", s.c, " channels");
  Node n;
  n.op = Op::channel_slice;
  n.inputs = {x};
  n.slice_begin = begin;
  n.slice_end = end;
  return push(std::move(n), Shape{end - begin, s.h, s.w, false});
}

int GraphBuilder::channel_shuffle(int x, int groups) {
  const Shape s = shape(x);
  if (s.flat) fail("a channel shuffle needs a c×h×w input, got a flat one");
  no_volume(x, "a channel shuffle");
  if (groups < 1 || s.c % groups != 0) fail("channel shuffle: ", groups, " groups do not divide ", s.c, " channels");
  Node n;
  n.op = Op::channel_shuffle;
  n.inputs = {x};
  n.groups = groups;
  return push(std::move(n), s);
}

int GraphBuilder::adaptive_avgpool(int x, int oh, int ow) {
  const Shape s = shape(x);
  if (s.flat) fail("adaptive average pooling needs a c×h×w input, got a flat one");
  no_volume(x, "adaptive average pooling");
  if (oh < 1 || ow < 1) fail("adaptive average pooling needs an output of at least 1x1, got ", oh, "x", ow);
  Node n;
  n.op = Op::adaptive_avgpool;
  n.inputs = {x};
  return push(std::move(n), Shape{s.c, oh, ow, false});
}

int GraphBuilder::flatten(int x) {
  const Shape s = shape(x);
  Node n;
  n.op = Op::flatten;
  n.inputs = {x};
  return push(std::move(n), Shape{static_cast<int>(s.numel()), 1, 1, true});
}

int GraphBuilder::linear(int x, const std::string& name, int out) {
  const Shape s = shape(x);
  if (!s.flat) fail("linear needs a flat input: put flatten before it");
  Node n;
  n.op = Op::linear;
  n.inputs = {x};
  n.out_channels = out;
  param(n, name + ".weight", {out, s.c}, true, true, Init::kaiming_uniform, s.c);
  g_.params.back().fan_out = out;
  param(n, name + ".bias", {out}, true, false, Init::fan_in_bias, s.c);
  return push(std::move(n), Shape{out, 1, 1, true});
}

int GraphBuilder::bn(int x, const std::string& name, double momentum, double eps) {
  const Shape s = shape(x);
  if (s.flat) fail("bn (batch-norm 2d) needs a c×h×w input, got a flat one");
  Node n;
  n.op = Op::bn;
  n.momentum = momentum;
  n.eps = eps;
  n.inputs = {x};
  param(n, name + ".weight", {s.c}, true, false, Init::ones, 0);
  param(n, name + ".bias", {s.c}, true, false, Init::zeros, 0);
  param(n, name + ".running_mean", {s.c}, false, false, Init::zeros, 0);
  param(n, name + ".running_var", {s.c}, false, false, Init::ones, 0);
  param(n, name + ".num_batches_tracked", {}, false, false, Init::zeros, 0);
  return push(std::move(n), s);
}

void GraphBuilder::set_init(const std::string& name, Init init) {
  for (auto& p : g_.params)
    if (p.info.name == name) {
      p.init = init;
      return;
    }
  fail("no parameter named ", name);
}

void GraphBuilder::set_given(const std::string& name, std::shared_ptr<const std::vector<float>> values) {
  for (auto& p : g_.params)
    if (p.info.name == name) {
      if (!values || values->size() != p.info.numel)
        fail("parameter ", name, " has ", p.info.numel, " values, its initial data ", values ? values->size() : 0);
      p.init = Init::given;
      p.given = std::move(values);
      return;
    }
  fail("no parameter named ", name);
}

int GraphBuilder::add(int a, int b) {
  const Shape sa = shape(a), sb = shape(b);
  if (sa.c != sb.c || sa.h != sb.h || sa.w != sb.w || sa.flat != sb.flat || sa.d != sb.d)
    fail("residual add needs equal shapes, got ", shape_text(sa), " and ", shape_text(sb));
  Node n;
  n.op = Op::add;
  n.inputs = {a, b};
  return push(std::move(n), sa);
}

int GraphBuilder::mul(int x, int s) {
  const Shape sx = shape(x), ss = shape(s);
  no_volume(x, "a channel scale (mul)");
  if (sx.flat || ss.flat || ss.c != sx.c || ss.h != 1 || ss.w != 1)
    fail("a channel scale needs a c×h×w input and a c×1×1 scale, got ", sx.c, "x", sx.h, "x", sx.w, " and ", ss.c,
         "x", ss.h, "x", ss.w);
  Node n;
  n.op = Op::mul;
  n.inputs = {x, s};
  return push(std::move(n), sx);
}

int GraphBuilder::se(int x, const std::string& name, int squeeze, bool relu_act, Act a, Act gate) {
  const Shape s = shape(x);
  if (s.flat) fail("squeeze-and-excitation needs a c×h×w input, got a flat one");
  int t = gap(x);
  t = conv(t, name + ".fc1", squeeze, 1, 1, 0);
  t = relu_act ? relu(t) : act(t, a);
  t = act(conv(t, name + ".fc2", s.c, 1, 1, 0), gate);
  return mul(x, t);
}

int GraphBuilder::concat(const std::vector<int>& xs) {
  if (xs.size() < 2) fail("concat needs at least two inputs, got ", xs.size());
  const Shape s0 = shape(xs[0]);
  Shape out = s0;
  out.c = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (xs[j] == xs[i]) fail("concat of one tensor with itself is not supported (input ", i + 1, " repeats input ", j + 1, ")");
    const Shape s = shape(xs[i]);
    if (s.flat != s0.flat || s.h != s0.h || s.w != s0.w || s.d != s0.d)
      fail("concat needs inputs of one height and width, got ", shape_text(s0), " and ", shape_text(s), " (input ",
           i + 1, ")");
    out.c += s.c;
  }
  Node n;
  n.op = Op::concat;
  n.inputs = xs;
  return push(std::move(n), out);
}

Graph GraphBuilder::finish(int output, int classes) {
  Shape s = shape(output);
  if (!s.flat && s.h == 1 && s.w == 1 && s.d <= 1) {
    output = flatten(output);
    s = shape(output);
  }
  // A C×H×W (C×D×H×W) output stays dense (segmentation); build_model_graph checks it fits
  // the task.
  if (!s.flat) {
    g_.dense_output = true;
    g_.out_d = s.volume() ? s.d : 0;
    g_.out_h = s.h;
    g_.out_w = s.w;
    if (s.c != classes)
      fail("the model ends in ", shape_text(s), " outputs but the data needs ", classes, " per sample or, for ",
           "segmentation (label maps), per position: end in flatten and linear(", classes, ")",
           s.volume() ? std::string() : " (or gap and linear(" + std::to_string(classes) + "))",
           " for one output row per sample, or in conv(", classes, ",1) for a score per class and ",
           s.volume() ? "voxel" : "pixel");
  } else if (s.c != classes)
    fail("the model ends in ", s.c, " outputs but the data needs ", classes, " per sample (its classes, or its ",
         "regression targets); make the last linear linear(", classes, ")");
  g_.classes = classes;
  g_.output = output;
  // Fuse conv → relu when the relu is the conv output's only reader.
  std::vector<int> readers(shapes_.size(), 0);
  for (const auto& n : g_.nodes)
    for (int t : n.inputs) readers[t]++;
  for (size_t k = 1; k < g_.nodes.size(); ++k) {
    Node& r = g_.nodes[k];
    Node& c = g_.nodes[k - 1];
    if (r.op == Op::relu && c.op == Op::conv && r.inputs[0] == c.index + 1 && readers[c.index + 1] == 1 &&
        c.index + 1 != output) {
      r.fused_relu = c.fused_relu = true;
    }
  }
  // Fuse bn → relu (Node::bn_relu) when the relu is the batch-norm output's only reader.
  const char* no_br = std::getenv("CNNSCALE_NO_BN_RELU_FUSION");
  const bool bn_relu = !(no_br && *no_br && std::string(no_br) != "0");
  for (size_t k = 1; bn_relu && k < g_.nodes.size(); ++k) {
    Node& r = g_.nodes[k];
    Node& b = g_.nodes[k - 1];
    if (r.op == Op::relu && b.op == Op::bn && r.inputs[0] == b.index + 1 && readers[b.index + 1] == 1 &&
        b.index + 1 != output)
      r.bn_relu = b.bn_relu = true;
  }
  // CNNSCALE_NO_POOL_FUSION=1 keeps relu and maxpool backward apart (for A/B checks).
  const char* no_pf = std::getenv("CNNSCALE_NO_POOL_FUSION");
  const bool pool_fusion = !(no_pf && *no_pf && std::string(no_pf) != "0");
  for (size_t k = 1; pool_fusion && k < g_.nodes.size(); ++k) {
    Node& p = g_.nodes[k];
    Node& r = g_.nodes[k - 1];
    // Only unpadded square windows that tile the input (kernel == stride): the fused
    // kernel reads no padding and gives each input position to at most one window.
    if (p.op == Op::maxpool && p.kernel == p.stride && !p.in.volume() && p.kernel_w == p.kernel && p.pad == 0 && !p.ceil_mode &&
        r.op == Op::relu &&
        r.fused_relu && p.inputs[0] == r.index + 1 && readers[r.index + 1] == 1 && r.index + 1 != output) {
      r.relu_into_pool = p.relu_into_pool = true;
    }
  }
  // In-place relu / add (Node::in_place). CNNSCALE_NO_IN_PLACE=1 turns it off (A/B checks).
  const char* no_ip = std::getenv("CNNSCALE_NO_IN_PLACE");
  const bool in_place = !(no_ip && *no_ip && std::string(no_ip) != "0");
  for (size_t k = 0; in_place && k < g_.nodes.size(); ++k) {
    Node& n = g_.nodes[k];
    if (!((n.op == Op::relu && !n.fused_relu && !n.bn_relu) || n.op == Op::add)) continue;
    const int t = n.inputs[0];
    if (t == 0 || readers[t] != 1 || t == output) continue;
    if (n.op == Op::add && n.inputs[1] == t) continue;
    const Node& p = g_.nodes[t - 1];
    const bool keeps_no_output =
        (p.op == Op::conv && !p.fused_relu) || p.op == Op::bn || p.op == Op::linear || p.op == Op::add;
    if (keeps_no_output) n.in_place = true;
  }
  // Flat layout: reverse registration order.
  size_t off = 0;
  for (size_t i = g_.params.size(); i-- > 0;) {
    g_.params[i].info.offset = off;
    off += g_.params[i].info.numel;
  }
  g_.param_count = off;
  for (auto& n : g_.nodes) {
    if (n.params.empty()) continue;
    n.flat_begin = SIZE_MAX;
    n.flat_end = 0;
    for (int p : n.params) {
      n.flat_begin = std::min(n.flat_begin, g_.params[p].info.offset);
      n.flat_end = std::max(n.flat_end, g_.params[p].info.offset + g_.params[p].info.numel);
    }
  }
  for (const auto& p : g_.params) g_.infos.push_back(p.info);
  return std::move(g_);
}

std::vector<char> gpu_bf16_tensors(const Graph& g) {
  std::vector<char> half(static_cast<size_t>(g.tensor_count()), 0);
  for (const Node& n : g.nodes) {
    const int out = n.index + 1;
    switch (n.op) {
      case Op::conv:
      case Op::deconv: half[out] = 1; break;
      case Op::bn:
      case Op::relu:
      case Op::act:
      case Op::stochastic_depth:
      case Op::maxpool:
      case Op::avgpool: half[out] = half[n.inputs[0]]; break;
      case Op::add: half[out] = half[n.inputs[0]] && half[n.inputs[1]]; break;
      case Op::mul:
      case Op::layernorm:
      case Op::layer_scale:
      case Op::channel_slice:
      case Op::upsample:
      case Op::channel_shuffle:
      case Op::adaptive_avgpool:
      case Op::concat: half[out] = 0; break;
      case Op::dropout:
      case Op::flatten:
      case Op::linear: half[out] = 0; break;
    }
  }
  // Readers that take fp32 only (and the loss reads the logits in fp32); same-type layers
  // whose input and output disagree.
  half[static_cast<size_t>(g.output)] = 0;
  for (bool changed = true; changed;) {
    changed = false;
    auto to_fp32 = [&](int t) {
      if (half[t]) half[t] = 0, changed = true;
    };
    for (const Node& n : g.nodes) {
      const int in = n.inputs[0], out = n.index + 1;
      switch (n.op) {
        case Op::dropout:
        case Op::linear: to_fp32(in); break;
        case Op::mul:
        case Op::layernorm:
        case Op::layer_scale:
        case Op::channel_slice:
        case Op::channel_shuffle:
        case Op::adaptive_avgpool:
        case Op::upsample:
        case Op::concat:
          for (int t : n.inputs) to_fp32(t);
          break;
        case Op::bn:
        case Op::relu:
        case Op::act:
        case Op::stochastic_depth:
        case Op::maxpool:
        case Op::avgpool:
          if (half[in] != half[out]) to_fp32(in), to_fp32(out);
          break;
        case Op::add:
          if (!(half[n.inputs[0]] && half[n.inputs[1]] && half[out]))
            for (int t : {n.inputs[0], n.inputs[1], out}) to_fp32(t);
          break;
        case Op::conv:
        case Op::deconv:
        case Op::flatten: break;
      }
    }
  }
  return half;
}


FusionPlan plan_gpu_fusion(const Graph& g, const std::vector<char>& nhwc, bool fuse) {
  const size_t N = g.nodes.size();
  const size_t T = static_cast<size_t>(g.tensor_count());
  FusionPlan p;
  auto is_nhwc = [&](int t) { return !nhwc.empty() && nhwc[static_cast<size_t>(t)]; };
  auto mark_dead = [&](int t) {
    if (p.dead.empty()) p.dead.assign(T, 0);
    p.dead[static_cast<size_t>(t)] = 1;
  };
  std::vector<int> readers(T, 0), reader(T, -1);  // how many read each tensor; the last reader
  for (const Node& nd : g.nodes)
    for (int t : nd.inputs) {
      readers[static_cast<size_t>(t)]++;
      reader[static_cast<size_t>(t)] = nd.index;
    }
  std::vector<int> place(N);  // where each node runs, as a node index
  for (size_t k = 0; k < N; ++k) place[k] = static_cast<int>(k);
  if (fuse && !nhwc.empty()) {
    p.bn.assign(N, {});
    p.absorbed.assign(N, 0);
    auto only_reader = [&](int t) -> const Node* {  // t's one reader, none if several or the output
      if (t == g.output || readers[static_cast<size_t>(t)] != 1) return nullptr;
      return &g.nodes[static_cast<size_t>(reader[static_cast<size_t>(t)])];
    };
    for (const Node& b : g.nodes) {
      if (b.op != Op::bn || !is_nhwc(b.inputs[0])) continue;
      const Node* r = only_reader(b.index + 1);
      if (!r || p.absorbed[static_cast<size_t>(r->index)]) continue;
      BnFusion& f = p.bn[static_cast<size_t>(b.index)];
      if (r->op == Op::relu && is_nhwc(r->index + 1)) {
        f = {r->index + 1, -1, true};
        p.absorbed[static_cast<size_t>(r->index)] = 1;
        mark_dead(b.index + 1);
      } else if (r->op == Op::add && r->inputs.size() == 2) {
        const int z = r->inputs[0] == b.index + 1 ? r->inputs[1] : r->inputs[0];
        const Node* r2 = only_reader(r->index + 1);
        if (z == b.index + 1 || z == b.inputs[0] || !is_nhwc(z) || !r2 || r2->op != Op::relu ||
            !is_nhwc(r2->index + 1))
          continue;
        f = {r2->index + 1, z, true};
        p.absorbed[static_cast<size_t>(r->index)] = p.absorbed[static_cast<size_t>(r2->index)] = 1;
        mark_dead(b.index + 1);
        mark_dead(r->index + 1);
        place[static_cast<size_t>(b.index)] = r->index;
      }
    }
  }
  for (size_t k = 0; k < N; ++k) {
    if (!p.absorbed.empty() && p.absorbed[k]) {
      for (size_t b = 0; b < N; ++b)  // the batch norms moved here (at most one)
        if (place[b] == static_cast<int>(k) && b != k) p.order.push_back(static_cast<int>(b));
      continue;
    }
    if (place[k] == static_cast<int>(k)) p.order.push_back(static_cast<int>(k));
  }
  p.ready_after.assign(p.order.size(), 0);
  std::vector<char> done(N, 0);
  for (size_t i = p.order.size(); i-- > 0;) {
    done[static_cast<size_t>(p.order[i])] = 1;
    size_t ready = g.param_count;  // the lowest flat offset of a node still to run
    for (size_t k = 0; k < N; ++k)
      if (!done[k] && !g.nodes[k].params.empty()) ready = std::min(ready, g.nodes[k].flat_begin);
    p.ready_after[i] = ready;
  }
  return p;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::conv: return "conv";
    case Op::relu: return "relu";
    case Op::maxpool: return "maxpool";
    case Op::avgpool: return "avgpool";
    case Op::dropout: return "dropout";
    case Op::flatten: return "flatten";
    case Op::linear: return "linear";
    case Op::bn: return "bn";
    case Op::add: return "add";
    case Op::act: return "act";
    case Op::mul: return "mul";
    case Op::concat: return "concat";
    case Op::stochastic_depth: return "stochastic_depth";
    case Op::layernorm: return "layernorm";
    case Op::layer_scale: return "layer_scale";
    case Op::channel_slice: return "channel_slice";
    case Op::channel_shuffle: return "channel_shuffle";
    case Op::adaptive_avgpool: return "adaptive_avgpool";
    case Op::deconv: return "deconv";
    case Op::upsample: return "upsample";
  }
  return "?";
}

const char* act_name(Act a) {
  switch (a) {
    case Act::relu6: return "relu6";
    case Act::sigmoid: return "sigmoid";
    case Act::silu: return "silu";
    case Act::hardswish: return "hardswish";
    case Act::gelu: return "gelu";
    case Act::hardsigmoid: return "hardsigmoid";
    case Act::leaky_relu: return "leaky_relu";
    case Act::tanh: return "tanh";
    case Act::scale: return "scale";
  }
  return "?";
}

}  // namespace cnnscale::nn
