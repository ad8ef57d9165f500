// onnx_export.cpp — a Graph's inference form as an ONNX ModelProto (contract: onnx_export.hpp).
// Tensor id t is the value "t<t>" (0: "input"; the output: "logits"); constants are Constant
// nodes, so the initializers are the parameters only.
#include "nn/onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

class Writer {
 public:
  Writer(const ModelGraph& mg, const float* params) : mg_(mg), g_(mg.graph), p_(params) {}
  std::string run(const std::string& version);

 private:
  // (appended, not "t" + to_string: GCC 12's -Wrestrict misfires on the latter)
  static std::string numbered(char c, int k) {
    std::string s(1, c);
    s += std::to_string(k);
    return s;
  }
  std::string name(int t) const { return t == 0 ? "input" : t == g_.output ? "logits" : numbered('t', t); }
  std::string fresh() { return numbered('x', next_++); }
  onnx::NodeProto* node(const char* op, std::vector<std::string> in, std::string out) {
    auto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(std::string(op) + "_" + std::to_string(graph_->node_size()));
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void ints(onnx::NodeProto* n, const char* a, std::vector<int64_t> v) {
    auto* at = n->add_attribute();
    at->set_name(a);
    at->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) at->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const char* a, int64_t v) {
    auto* at = n->add_attribute();
    at->set_name(a);
    at->set_type(onnx::AttributeProto::INT);
    at->set_i(v);
  }
  static void text(onnx::NodeProto* n, const char* a, const char* v) {
    auto* at = n->add_attribute();
    at->set_name(a);
    at->set_type(onnx::AttributeProto::STRING);
    at->set_s(v);
  }
  static void real(onnx::NodeProto* n, const char* a, double v) {
    auto* at = n->add_attribute();
    at->set_name(a);
    at->set_type(onnx::AttributeProto::FLOAT);
    at->set_f(static_cast<float>(v));
  }
  // A Constant node holding a tensor of `type` with these dims and raw little-endian bytes.
  std::string constant(int type, const std::vector<int64_t>& dims, const void* bytes, size_t size) {
    const std::string out = fresh();
    auto* n = node("Constant", {}, out);
    auto* at = n->add_attribute();
    at->set_name("value");
    at->set_type(onnx::AttributeProto::TENSOR);
    auto* t = at->mutable_t();
    t->set_data_type(type);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(bytes), size));
    return out;
  }
  std::string const_f(const std::vector<int64_t>& dims, const std::vector<float>& v) {
    return constant(onnx::TensorProto::FLOAT, dims, v.data(), v.size() * sizeof(float));
  }
  std::string scalar(float v) { return const_f({}, {v}); }
  std::string const_i(const std::vector<int64_t>& v) {
    return constant(onnx::TensorProto::INT64, {static_cast<int64_t>(v.size())}, v.data(), v.size() * sizeof(int64_t));
  }
  // Parameter k of node n as an initializer (once), in the dims given.
  std::string param(const Node& n, size_t k, std::vector<int64_t> dims) {
    const ParamDef& d = g_.params.at(static_cast<size_t>(n.params.at(k)));
    auto* t = graph_->add_initializer();
    t->set_name(d.info.name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto x : dims) t->add_dims(x);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(p_ + d.info.offset), d.info.numel * sizeof(float)));
    return d.info.name;
  }
  const Shape& in_shape(const Node& n) const { return n.in; }
  void emit(const Node& n);

  const ModelGraph& mg_;
  const Graph& g_;
  const float* p_;
  onnx::GraphProto* graph_ = nullptr;
  int next_ = 0;
  std::vector<std::string> alias_;  // per tensor id: the value name holding it
};

void Writer::emit(const Node& n) {
  const int t = n.index + 1;
  auto in = [&](size_t i) { return alias_.at(static_cast<size_t>(n.inputs.at(i))); };
  const std::string out = name(t);
  auto pass = [&] {  // the identity: a graph output still needs a node that writes it
    if (t == g_.output) node("Identity", {in(0)}, out);
    else alias_[static_cast<size_t>(t)] = in(0);
  };
  const Shape& s = n.in;
  switch (n.op) {
    case Op::conv: {
      const int64_t cin = s.c / n.groups;
      const size_t sp = s.volume() ? 3 : 2;  // spatial dims (Conv3d: 3)
      std::vector<int64_t> wshape{n.out_channels, cin};
      wshape.resize(2 + sp, n.kernel);
      std::vector<std::string> ins = {in(0), param(n, 0, wshape)};
      if (n.bias) ins.push_back(param(n, 1, {n.out_channels}));
      auto* c = node("Conv", ins, out);
      ints(c, "kernel_shape", std::vector<int64_t>(sp, n.kernel));
      ints(c, "strides", std::vector<int64_t>(sp, n.stride));
      std::vector<int64_t> pads(sp, n.pad);  // begins, then ends (padding='same' of an even kernel: one more)
      pads.resize(2 * sp, n.pad + n.pad_end);
      ints(c, "pads", pads);
      integer(c, "group", n.groups);
      break;
    }
    case Op::deconv: {  // ConvTranspose: weight in × out × k × k (× k in 3-D), as PyTorch's
      const size_t sp = s.volume() ? 3 : 2;
      std::vector<int64_t> wshape{s.c, n.out_channels};
      wshape.resize(2 + sp, n.kernel);
      std::vector<std::string> ins = {in(0), param(n, 0, wshape)};
      if (n.bias) ins.push_back(param(n, 1, {n.out_channels}));
      auto* c = node("ConvTranspose", ins, out);
      ints(c, "kernel_shape", std::vector<int64_t>(sp, n.kernel));
      ints(c, "strides", std::vector<int64_t>(sp, n.stride));
      ints(c, "pads", std::vector<int64_t>(2 * sp, n.pad));
      break;
    }
    case Op::upsample: {  // Resize (opset 13+) with scales [1, 1, s, s], as torch.onnx writes nn.Upsample
      const float f = static_cast<float>(n.stride);
      auto* r = node("Resize", {in(0), "", const_f({4}, {1.f, 1.f, f, f})}, out);
      const bool nearest = n.resample == Resample::nearest;
      text(r, "mode", nearest ? "nearest" : "linear");
      text(r, "coordinate_transformation_mode", nearest                                         ? "asymmetric"
                                                : n.resample == Resample::bilinear_align_corners ? "align_corners"
                                                                                                 : "pytorch_half_pixel");
      if (nearest) text(r, "nearest_mode", "floor");
      break;
    }
    case Op::relu: node("Relu", {in(0)}, out); break;
    case Op::act:
      switch (n.act) {
        case Act::relu6: node("Clip", {in(0), scalar(0.f), scalar(6.f)}, out); break;
        case Act::sigmoid: node("Sigmoid", {in(0)}, out); break;
        case Act::hardswish: node("HardSwish", {in(0)}, out); break;
        case Act::leaky_relu: real(node("LeakyRelu", {in(0)}, out), "alpha", n.slope); break;
        case Act::tanh: node("Tanh", {in(0)}, out); break;
        case Act::scale: node("Mul", {in(0), scalar(n.slope)}, out); break;
        case Act::hardsigmoid: {
          auto* h = node("HardSigmoid", {in(0)}, out);
          real(h, "alpha", 1.0 / 6);
          real(h, "beta", 0.5);
          break;
        }
        case Act::silu: {
          const std::string sg = fresh();
          node("Sigmoid", {in(0)}, sg);
          node("Mul", {in(0), sg}, out);
          break;
        }
        case Act::gelu: {
          const std::string a = fresh(), b = fresh(), c = fresh(), h = fresh();
          node("Div", {in(0), scalar(static_cast<float>(std::sqrt(2.0)))}, a);
          node("Erf", {a}, b);
          node("Add", {b, scalar(1.f)}, c);
          node("Mul", {in(0), scalar(0.5f)}, h);
          node("Mul", {h, c}, out);
          break;
        }
      }
      break;
    case Op::maxpool:
    case Op::avgpool: {
      if (n.op == Op::avgpool && n.kernel == s.h && n.kernel_w == s.w && n.pad == 0 && !s.volume()) {
        node("GlobalAveragePool", {in(0)}, out);
        break;
      }
      auto* p = node(n.op == Op::maxpool ? "MaxPool" : "AveragePool", {in(0)}, out);
      if (s.volume()) {  // MaxPool3d / AvgPool3d: cube windows
        ints(p, "kernel_shape", {n.kernel, n.kernel, n.kernel});
        ints(p, "strides", {n.stride, n.stride, n.stride});
        ints(p, "pads", std::vector<int64_t>(6, n.pad));
      } else {
        ints(p, "kernel_shape", {n.kernel, n.kernel_w});
        ints(p, "strides", {n.stride, n.stride});
        ints(p, "pads", {n.pad, n.pad, n.pad, n.pad});
      }
      if (n.op == Op::maxpool) integer(p, "ceil_mode", n.ceil_mode ? 1 : 0);
      else integer(p, "count_include_pad", 1);
      break;
    }
    case Op::adaptive_avgpool: {
      const int oh = n.out.h, ow = n.out.w;
      if (s.h % oh == 0 && s.w % ow == 0) {
        auto* p = node("AveragePool", {in(0)}, out);
        ints(p, "kernel_shape", {s.h / oh, s.w / ow});
        ints(p, "strides", {s.h / oh, s.w / ow});
        break;
      }
      // PyTorch's bins [⌊i·H/oh⌋, ⌈(i+1)·H/oh⌉) as an (H·W) × (oh·ow) averaging matrix
      std::vector<float> m(static_cast<size_t>(s.h) * s.w * oh * ow, 0.f);
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          const int h0 = i * s.h / oh, h1 = ((i + 1) * s.h + oh - 1) / oh;
          const int w0 = j * s.w / ow, w1 = ((j + 1) * s.w + ow - 1) / ow;
          const float a = 1.f / static_cast<float>((h1 - h0) * (w1 - w0));
          for (int y = h0; y < h1; ++y)
            for (int x = w0; x < w1; ++x) m[(static_cast<size_t>(y) * s.w + x) * oh * ow + i * ow + j] = a;
        }
      const std::string r = fresh(), mm = fresh();
      node("Reshape", {in(0), const_i({0, s.c, int64_t{s.h} * s.w})}, r);
      node("MatMul", {r, const_f({int64_t{s.h} * s.w, int64_t{oh} * ow}, m)}, mm);
      node("Reshape", {mm, const_i({0, s.c, oh, ow})}, out);
      break;
    }
    case Op::dropout:
    case Op::stochastic_depth: pass(); break;
    case Op::flatten: {
      auto* f = node("Flatten", {in(0)}, out);
      integer(f, "axis", 1);
      break;
    }
    case Op::linear: {
      auto* gm = node("Gemm", {in(0), param(n, 0, {n.out_channels, s.c}), param(n, 1, {n.out_channels})}, out);
      integer(gm, "transB", 1);
      break;
    }
    case Op::bn: {
      auto* b = node("BatchNormalization",
                     {in(0), param(n, 0, {s.c}), param(n, 1, {s.c}), param(n, 2, {s.c}), param(n, 3, {s.c})}, out);
      real(b, "epsilon", n.eps);
      real(b, "momentum", 1.0 - n.momentum);  // ONNX's: running·m + batch·(1 − m); unused in inference
      break;
    }
    case Op::add: node("Add", {in(0), in(1)}, out); break;
    case Op::mul: node("Mul", {in(0), in(1)}, out); break;
    case Op::concat: {
      std::vector<std::string> ins;
      for (size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(in(i));
      integer(node("Concat", ins, out), "axis", 1);
      break;
    }
    case Op::layernorm: {  // over axis 1 of N×C×H×W
      const std::string m = fresh(), d = fresh(), d2 = fresh(), v = fresh(), ve = fresh(), sd = fresh(),
                        z = fresh(), zw = fresh();
      ints(node("ReduceMean", {in(0)}, m), "axes", {1});
      node("Sub", {in(0), m}, d);
      node("Mul", {d, d}, d2);
      ints(node("ReduceMean", {d2}, v), "axes", {1});
      node("Add", {v, scalar(static_cast<float>(n.eps))}, ve);
      node("Sqrt", {ve}, sd);
      node("Div", {d, sd}, z);
      node("Mul", {z, param(n, 0, {s.c, 1, 1})}, zw);
      node("Add", {zw, param(n, 1, {s.c, 1, 1})}, out);
      break;
    }
    case Op::layer_scale: node("Mul", {in(0), param(n, 0, {s.c, 1, 1})}, out); break;
    case Op::channel_slice:
      node("Slice", {in(0), const_i({n.slice_begin}), const_i({n.slice_end}), const_i({1})}, out);
      break;
    case Op::channel_shuffle: {
      const int g = n.groups;
      const std::string r = fresh(), tr = fresh();
      node("Reshape", {in(0), const_i({0, g, s.c / g, s.h, s.w})}, r);
      ints(node("Transpose", {r}, tr), "perm", {0, 2, 1, 3, 4});
      node("Reshape", {tr, const_i({0, s.c, s.h, s.w})}, out);
      break;
    }
  }
  if (alias_[static_cast<size_t>(t)].empty()) alias_[static_cast<size_t>(t)] = out;
}

std::string Writer::run(const std::string& version) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("cnnscale");
  m.set_producer_version(version);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(17);
  graph_ = m.mutable_graph();
  graph_->set_name(mg_.name);
  auto* meta = m.add_metadata_props();
  meta->set_key("cnnscale.model");
  meta->set_value(mg_.spec);
  alias_.assign(static_cast<size_t>(g_.tensor_count()), "");
  alias_[0] = "input";
  auto value = [&](onnx::ValueInfoProto* v, const std::string& nm, std::vector<int64_t> dims) {
    v->set_name(nm);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    auto* sh = tt->mutable_shape();
    sh->add_dim()->set_dim_param("batch");
    for (auto d : dims) sh->add_dim()->set_dim_value(d);
  };
  const SampleShape& is = g_.input;
  value(graph_->add_input(), "input",
        is.volume() ? std::vector<int64_t>{is.channels, is.depth, is.height, is.width}
                    : std::vector<int64_t>{is.channels, is.height, is.width});
  value(graph_->add_output(), "logits",
        !g_.dense_output ? std::vector<int64_t>{g_.classes}
        : g_.out_d > 0   ? std::vector<int64_t>{g_.classes, g_.out_d, g_.out_h, g_.out_w}
                         : std::vector<int64_t>{g_.classes, g_.out_h, g_.out_w});
  for (const Node& n : g_.nodes) emit(n);
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    internal_error("the ONNX export of ", mg_.name, " does not pass onnx::checker: ", e.what());
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) internal_error("the ONNX export of ", mg_.name, " could not be serialized");
  return bytes;
}

}  // namespace

std::string onnx_export(const ModelGraph& mg, const float* params, const std::string& producer_version) {
  Writer w(mg, params);
  return w.run(producer_version);
}

}  // namespace cnnscale::nn
