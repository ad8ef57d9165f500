// onnx_import.cpp — an ONNX forward graph into a Graph (contract: onnx_import.hpp).
// Nodes are visited in the file's order (ONNX requires a topological one); each ONNX
// value name maps to a builder tensor id, constants (Constant nodes and initializers that
// are not parameters) to their values. Decomposed activations are matched where their
// first node is seen, and the nodes they cover are then skipped.
#include "nn/onnx_import.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale::nn {
namespace {

const char* kSupported =
    "Conv, ConvTranspose (one group), Resize (nearest or bilinear by an integer factor), BatchNormalization (training mode), Relu, LeakyRelu, Tanh, Clip (0, 6), Sigmoid, HardSigmoid, HardSwish, x*Sigmoid(x) "
    "(SiLU), Erf-form GELU, MaxPool, AveragePool, GlobalAveragePool, ReduceMean (over H and W), Flatten, Gemm, "
    "Dropout, Add, Concat (channels), Mul (by an N x C x 1 x 1 tensor, a C x 1 x 1 layer scale or a scalar), Identity, Pad "
    "(zeros), Constant; LayerNorm over channels as torch decomposes it and Linear over channels (MatMul) between "
    "Transposes to and from N x H x W x C";

const char* kExportHint = "export it with scripts/export-onnx.py (training mode, no constant folding; docs/models.md)";

struct Const {
  std::vector<int64_t> dims;
  std::vector<double> v;
  bool scalar_like() const { return v.size() == 1; }
};

class Importer {
 public:
  Importer(const onnx::ModelProto& m, const std::string& file, const SampleShape& in)
      : m_(m), g_(m.graph()), file_(file), b_(in), in_(in) {}
  ModelGraph run(int classes);

 private:
  [[noreturn]] void node_fail(const onnx::NodeProto& n, const std::string& what) const {
    fail(file_, ": node '", n.name(), "' (", n.op_type(), "): ", what);
  }
  int tensor(const onnx::NodeProto& n, int i) const;
  // The one value of a constant operand (Clip's bounds, Dropout's ratio, Pad's value).
  double scalar_of(const onnx::NodeProto& n, const Const& c) const {
    if (c.v.size() != 1) node_fail(n, "has an operand of " + std::to_string(c.v.size()) + " values where one belongs");
    return c.v[0];
  }
  void check_attributes(const onnx::NodeProto& n) const;
  const Const* constant(const std::string& name) const {
    auto it = consts_.find(name);
    return it == consts_.end() ? nullptr : &it->second;
  }
  std::shared_ptr<const std::vector<float>> param_data(const onnx::NodeProto& n, const std::string& name) const;
  std::string prefix(const onnx::NodeProto& n, const std::string& weight) const;
  void check_param(const onnx::NodeProto& n, const std::string& name, const std::string& want) const;
  void give(const onnx::NodeProto& n, const std::string& init_name);
  std::vector<int> readers(const std::string& value) const;
  // The node that alone reads `value`, when its op is `op`; -1 otherwise (pattern look-ahead).
  int sole_reader(const std::string& value, const char* op) const {
    const auto r = readers(value);
    return r.size() == 1 && g_.node(r[0]).op_type() == op ? r[0] : -1;
  }
  bool match_silu(int k);
  bool match_gelu(int k);
  bool match_layernorm(int k);
  bool fold(const onnx::NodeProto& n);
  bool reshape(const onnx::NodeProto& n);
  void view_like(const std::string& from, const std::string& to) {
    if (nhwc_.count(from)) nhwc_.insert(to);
  }
  // pad_extra, end_extra: a zero Pad before it (begins, ends of each spatial axis).
  void conv(const onnx::NodeProto& n, int pad_extra, int end_extra = -1);
  void deconv(const onnx::NodeProto& n);
  void pool(const onnx::NodeProto& n, bool max, int pad_extra);
  void set(const std::string& name, int id) { ids_[name] = id; }

  const onnx::ModelProto& m_;
  const onnx::GraphProto& g_;
  std::string file_;
  GraphBuilder b_;
  SampleShape in_;
  std::map<std::string, int> ids_;                   // value name → tensor id
  std::map<std::string, Const> consts_;              // constants by value name
  std::map<std::string, const onnx::TensorProto*> inits_;
  std::map<std::string, std::vector<int>> readers_;  // value name → node indices
  std::vector<char> skip_;                           // nodes covered by a matched pattern
  std::map<std::string, int> pads_;                  // Pad output → its (symmetric) padding
  int64_t opset_ = -1;
  // Values that are a tensor permuted to N×H×W×C (Transpose perm 0,2,3,1): the tensor id is
  // the N×C×H×W one; LayerNorm and Linear over the last axis apply to its channels.
  std::set<std::string> nhwc_;
  std::map<std::string, std::string> transposed_;  // Transpose(perm 1,0) of a 2-D parameter → its name
  // ShuffleNet's channel shuffle, x.view(N, g, C/g, H, W).transpose(1, 2).view(N, -1, H, W):
  // the 5-D view of tensor id in g groups, and that view transposed.
  struct Grouped {
    int id = 0, groups = 0;
    bool transposed = false;
  };
  std::map<std::string, Grouped> grouped_;
};

// The element count of a tensor's dims; a negative dimension, or more than 2^40 values
// (a damaged or hostile file), is refused before anything is allocated.
size_t numel_of(const onnx::TensorProto& t, const std::string& file) {
  size_t n = 1;
  for (auto d : t.dims()) {
    if (d < 0 || (d > 0 && n > (size_t{1} << 40) / static_cast<size_t>(d)))
      fail(file, ": tensor '", t.name(), "' has dimensions no tensor has (a damaged file?)");
    n *= static_cast<size_t>(d);
  }
  return n;
}

Const to_const(const onnx::TensorProto& t, const std::string& file) {
  Const c;
  const size_t n = numel_of(t, file);
  for (auto d : t.dims()) c.dims.push_back(d);
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    fail(file, ": tensor '", t.name(), "' keeps its data in an external file, which cnnscale does not read; ",
         kExportHint);
  const std::string& raw = t.raw_data();
  auto take = [&](auto tag, auto field) {
    using T = decltype(tag);
    if (!raw.empty()) {
      if (raw.size() != n * sizeof(T)) fail(file, ": tensor '", t.name(), "' holds ", raw.size(), " bytes for ", n, " values");
      for (size_t i = 0; i < n; ++i) {
        T x;
        std::memcpy(&x, raw.data() + i * sizeof(T), sizeof(T));
        c.v.push_back(static_cast<double>(x));
      }
    } else {
      if (static_cast<size_t>(field.size()) != n)
        fail(file, ": tensor '", t.name(), "' holds ", field.size(), " values, its shape ", n);
      for (auto x : field) c.v.push_back(static_cast<double>(static_cast<T>(x)));
    }
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: take(float{}, t.float_data()); break;
    case onnx::TensorProto::DOUBLE: take(double{}, t.double_data()); break;
    case onnx::TensorProto::INT64: take(int64_t{}, t.int64_data()); break;
    case onnx::TensorProto::INT32: take(int32_t{}, t.int32_data()); break;
    case onnx::TensorProto::BOOL: take(uint8_t{}, t.int32_data()); break;
    default: fail(file, ": tensor '", t.name(), "' has ONNX data type ", t.data_type(), ", which cnnscale does not read");
  }
  return c;
}

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t attr_i(const onnx::NodeProto& n, const char* name, int64_t def) {
  const auto* a = attr(n, name);
  return a ? a->i() : def;
}
double attr_f(const onnx::NodeProto& n, const char* name, double def) {
  const auto* a = attr(n, name);
  return a ? a->f() : def;
}
std::string attr_s(const onnx::NodeProto& n, const char* name, const char* def) {
  const auto* a = attr(n, name);
  return a ? a->s() : def;
}
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const char* name) {
  const auto* a = attr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

// The double a float32 attribute was written from: the shortest decimal that rounds to it
// (PyTorch's eps 1e-5 arrives as 9.99999975e-06).
double shortest(float f) {
  for (int p = 1; p <= 9; ++p) {
    std::ostringstream os;
    os.precision(p);
    os << static_cast<double>(f);
    const double d = std::stod(os.str());
    if (static_cast<float>(d) == f) return d;
  }
  return f;
}

// PyTorch's batch-norm momentum from ONNX's (running = running·m + batch·(1 − m)): the
// shortest decimal d with float(1 − d) = m (0.9f → 0.1, 0.9997f → 0.0003).
double torch_momentum(float m) {
  for (int p = 1; p <= 9; ++p) {
    const double scale = std::pow(10.0, p);
    const double d = std::round((1.0 - static_cast<double>(m)) * scale) / scale;
    if (static_cast<float>(1.0 - d) == m) return d;
  }
  return 1.0 - static_cast<double>(m);
}

// The attributes each op may carry, in every opset read (7–17); another one (an older
// version's is_test, spatial or consumed_inputs, a newer one's) is refused rather than
// ignored, so that no attribute changes the meaning of a node unseen.
void Importer::check_attributes(const onnx::NodeProto& n) const {
  static const std::map<std::string, std::set<std::string>> known = {
      {"Conv", {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}},
      {"Resize",
       {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value", "mode",
        "nearest_mode"}},
      {"ConvTranspose",
       {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"}},
      {"BatchNormalization", {"epsilon", "momentum", "training_mode"}},
      {"MaxPool", {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}},
      {"AveragePool", {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}},
      {"Clip", {"min", "max"}},
      {"HardSigmoid", {"alpha", "beta"}},
      {"ReduceMean", {"axes", "keepdims", "noop_with_empty_axes"}},
      {"Flatten", {"axis"}},
      {"Gemm", {"alpha", "beta", "transA", "transB"}},
      {"Dropout", {"ratio", "seed"}},
      {"Concat", {"axis"}},
      {"Pad", {"mode", "pads", "value"}},
      {"Constant", {"value"}},
      {"Transpose", {"perm"}},
      {"Shape", {}},
      {"Gather", {"axis"}},
      {"Unsqueeze", {"axes"}},
      {"Squeeze", {"axes"}},
      {"Cast", {"to"}},
      {"Reshape", {"allowzero"}},
      {"Slice", {}},
      {"Sub", {}},
      {"Div", {}},
      {"Mul", {}},
      {"Add", {}},
  };
  static const std::set<std::string> without = {"Relu", "Sigmoid", "HardSwish", "GlobalAveragePool", "Identity",
                                                "Erf", "Sqrt", "Pow", "MatMul"};
  auto it = known.find(n.op_type());
  if (it == known.end() && !without.count(n.op_type())) return;  // not read at all: said by the caller
  for (const auto& a : n.attribute())
    if (it == known.end() || !it->second.count(a.name()))
      node_fail(n, "has the attribute '" + a.name() + "', which cnnscale does not read for " + n.op_type() +
                       " (opset " + std::to_string(opset_) + ")");
}

int Importer::tensor(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size() || n.input(i).empty()) node_fail(n, "input " + std::to_string(i) + " is missing");
  auto it = ids_.find(n.input(i));
  if (it == ids_.end()) {
    if (constant(n.input(i)))
      node_fail(n, "input '" + n.input(i) + "' is a constant where cnnscale needs a computed tensor");
    node_fail(n, "input '" + n.input(i) + "' is produced by no node before it");
  }
  static const std::set<std::string> view_ops = {"Transpose", "MatMul", "ReduceMean", "Relu", "Sigmoid", "HardSwish",
                                                 "HardSigmoid", "Clip", "Div", "Identity"};
  if (nhwc_.count(n.input(i)) && !view_ops.count(n.op_type()))
    node_fail(n, "reads a channels-last (permuted) tensor; cnnscale reads permutes around a LayerNorm or a Linear "
                 "over the channels (ConvNeXt's form) and element-wise activations between them");
  return it->second;
}

std::shared_ptr<const std::vector<float>> Importer::param_data(const onnx::NodeProto& n, const std::string& name) const {
  auto it = inits_.find(name);
  if (it == inits_.end()) node_fail(n, "'" + name + "' is not an initializer (a parameter of the file)");
  if (it->second->data_type() != onnx::TensorProto::FLOAT)
    node_fail(n, "parameter '" + name + "' is not float32 (ONNX data type " + std::to_string(it->second->data_type()) + ")");
  const onnx::TensorProto& t = *it->second;
  const size_t count = numel_of(t, file_);
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    node_fail(n, "parameter '" + name + "' keeps its data in an external file, which cnnscale does not read; " +
                     kExportHint);
  // the sizes first: nothing is allocated for values the file does not hold
  const size_t held = t.raw_data().empty() ? static_cast<size_t>(t.float_data_size()) : t.raw_data().size() / sizeof(float);
  if (held != count || (!t.raw_data().empty() && t.raw_data().size() % sizeof(float) != 0))
    node_fail(n, "parameter '" + name + "' holds " + std::to_string(held) + " values for its " + std::to_string(count) +
                     " (a damaged file?)");
  auto v = std::make_shared<std::vector<float>>(count);
  if (!t.raw_data().empty())  // torch writes raw little-endian bytes: copied as they are
    std::memcpy(v->data(), t.raw_data().data(), count * sizeof(float));
  else
    std::copy(t.float_data().begin(), t.float_data().end(), v->begin());
  return v;
}

// The module path of a parameter named PREFIX.weight; an eval-mode export's names
// (onnx::Conv_…) are refused with the way out.
std::string Importer::prefix(const onnx::NodeProto& n, const std::string& weight) const {
  if (weight.rfind("onnx::", 0) == 0)
    node_fail(n, "its weight is named '" + weight +
                     "', as in an eval-mode export (batch norms folded into the convolutions: not the trainable "
                     "network); " + kExportHint);
  const std::string suffix = ".weight";
  if (weight.size() <= suffix.size() || weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) != 0)
    node_fail(n, "its weight '" + weight + "' is not named MODULE.weight (a state_dict name); " + kExportHint);
  return weight.substr(0, weight.size() - suffix.size());
}

void Importer::check_param(const onnx::NodeProto& n, const std::string& name, const std::string& want) const {
  if (name != want)
    node_fail(n, "parameter '" + name + "' should be named '" + want + "' (state_dict names); " + kExportHint);
}

void Importer::give(const onnx::NodeProto& n, const std::string& init_name) {
  auto it = inits_.find(init_name);
  if (it == inits_.end()) node_fail(n, "'" + init_name + "' is not an initializer (a parameter of the file)");
  try {
    b_.set_given(init_name, param_data(n, init_name));
  } catch (const UserError& e) {
    node_fail(n, e.what());
  }
}

std::vector<int> Importer::readers(const std::string& value) const {
  auto it = readers_.find(value);
  return it == readers_.end() ? std::vector<int>{} : it->second;
}

// Sigmoid(x) read only by Mul(x, ·) / Mul(·, x): SiLU.
bool Importer::match_silu(int k) {
  const auto& s = g_.node(k);
  const auto r = readers(s.output(0));
  if (r.size() != 1) return false;
  const auto& mul = g_.node(r[0]);
  if (mul.op_type() != "Mul" || mul.input_size() != 2) return false;
  const std::string& other = mul.input(0) == s.output(0) ? mul.input(1) : mul.input(0);
  if (other != s.input(0) || mul.input(0) == mul.input(1)) return false;
  set(mul.output(0), b_.act(tensor(s, 0), Act::silu));
  view_like(s.input(0), mul.output(0));
  skip_[r[0]] = 1;
  return true;
}

// Div(x, √2) → Erf → Add(·, 1) → Mul(x, ·) → Mul(·, 0.5), or Mul(x, 0.5) · (1 + erf):
// torch's GELU (approximate='none').
bool Importer::match_gelu(int k) {
  const auto& div = g_.node(k);
  const Const* c = constant(div.input(1));
  if (!c || !c->scalar_like() || std::abs(c->v[0] - std::sqrt(2.0)) > 1e-6) return false;
  const int erf = sole_reader(div.output(0), "Erf");
  if (erf < 0) return false;
  const int add = sole_reader(g_.node(erf).output(0), "Add");
  if (add < 0) return false;
  const auto& an = g_.node(add);
  const std::string& add_c = an.input(0) == g_.node(erf).output(0) ? an.input(1) : an.input(0);
  const Const* ac = constant(add_c);
  if (!ac || !ac->scalar_like() || ac->v[0] != 1.0) return false;
  const int m1 = sole_reader(an.output(0), "Mul");
  if (m1 < 0) return false;
  const auto& mn = g_.node(m1);
  const std::string& m1_other = mn.input(0) == an.output(0) ? mn.input(1) : mn.input(0);
  const std::string& x = div.input(0);
  int last = -1;
  if (m1_other == x) {  // x·(1 + erf) then ·0.5
    last = sole_reader(mn.output(0), "Mul");
    if (last < 0) return false;
    const auto& ln = g_.node(last);
    const Const* h = constant(ln.input(0) == mn.output(0) ? ln.input(1) : ln.input(0));
    if (!h || !h->scalar_like() || h->v[0] != 0.5) return false;
  } else {  // (x·0.5)·(1 + erf)
    bool ok = false;
    for (int r : readers(x)) {
      const auto& h = g_.node(r);
      if (h.op_type() == "Mul" && h.output(0) == m1_other) {
        const Const* hc = constant(h.input(0) == x ? h.input(1) : h.input(0));
        ok = hc && hc->scalar_like() && hc->v[0] == 0.5 && readers(h.output(0)).size() == 1;
        if (ok) skip_[r] = 1;
      }
    }
    if (!ok) return false;
    last = m1;
  }
  skip_[erf] = skip_[add] = skip_[m1] = skip_[last] = 1;
  set(g_.node(last).output(0), b_.act(tensor(div, 0), Act::gelu));
  view_like(x, g_.node(last).output(0));
  return true;
}

// On a channels-last view v: ReduceMean(v, -1) → Sub(v, ·) → Pow(·, 2) → ReduceMean(·, -1) →
// Add(·, eps) → Sqrt → Div(sub, ·) → Mul(·, P.weight) → Add(·, P.bias): torch's LayerNorm over
// the channels (ConvNeXt's LayerNorm2d and its permute → LayerNorm → permute).
bool Importer::match_layernorm(int k) {
  const auto& r1 = g_.node(k);
  const std::string& v = r1.input(0);
  if (!nhwc_.count(v)) return false;
  auto last_axis = [&](const onnx::NodeProto& n) {
    auto axes = attr_ints(n, "axes");
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == 3) && attr_i(n, "keepdims", 1) == 1;
  };
  auto other = [](const onnx::NodeProto& n, const std::string& a) { return n.input(0) == a ? n.input(1) : n.input(0); };
  if (!last_axis(r1)) return false;
  const int sub = sole_reader(r1.output(0), "Sub");
  if (sub < 0 || g_.node(sub).input(0) != v) return false;
  int pow = -1, div = -1;
  for (int r : readers(g_.node(sub).output(0))) {
    if (g_.node(r).op_type() == "Pow") pow = r;
    if (g_.node(r).op_type() == "Div") div = r;
  }
  if (pow < 0 || div < 0 || readers(g_.node(sub).output(0)).size() != 2) return false;
  const Const* two = constant(g_.node(pow).input(1));
  if (!two || !two->scalar_like() || two->v[0] != 2) return false;
  const int r2 = sole_reader(g_.node(pow).output(0), "ReduceMean");
  if (r2 < 0 || !last_axis(g_.node(r2))) return false;
  const int add = sole_reader(g_.node(r2).output(0), "Add");
  if (add < 0) return false;
  const Const* eps = constant(other(g_.node(add), g_.node(r2).output(0)));
  if (!eps || !eps->scalar_like()) return false;
  const int sq = sole_reader(g_.node(add).output(0), "Sqrt");
  if (sq < 0 || sole_reader(g_.node(sq).output(0), "Div") != div || g_.node(div).input(0) != g_.node(sub).output(0)) return false;
  const int mul = sole_reader(g_.node(div).output(0), "Mul");
  if (mul < 0) return false;
  const std::string w = other(g_.node(mul), g_.node(div).output(0));
  const int add2 = sole_reader(g_.node(mul).output(0), "Add");
  if (add2 < 0) return false;
  const std::string bias = other(g_.node(add2), g_.node(mul).output(0));
  const std::string p = prefix(g_.node(mul), w);
  check_param(g_.node(add2), bias, p + ".bias");
  int y;
  try {
    y = b_.layernorm2d(tensor(r1, 0), p, shortest(static_cast<float>(eps->v[0])));
  } catch (const UserError& e) {
    node_fail(r1, e.what());
  }
  give(g_.node(mul), w);
  give(g_.node(add2), bias);
  for (int j : {sub, pow, r2, add, sq, div, mul, add2}) skip_[j] = 1;
  set(g_.node(add2).output(0), y);
  nhwc_.insert(g_.node(add2).output(0));
  return true;
}

// Shape arithmetic on constants (the shapes torch computes with x.size() in a dynamic-size
// export), folded at import: Shape of a tensor is [N, C, H, W] with the batch N unknown (NaN,
// which every result computed from it carries), then Gather, Unsqueeze, Squeeze, Cast, Concat,
// Add, Sub, Mul, Div of constants. True when n was folded (its output is a constant now).
bool Importer::fold(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Shape" && n.input_size() == 1 && constant(n.input(0))) {  // of a constant (torch's F.pad export)
    const Const& a = *constant(n.input(0));
    Const c;
    c.dims = {static_cast<int64_t>(a.dims.size())};
    for (int64_t d : a.dims) c.v.push_back(static_cast<double>(d));
    consts_[n.output(0)] = c;
    return true;
  }
  if (op == "Shape") {
    const int x = tensor(n, 0);
    const Shape& sh = b_.shape(x);
    Const c;
    c.dims = {sh.flat ? 2 : sh.volume() ? 5 : 4};
    c.v = {NAN, static_cast<double>(sh.c)};
    if (sh.volume()) c.v.push_back(static_cast<double>(sh.d));
    if (!sh.flat) c.v.insert(c.v.end(), {static_cast<double>(sh.h), static_cast<double>(sh.w)});
    consts_[n.output(0)] = c;
    return true;
  }
  static const std::set<std::string> foldable = {"Gather", "Unsqueeze", "Squeeze", "Cast", "Concat", "Add", "Sub",
                                                 "Mul", "Div", "ConstantOfShape", "Reshape", "Slice", "Transpose"};
  if (!foldable.count(op) || n.input_size() == 0) return false;
  for (const auto& i : n.input())
    if (i.empty() || !constant(i) || (inits_.count(i) && constant(i)->v.empty())) return false;
  const Const& a = *constant(n.input(0));
  Const r;
  if (op == "Gather") {
    const Const& idx = *constant(n.input(1));
    if (attr_i(n, "axis", 0) != 0 || a.dims.size() > 1) node_fail(n, "gathers from other than a 1-D shape");
    for (double i : idx.v) {
      int64_t j = static_cast<int64_t>(i);
      if (j < 0) j += static_cast<int64_t>(a.v.size());
      if (j < 0 || j >= static_cast<int64_t>(a.v.size())) node_fail(n, "has an index out of range");
      r.v.push_back(a.v[static_cast<size_t>(j)]);
    }
    r.dims = idx.dims;
  } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Cast") {
    r.v = a.v;
    r.dims = {static_cast<int64_t>(a.v.size())};  // scalars and 1-D shapes only
    if (op == "Squeeze" && a.v.size() == 1) r.dims.clear();
    if (op == "Cast")
      for (auto& v : r.v)
        if (!std::isnan(v) && attr_i(n, "to", 1) != onnx::TensorProto::FLOAT && attr_i(n, "to", 1) != onnx::TensorProto::DOUBLE)
          v = std::trunc(v);
  } else if (op == "ConstantOfShape") {  // small shapes only (pads, sizes)
    double fill = 0;
    if (const auto* v = attr(n, "value"); v && v->has_t()) {
      const Const f = to_const(v->t(), file_);
      if (f.v.size() != 1) return false;
      fill = f.v[0];
    }
    int64_t count = 1;
    for (double d : a.v) {
      if (!(d >= 0 && d <= 64)) return false;
      count *= static_cast<int64_t>(d);
      if (count > 4096) return false;  // (before eleven 64s overflow it)
      r.dims.push_back(static_cast<int64_t>(d));
    }
    if (count > 4096) return false;
    r.v.assign(static_cast<size_t>(count), fill);
  } else if (op == "Reshape") {  // of a small constant, by a constant shape (-1: the rest, 0: copy)
    const Const& sh = *constant(n.input(1));
    int64_t known = 1, infer = -1;
    // Sizes beyond 2^31 are no shape of a small constant (and overflowed known and total:
    // fuzz_onnx_import); such a Reshape is not folded.
    for (size_t i = 0; i < sh.v.size(); ++i) {
      if (!(sh.v[i] >= -1 && sh.v[i] <= 2147483647.0)) return false;
      int64_t d = static_cast<int64_t>(sh.v[i]);
      if (d == 0 && i < a.dims.size()) d = a.dims[i];
      if (d == -1) infer = static_cast<int64_t>(i);
      else if (d < 1 || __builtin_mul_overflow(known, d, &known)) return false;
      r.dims.push_back(d);
    }
    if (infer >= 0) {
      if (known == 0 || static_cast<int64_t>(a.v.size()) % known) return false;
      r.dims[static_cast<size_t>(infer)] = static_cast<int64_t>(a.v.size()) / known;
    }
    int64_t total = 1;
    for (int64_t d : r.dims)
      if (__builtin_mul_overflow(total, d, &total)) return false;
    if (total != static_cast<int64_t>(a.v.size())) return false;
    r.v = a.v;
  } else if (op == "Transpose") {  // a 2-D constant
    const auto perm = attr_ints(n, "perm");
    if (a.dims.size() != 2 || (!perm.empty() && perm != std::vector<int64_t>{1, 0})) return false;
    const int64_t R = a.dims[0], C = a.dims[1];
    r.dims = {C, R};
    for (int64_t j = 0; j < C; ++j)
      for (int64_t i = 0; i < R; ++i) r.v.push_back(a.v[static_cast<size_t>(i * C + j)]);
  } else if (op == "Slice") {  // of a constant along one axis (torch's flip: step -1)
    if (n.input_size() < 3 || a.dims.empty()) return false;
    auto one = [&](int i, double dflt) {
      if (n.input_size() <= i || n.input(i).empty()) return dflt;
      const Const& c = *constant(n.input(i));
      return c.v.size() == 1 ? c.v[0] : NAN;
    };
    const double st = one(1, NAN), en = one(2, NAN), ax = one(3, 0), sp = one(4, 1);
    if (std::isnan(st) || std::isnan(en) || std::isnan(ax) || std::isnan(sp) || sp == 0) return false;
    const int64_t rank = static_cast<int64_t>(a.dims.size());
    const int64_t axis = static_cast<int64_t>(ax) < 0 ? static_cast<int64_t>(ax) + rank : static_cast<int64_t>(ax);
    if (axis < 0 || axis >= rank) return false;
    const int64_t len = a.dims[static_cast<size_t>(axis)], step = static_cast<int64_t>(sp);
    auto clampi = [&](double v, bool is_end) {  // ONNX's clamping of starts and ends
      int64_t i = v < -1e18 ? INT64_MIN / 2 : v > 1e18 ? INT64_MAX / 2 : static_cast<int64_t>(v);
      if (i < 0) i += len;
      if (step > 0) return std::clamp<int64_t>(i, 0, len);
      return std::clamp<int64_t>(i, is_end ? -1 : 0, len - 1);  // negative steps
    };
    const int64_t b = clampi(st, false), e = clampi(en, true);
    std::vector<int64_t> idx;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) idx.push_back(i);
    int64_t inner = 1, outer = 1;
    for (int64_t d = axis + 1; d < rank; ++d) inner *= a.dims[static_cast<size_t>(d)];
    for (int64_t d = 0; d < axis; ++d) outer *= a.dims[static_cast<size_t>(d)];
    r.dims = a.dims;
    r.dims[static_cast<size_t>(axis)] = static_cast<int64_t>(idx.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i : idx)
        for (int64_t k = 0; k < inner; ++k) r.v.push_back(a.v[static_cast<size_t>((o * len + i) * inner + k)]);
  } else if (op == "Concat") {
    if (attr_i(n, "axis", 0) != 0) return false;
    for (const auto& i : n.input()) {
      const Const& c = *constant(i);
      r.v.insert(r.v.end(), c.v.begin(), c.v.end());
    }
    r.dims = {static_cast<int64_t>(r.v.size())};
  } else {  // Add Sub Mul Div, elementwise with a scalar broadcast
    const Const& b = *constant(n.input(1));
    if (a.v.size() != b.v.size() && a.v.size() != 1 && b.v.size() != 1) return false;
    const size_t len = std::max(a.v.size(), b.v.size());
    r.dims = a.v.size() >= b.v.size() ? a.dims : b.dims;
    for (size_t i = 0; i < len; ++i) {
      const double x = a.v[a.v.size() == 1 ? 0 : i], y = b.v[b.v.size() == 1 ? 0 : i];
      double z = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
      if (op == "Div" && !std::isnan(z) && std::trunc(x) == x && std::trunc(y) == y) z = std::trunc(z);  // integer division
      r.v.push_back(z);
    }
  }
  consts_[n.output(0)] = r;
  return true;
}

// Reshape of a tensor by a folded shape: to [N, g, C/g, H, W] (the first half of a channel
// shuffle), from the transposed 5-D view back to [N, C, H, W] (channel_shuffle), or to
// [N, -1] / [N, C·H·W] (flatten). False for anything else.
bool Importer::reshape(const onnx::NodeProto& n) {
  const Const* sh = n.input_size() > 1 ? constant(n.input(1)) : nullptr;
  if (!sh) node_fail(n, "reshapes to a shape that is not constant once the input size is known");
  const auto& v = sh->v;
  auto batch = [&](double d) { return std::isnan(d) || d == 0; };  // N (from x.size(0)), or 0: copy
  if (auto g = grouped_.find(n.input(0)); g != grouped_.end()) {
    const Shape& s = b_.shape(g->second.id);
    if (!g->second.transposed || v.size() != 4 || !batch(v[0]) || !(v[1] == -1 || v[1] == s.c) || v[2] != s.h ||
        v[3] != s.w)
      node_fail(n, "reshapes a grouped 5-D view other than back to N×C×H×W after a transpose of the group axes "
                   "(a channel shuffle)");
    set(n.output(0), b_.channel_shuffle(g->second.id, g->second.groups));
    return true;
  }
  const int x = tensor(n, 0);
  const Shape& s = b_.shape(x);
  if (v.size() == 2 && batch(v[0]) && (v[1] == -1 || v[1] == static_cast<double>(s.numel()))) {
    set(n.output(0), b_.flatten(x));
    return true;
  }
  if (v.size() == 5 && batch(v[0]) && !s.flat && v[1] >= 1 && v[1] * v[2] == s.c && v[3] == s.h && v[4] == s.w) {
    grouped_[n.output(0)] = {x, static_cast<int>(v[1]), false};
    return true;
  }
  return false;
}

// Square (cube) kernels, equal strides, one padding on every side, no dilation: PyTorch's
// Conv2d / Conv3d / pools with int arguments (GraphBuilder's layers). With `end_pad`
// (Conv), the ends may be padded one step more than the begins: PyTorch's padding='same' of
// an even kernel (Window::pad_end).
// "AxBxCxD" of a weight's dims; "kxk" (a volume's "kxkxk") of a window (messages).
std::string dims_text(const onnx::TensorProto& t) {
  std::string out;
  for (int i = 0; i < t.dims_size(); ++i) out.append(i ? "x" : "").append(std::to_string(t.dims(i)));
  return out;
}
std::string kernel_text(int k, bool volume) {
  const std::string s = std::to_string(k);
  return volume ? s + "x" + s + "x" + s : s + "x" + s;
}

struct Window {
  int k = 0, stride = 1, pad = 0, pad_end = 0;
  size_t dims = 2;  // 3: a 3-D window (Conv3d, MaxPool3d)
};
Window window(const onnx::NodeProto& n, const std::vector<int64_t>& kernel,
              const std::function<void(const std::string&)>& bad, bool end_pad = false) {
  Window w;
  const auto* ap = attr(n, "auto_pad");
  if (ap && ap->s() != "NOTSET") bad("auto_pad " + ap->s() + " (cnnscale takes explicit pads)");
  if (kernel.size() != 2 && kernel.size() != 3)
    bad("a kernel of " + std::to_string(kernel.size()) + " dimensions (2-D and 3-D only)");
  w.dims = kernel.size();
  for (size_t i = 1; i < kernel.size(); ++i)
    if (kernel[i] != kernel[0]) bad("a kernel of unequal sides (square or cube only)");
  w.k = static_cast<int>(kernel[0]);
  auto strides = attr_ints(n, "strides");
  if (strides.empty()) strides.assign(w.dims, 1);
  if (strides.size() != w.dims || std::any_of(strides.begin(), strides.end(), [&](int64_t v) { return v != strides[0]; }))
    bad("unequal strides (one stride for all axes only)");
  w.stride = static_cast<int>(strides[0]);
  auto pads = attr_ints(n, "pads");
  if (pads.empty()) pads.assign(2 * w.dims, 0);
  if (pads.size() != 2 * w.dims) bad("pads of " + std::to_string(pads.size()) + " values");
  const int64_t extra = pads[w.dims] - pads[0];
  for (size_t i = 0; i < 2 * w.dims; ++i)
    if (pads[i] != pads[0] + (i < w.dims ? 0 : extra))
      bad("unequal pads (one padding on every side only" + std::string(end_pad ? ", or one more at every end" : "") + ")");
  if (extra != 0 && !(end_pad && extra == 1)) bad("unequal pads (one padding on every side only)");
  w.pad_end = static_cast<int>(extra);
  const int64_t limit = 1 << 16;  // no real kernel, stride or padding comes near
  if (kernel[0] < 1 || kernel[0] > limit) bad("kernel size " + std::to_string(kernel[0]));
  if (strides[0] < 1 || strides[0] > limit) bad("stride " + std::to_string(strides[0]));
  if (pads[0] < 0 || pads[0] > limit) bad("padding " + std::to_string(pads[0]));
  w.pad = static_cast<int>(pads[0]);
  for (auto d : attr_ints(n, "dilations"))
    if (d != 1) bad("dilation " + std::to_string(d) + " (dilation 1 only)");
  return w;
}

void Importer::conv(const onnx::NodeProto& n, int pad_extra, int end_extra) {
  if (end_extra < 0) end_extra = pad_extra;
  auto bad = [&](const std::string& w) { node_fail(n, "has " + w); };
  if (n.input_size() < 2) node_fail(n, "has no weight input");
  auto it = inits_.find(n.input(1));
  if (it == inits_.end()) node_fail(n, "its weight '" + n.input(1) + "' is not an initializer");
  const auto& wt = *it->second;
  const bool volume = b_.shape(tensor(n, 0)).volume();
  if (wt.dims_size() != (volume ? 5 : 4))
    node_fail(n, "its weight has " + std::to_string(wt.dims_size()) + " dimensions (" +
                     (volume ? "Conv3d on volumes" : "Conv2d on images") + ")");
  auto kernel = attr_ints(n, "kernel_shape");
  if (kernel.empty())
    for (int i = 2; i < wt.dims_size(); ++i) kernel.push_back(wt.dims(i));
  Window w = window(n, kernel, bad, true);
  if (w.dims != static_cast<size_t>(wt.dims_size() - 2)) bad("a kernel_shape of another rank than its weight");
  if ((w.pad != 0 || w.pad_end != 0) && (pad_extra != 0 || end_extra != 0)) bad("padding of its own after a Pad");
  w.pad += pad_extra;
  w.pad_end += end_extra - pad_extra;  // F.pad(x, (0, 1, ...)) before an unpadded Conv: padding='same'
  const int64_t group = attr_i(n, "group", 1), cin = b_.shape(tensor(n, 0)).c;
  if (group < 1 || cin % group != 0 || wt.dims(0) < 1 || wt.dims(1) != cin / group || wt.dims(2) != w.k ||
      wt.dims(3) != w.k || (volume && wt.dims(4) != w.k))
    bad("a weight of " + dims_text(wt) + " for " + std::to_string(cin) + " input channels in " +
        std::to_string(group) + " groups and a " + kernel_text(w.k, volume) + " kernel");
  const std::string p = prefix(n, n.input(1));
  const bool bias = n.input_size() > 2 && !n.input(2).empty();
  if (bias) check_param(n, n.input(2), p + ".bias");
  int y;
  try {
    y = b_.conv(tensor(n, 0), p, static_cast<int>(wt.dims(0)), w.k, w.stride, w.pad, bias,
                static_cast<int>(attr_i(n, "group", 1)), w.pad_end);
  } catch (const UserError& e) {
    node_fail(n, e.what());
  }
  give(n, n.input(1));
  if (bias) give(n, n.input(2));
  set(n.output(0), y);
}

// ConvTranspose (PyTorch's ConvTranspose2d, ConvTranspose3d on volumes): groups 1, no output
// padding or output shape, the window rules of Conv (square or cube kernel, one stride, one
// padding, dilation 1).
void Importer::deconv(const onnx::NodeProto& n) {
  auto bad = [&](const std::string& w) { node_fail(n, "has " + w); };
  if (n.input_size() < 2) node_fail(n, "has no weight input");
  auto it = inits_.find(n.input(1));
  if (it == inits_.end()) node_fail(n, "its weight '" + n.input(1) + "' is not an initializer");
  const auto& wt = *it->second;
  const bool volume = b_.shape(tensor(n, 0)).volume();
  if (wt.dims_size() != (volume ? 5 : 4))
    node_fail(n, "its weight has " + std::to_string(wt.dims_size()) + " dimensions (" +
                     (volume ? "ConvTranspose3d on volumes" : "ConvTranspose2d on images") + ")");
  auto kernel = attr_ints(n, "kernel_shape");
  if (kernel.empty())
    for (int i = 2; i < wt.dims_size(); ++i) kernel.push_back(wt.dims(i));
  const Window w = window(n, kernel, bad);
  if (w.dims != static_cast<size_t>(wt.dims_size() - 2)) bad("a kernel_shape of another rank than its weight");
  if (attr_i(n, "group", 1) != 1) bad("groups (cnnscale's transposed convolution has one group)");
  for (int64_t v : attr_ints(n, "output_padding"))
    if (v != 0) bad("output_padding (cnnscale's transposed convolution has none yet)");
  if (attr(n, "output_shape")) bad("an output_shape (give pads instead, as PyTorch exports)");
  const int64_t cin = b_.shape(tensor(n, 0)).c;
  if (wt.dims(0) != cin || wt.dims(1) < 1 || wt.dims(2) != w.k || wt.dims(3) != w.k || (volume && wt.dims(4) != w.k))
    bad("a weight of " + dims_text(wt) + " for " + std::to_string(cin) + " input channels and a " +
        kernel_text(w.k, volume) + " kernel");
  const std::string p = prefix(n, n.input(1));
  const bool bias = n.input_size() > 2 && !n.input(2).empty();
  if (bias) check_param(n, n.input(2), p + ".bias");
  int y;
  try {
    y = b_.deconv(tensor(n, 0), p, static_cast<int>(wt.dims(1)), w.k, w.stride, w.pad, bias);
  } catch (const UserError& e) {
    node_fail(n, e.what());
  }
  give(n, n.input(1));
  if (bias) give(n, n.input(2));
  set(n.output(0), y);
}

void Importer::pool(const onnx::NodeProto& n, bool max, int pad_extra) {
  auto bad = [&](const std::string& w) { node_fail(n, "has " + w); };
  Window w = window(n, attr_ints(n, "kernel_shape"), bad);
  if ((w.dims == 3) != b_.shape(tensor(n, 0)).volume())
    bad(w.dims == 3 ? "a 3-D window on images" : "a 2-D window on volumes");
  const bool ceil = attr_i(n, "ceil_mode", 0) != 0;
  if (max && attr_i(n, "storage_order", 0) != 0) bad("storage_order 1");
  if (max && n.output_size() > 1 && !n.output(1).empty() && !readers(n.output(1)).empty()) bad("its indices read");
  if (!max) {
    if (ceil) bad("ceil_mode 1 (average pools floor their output size in cnnscale)");
    if (w.pad != 0 && attr_i(n, "count_include_pad", 0) == 0)
      bad("padding not counted in the average (count_include_pad 0; cnnscale's average pool counts it, as "
          "PyTorch's default)");
    if (w.pad != 0 && pad_extra != 0) bad("padding of its own after a Pad");
  }
  w.pad += pad_extra;
  int y;
  try {
    y = max ? b_.maxpool(tensor(n, 0), w.k, w.stride, w.pad, ceil) : b_.avgpool(tensor(n, 0), w.k, w.stride, w.pad);
  } catch (const UserError& e) {
    node_fail(n, e.what());
  }
  set(n.output(0), y);
}

ModelGraph Importer::run(int classes) {
  // Opset and input.
  int64_t& opset = opset_;
  for (const auto& o : m_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  // Opsets 1–17: PyTorch exports 13–17 (scripts/export-onnx.py: 14); the older forms of the ops
  // read here (Clip's and Pad's attributes, Dropout's ratio attribute, BatchNormalization
  // without training_mode) are read too, and an older version's other attributes (is_test,
  // spatial, consumed_inputs) are refused by name (check_attributes), so ONNX's conformance
  // cases (each at its op's own version) check the importer. Opset 18 moved more attributes
  // to inputs: refused for now.
  if (opset < 1 || opset > 17)
    fail(file_, ": ONNX opset ", opset, "; cnnscale reads opsets up to 17 (scripts/export-onnx.py --opset 14)");
  for (const auto& t : g_.initializer()) {
    inits_[t.name()] = &t;
    // torch.onnx.export's default (eval mode) folds each batch norm into the conv before it
    // and names the new weights onnx::Conv_…: a different network from the module's.
    if (t.name().rfind("onnx::", 0) == 0 && t.data_type() == onnx::TensorProto::FLOAT && t.dims_size() >= 2)
      fail(file_, ": initializer '", t.name(), "' is not a state_dict name: an eval-mode export (batch norms folded ",
           "into the convolutions, not the network to train); ", kExportHint);
  }
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const auto& i : g_.input())
    if (!inits_.count(i.name())) inputs.push_back(&i);
  if (inputs.size() != 1) fail(file_, ": the graph has ", inputs.size(), " inputs; cnnscale feeds one (the images)");
  const auto& in = *inputs[0];
  const auto& tt = in.type().tensor_type();
  if (tt.elem_type() != onnx::TensorProto::FLOAT)
    fail(file_, ": the input '", in.name(), "' is not float32 (ONNX type ", tt.elem_type(), ")");
  const auto& dims = tt.shape().dim();
  const bool vol = in_.volume();
  if (dims.size() != (vol ? 5 : 4))
    fail(file_, ": the input '", in.name(), "' has ", dims.size(), " dimensions; cnnscale feeds ",
         vol ? "N×C×D×H×W (the data set holds volumes)" : "N×C×H×W");
  auto fixed = [&](int i) { return dims[i].has_dim_value() ? dims[i].dim_value() : -1; };
  std::vector<int64_t> want{in_.channels};
  if (vol) want.push_back(in_.depth);
  want.insert(want.end(), {in_.height, in_.width});
  auto d = [&](int j) { return fixed(j) >= 0 ? std::to_string(fixed(j)) : dims[j].dim_param(); };
  std::string theirs = d(1);
  for (int j = 2; j < dims.size(); ++j) theirs.append("x").append(d(j));
  theirs += vol ? " (C×D×H×W)" : " (C×H×W)";
  const std::string data = in_.text();
  std::string shape_arg = std::to_string(in_.channels);
  for (size_t j = 1; j < want.size(); ++j) shape_arg.append(",").append(std::to_string(want[j]));
  if (fixed(1) >= 0 && fixed(1) != want[0])
    fail(file_, ": the model takes inputs of ", theirs, " but the data set's are ", data, "; export it for ",
         in_.channels, " input channels (scripts/export-onnx.py --input-shape ", shape_arg, ")");
  for (int i = 2; i < dims.size(); ++i)
    if (fixed(i) >= 0 && fixed(i) != want[static_cast<size_t>(i - 1)])
      fail(file_, ": the model takes inputs of ", theirs, " (its size fixed at export) but the data set's are ", data,
           "; export it for the data's size (scripts/export-onnx.py --input-shape ", shape_arg,
           "), or for any size (without --fixed-size) where its layers allow");
  set(in.name(), b_.input());
  for (const auto& t : g_.initializer()) consts_[t.name()] = Const{};  // filled lazily below
  for (auto& [name, c] : consts_) {
    const auto* t = inits_[name];
    if (t->data_type() != onnx::TensorProto::FLOAT || t->dims_size() == 0 || t->dims_size() == 1) {
      // small constants (Clip bounds, Dropout ratios, Pad amounts); parameters are read when used
      const int64_t n = t->dims_size() == 0 ? 1 : t->dims(0);
      if (n <= 64) c = to_const(*t, file_);
    }
  }
  for (int k = 0; k < g_.node_size(); ++k) {
    const auto& n = g_.node(k);
    // up front, so that the patterns, which look ahead at readers, only meet ONNX's own ops
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      node_fail(n, "is from the operator set '" + n.domain() + "'; cnnscale reads ONNX's own operators: " + kSupported);
    if (n.output_size() < 1 || n.output(0).empty()) node_fail(n, "has no output");
    for (const auto& i : n.input())
      if (!i.empty()) readers_[i].push_back(k);
    if (n.op_type() == "Constant" && n.output_size() == 1) {  // all of them first: patterns look ahead
      const auto* v = attr(n, "value");
      if (!v || !v->has_t()) node_fail(n, "has no tensor 'value' (only that form is read)");
      consts_[n.output(0)] = to_const(v->t(), file_);
    }
  }
  skip_.assign(static_cast<size_t>(g_.node_size()), 0);

  for (int k = 0; k < g_.node_size(); ++k) {
    if (skip_[k]) continue;
    const auto& n = g_.node(k);
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      node_fail(n, "is from the operator set '" + n.domain() + "'; cnnscale reads ONNX's own operators: " + kSupported);
    const std::string& op = n.op_type();
    check_attributes(n);
    if (fold(n)) continue;
    auto out = [&](int id) { set(n.output(0), id); };
    auto call = [&](auto f) -> int {
      try {
        return f();
      } catch (const UserError& e) {
        node_fail(n, e.what());
      }
    };
    if (op == "Constant") {
      // read before the loop
    } else if (op == "Reshape") {
      if (!reshape(n))
        node_fail(n, "reshapes other than to N×(C·H·W) (flatten) or a channel shuffle (N×g×C/g×H×W, transpose, back)");
    } else if (op == "Slice") {
      // x[:, begin:end] of a tensor: channel_slice (ShuffleNetV2's x.chunk(2, dim=1))
      const Const* st = n.input_size() > 1 ? constant(n.input(1)) : nullptr;
      const Const* en = n.input_size() > 2 ? constant(n.input(2)) : nullptr;
      const Const* ax = n.input_size() > 3 && !n.input(3).empty() ? constant(n.input(3)) : nullptr;
      const Const* sp = n.input_size() > 4 && !n.input(4).empty() ? constant(n.input(4)) : nullptr;
      if (!st || !en || (n.input_size() > 3 && !n.input(3).empty() && !ax) || (n.input_size() > 4 && !n.input(4).empty() && !sp))
        node_fail(n, "has bounds that are not constant once the input size is known");
      if (!ax || ax->v.size() != 1 || (ax->v[0] != 1 && ax->v[0] != -3) || st->v.size() != 1 || en->v.size() != 1 ||
          (sp && (sp->v.size() != 1 || sp->v[0] != 1)))
        node_fail(n, "slices other than a channel range with step 1");
      const int x = tensor(n, 0);
      const int c = b_.shape(x).c;
      auto clamp = [&](double v) {
        if (std::isnan(v)) node_fail(n, "has a bound computed from the batch size");
        if (v < 0) v += c;
        return static_cast<int>(std::clamp(v, 0.0, static_cast<double>(c)));
      };
      const int b = clamp(st->v[0]), e = clamp(en->v[0]);
      out(b == 0 && e == c ? x : call([&] { return b_.channel_slice(x, b, e); }));
    } else if (op == "Transpose" && grouped_.count(n.input(0))) {
      if (attr_ints(n, "perm") != std::vector<int64_t>{0, 2, 1, 3, 4} || grouped_[n.input(0)].transposed)
        node_fail(n, "permutes a grouped 5-D view other than swapping the group axes (a channel shuffle)");
      Grouped gt = grouped_[n.input(0)];
      gt.transposed = true;
      grouped_[n.output(0)] = gt;
    } else if (op == "Transpose") {
      const auto perm = attr_ints(n, "perm");
      if (inits_.count(n.input(0)) && perm == std::vector<int64_t>{1, 0} && inits_[n.input(0)]->dims_size() == 2) {
        transposed_[n.output(0)] = n.input(0);  // a Linear's weight, for MatMul
      } else if (perm == std::vector<int64_t>{0, 2, 3, 1} && !nhwc_.count(n.input(0))) {
        const int x = tensor(n, 0);
        if (b_.shape(x).flat) node_fail(n, "permutes a flat tensor");
        out(x);
        nhwc_.insert(n.output(0));
      } else if (perm == std::vector<int64_t>{0, 3, 1, 2} && nhwc_.count(n.input(0))) {
        out(tensor(n, 0));
      } else {
        node_fail(n, "is a permutation other than N×C×H×W ↔ N×H×W×C around channel-wise layers");
      }
    } else if (op == "MatMul") {
      // nn.Linear over the channels of a channels-last view: MatMul(v, Wᵀ) then Add(P.bias, ·)
      auto tw = transposed_.find(n.input(1));
      if (!nhwc_.count(n.input(0)) || tw == transposed_.end())
        node_fail(n, "is not a Linear over the channels of a permuted N×H×W×C tensor (MatMul by a transposed "
                     "weight; 2-D Linears export as Gemm)");
      const auto r = readers(n.output(0));
      const auto* add = r.size() == 1 && g_.node(r[0]).op_type() == "Add" ? &g_.node(r[0]) : nullptr;
      if (!add) node_fail(n, "has no bias Add after it (nn.Linear(bias=False) is not supported)");
      const std::string p = prefix(n, tw->second);
      const std::string bias = add->input(0) == n.output(0) ? add->input(1) : add->input(0);
      check_param(*add, bias, p + ".bias");
      const int y = call([&] { return b_.pointwise_linear(tensor(n, 0), p, static_cast<int>(inits_[tw->second]->dims(0))); });
      give(n, tw->second);
      give(*add, bias);
      skip_[r[0]] = 1;
      set(add->output(0), y);
      nhwc_.insert(add->output(0));
    } else if (op == "Identity") {
      if (const Const* c = constant(n.input(0))) consts_[n.output(0)] = *c;
      else out(tensor(n, 0));
    } else if (op == "Conv") {
      conv(n, 0);
    } else if (op == "ConvTranspose") {
      deconv(n);
    } else if (op == "Resize") {
      // nn.Upsample / F.interpolate(scale_factor=s) as torch.onnx writes it: constant scales
      // [1, 1, s, s] for an integer s; nearest (asymmetric, floor), bilinear (half_pixel or
      // pytorch_half_pixel: align_corners=False) or bilinear with align_corners=True.
      if (n.input_size() > 3 && !n.input(3).empty()) node_fail(n, "gives output sizes; cnnscale reads a scale factor");
      const Const* sc = n.input_size() > 2 && !n.input(2).empty() ? constant(n.input(2)) : nullptr;
      if (!sc) node_fail(n, "has no constant scales");
      const auto& v = sc->v;
      if (v.size() != 4 || v[0] != 1 || v[1] != 1 || v[2] != v[3] || v[2] < 1 || v[2] > 64 || std::trunc(v[2]) != v[2])
        node_fail(n, "scales other than [1, 1, s, s] for an integer s (cnnscale up-samples H and W alike by 1..64)");
      const std::string mode = attr_s(n, "mode", "nearest"),
                        ctm = attr_s(n, "coordinate_transformation_mode", "half_pixel");
      Resample r;
      if (mode == "nearest" && ctm == "asymmetric" && attr_s(n, "nearest_mode", "round_prefer_floor") == "floor")
        r = Resample::nearest;
      else if (mode == "linear" && (ctm == "half_pixel" || ctm == "pytorch_half_pixel"))
        r = Resample::bilinear;
      else if (mode == "linear" && ctm == "align_corners")
        r = Resample::bilinear_align_corners;
      else
        node_fail(n, "is a " + mode + " resize with coordinates '" + ctm + "'; cnnscale reads PyTorch's nearest " +
                         "(asymmetric, floor) and bilinear (half_pixel, align_corners) up-sampling");
      out(call([&] { return b_.upsample(tensor(n, 0), static_cast<int>(v[2]), r); }));
    } else if (op == "BatchNormalization") {
      const bool training = attr(n, "training_mode") ? attr_i(n, "training_mode", 0) != 0 : n.output_size() > 1;
      if (!training)
        node_fail(n, std::string("is in inference mode (an eval-mode export: running statistics used as constants, "
                                 "not a network to train); ") + kExportHint);
      if (n.input_size() != 5) node_fail(n, "needs 5 inputs");
      const std::string p = prefix(n, n.input(1));
      check_param(n, n.input(2), p + ".bias");
      check_param(n, n.input(3), p + ".running_mean");
      check_param(n, n.input(4), p + ".running_var");
      const double eps = shortest(static_cast<float>(attr_f(n, "epsilon", 1e-5)));
      const double mom = torch_momentum(static_cast<float>(attr_f(n, "momentum", 0.9)));
      if (!(eps > 0) || !std::isfinite(eps) || !(mom >= 0 && mom <= 1))
        node_fail(n, "has epsilon " + std::to_string(eps) + " or momentum " + std::to_string(1 - mom) +
                         " outside what a batch norm takes (epsilon > 0, momentum in [0, 1])");
      out(call([&] { return b_.bn(tensor(n, 0), p, mom, eps); }));
      for (int i = 1; i <= 4; ++i) give(n, n.input(i));
    } else if (op == "Relu") {
      out(call([&] { return b_.relu(tensor(n, 0)); }));
    } else if (op == "Clip") {
      const Const* lo = n.input_size() > 1 && !n.input(1).empty() ? constant(n.input(1)) : nullptr;
      const Const* hi = n.input_size() > 2 && !n.input(2).empty() ? constant(n.input(2)) : nullptr;
      if ((n.input_size() > 1 && !n.input(1).empty() && !lo) || (n.input_size() > 2 && !n.input(2).empty() && !hi))
        node_fail(n, "has bounds that are not constants");
      double l = lo ? scalar_of(n, *lo) : -INFINITY, h = hi ? scalar_of(n, *hi) : INFINITY;
      if (attr(n, "min")) l = attr_f(n, "min", l);  // Clip-6: bounds as attributes
      if (attr(n, "max")) h = attr_f(n, "max", h);
      if (l == 0 && h == 6) out(call([&] { return b_.act(tensor(n, 0), Act::relu6); }));
      else if (l == 0 && std::isinf(h)) out(call([&] { return b_.relu(tensor(n, 0)); }));
      else node_fail(n, "clips to [" + std::to_string(l) + ", " + std::to_string(h) + "]; cnnscale takes [0, 6] (ReLU6) and [0, inf) (ReLU)");
    } else if (op == "Sigmoid") {
      if (!match_silu(k)) out(call([&] { return b_.act(tensor(n, 0), Act::sigmoid); }));
    } else if (op == "HardSigmoid") {
      if (std::abs(attr_f(n, "alpha", 0.2) - 1.0 / 6) > 1e-6 || std::abs(attr_f(n, "beta", 0.5) - 0.5) > 1e-6)
        node_fail(n, "has alpha/beta other than PyTorch's Hardsigmoid (1/6, 1/2)");
      out(call([&] { return b_.act(tensor(n, 0), Act::hardsigmoid); }));
    } else if (op == "LeakyRelu") {
      const double slope = attr_f(n, "alpha", 0.01);
      if (!std::isfinite(slope)) node_fail(n, "has a slope (alpha) that is not a number");
      out(call([&] { return b_.act(tensor(n, 0), Act::leaky_relu, static_cast<float>(slope)); }));
    } else if (op == "Tanh") {
      out(call([&] { return b_.act(tensor(n, 0), Act::tanh); }));
    } else if (op == "HardSwish") {
      out(call([&] { return b_.act(tensor(n, 0), Act::hardswish); }));
    } else if (op == "Div") {
      if (!match_gelu(k))
        node_fail(n, std::string("is a division outside GELU's x/√2 → Erf form; supported: ") + kSupported);
    } else if (op == "MaxPool" || op == "AveragePool") {
      int extra = 0;
      if (auto it = pads_.find(n.input(0)); it != pads_.end()) {
        if (op == "MaxPool") node_fail(n, "reads a zero Pad (a max pool pads with -inf; pad in the MaxPool itself)");
        extra = it->second;
      }
      pool(n, op == "MaxPool", extra);
    } else if (op == "Pad") {
      const auto* mode = attr(n, "mode");
      if (mode && mode->s() != "constant") node_fail(n, "pads in mode '" + mode->s() + "' (zeros only)");
      Const attr_pads;  // Pad-2: pads and value as attributes
      for (auto v : attr_ints(n, "pads")) attr_pads.v.push_back(static_cast<double>(v));
      const Const* pads = n.input_size() > 1 ? constant(n.input(1)) : attr(n, "pads") ? &attr_pads : nullptr;
      const size_t rank = b_.shape(tensor(n, 0)).volume() ? 5 : 4;
      if (!pads || pads->v.size() != 2 * rank)
        node_fail(n, "has no constant pads for " + std::to_string(rank) + " dimensions");
      if (n.input_size() > 2 && !n.input(2).empty()) {
        const Const* cv = constant(n.input(2));
        if (!cv || scalar_of(n, *cv) != 0) node_fail(n, "pads with a value other than 0");
      }
      if (attr_f(n, "value", 0) != 0) node_fail(n, "pads with a value other than 0");
      const auto& p = pads->v;  // begins of the rank axes, then their ends
      if (p[0] || p[1] || p[rank] || p[rank + 1]) node_fail(n, "pads the batch or channel axis");
      const double lo = p[2], hi = p[rank + 2];
      for (size_t i = 2; i < rank; ++i)
        if (p[i] != lo || p[rank + i] != hi)
          node_fail(n, "pads unequally (one padding on every side, or one more at every end, only)");
      if (lo < 0 || lo > (1 << 16) || hi < lo || hi > lo + 1)
        node_fail(n, "pads by " + std::to_string(lo) + " and " + std::to_string(hi) +
                         " (a crop, no real padding, or ends padded more than one step beyond the begins)");
      const auto r = readers(n.output(0));
      if (hi == 0) {
        out(tensor(n, 0));
      } else if (hi != lo) {  // F.pad(x, (0, 1) * 3) before an unpadded Conv3d: its padding='same' (even kernel)
        if (r.size() != 1 || g_.node(r[0]).op_type() != "Conv")
          node_fail(n, "pads the ends more than the begins and is read by other than one Conv (taken as its padding)");
        out(tensor(n, 0));
        skip_[r[0]] = 1;
        conv(g_.node(r[0]), static_cast<int>(lo), static_cast<int>(hi));
      } else {
        if (r.size() != 1 || (g_.node(r[0]).op_type() != "AveragePool" && g_.node(r[0]).op_type() != "Conv"))
          node_fail(n, "is read by other than one AveragePool or Conv (a zero Pad is taken as their padding)");
        pads_[n.output(0)] = static_cast<int>(lo);
        out(tensor(n, 0));
        if (g_.node(r[0]).op_type() == "Conv") {
          skip_[r[0]] = 1;
          conv(g_.node(r[0]), static_cast<int>(lo));
        }
      }
    } else if (op == "GlobalAveragePool") {
      out(call([&] { return b_.gap(tensor(n, 0)); }));
    } else if (op == "ReduceMean") {
      if (match_layernorm(k)) continue;
      if (nhwc_.count(n.input(0)))
        node_fail(n, "averages a permuted (channels-last) tensor other than in a LayerNorm over its channels");
      auto axes = attr_ints(n, "axes");
      if (n.input_size() > 1) {
        const Const* a = constant(n.input(1));
        if (!a) node_fail(n, "has axes that are not constant");
        axes.assign(a->v.begin(), a->v.end());
      }
      for (auto& a : axes)
        if (a < 0) a += 4;
      std::sort(axes.begin(), axes.end());
      if (axes != std::vector<int64_t>{2, 3}) node_fail(n, "averages over axes other than H and W (2, 3)");
      const int y = call([&] { return b_.gap(tensor(n, 0)); });
      out(attr_i(n, "keepdims", 1) ? y : call([&] { return b_.flatten(y); }));
    } else if (op == "Flatten") {
      if (attr_i(n, "axis", 1) != 1) node_fail(n, "flattens from an axis other than 1");
      out(call([&] { return b_.flatten(tensor(n, 0)); }));
    } else if (op == "Gemm") {
      if (attr_f(n, "alpha", 1) != 1 || attr_f(n, "beta", 1) != 1 || attr_i(n, "transA", 0) != 0 ||
          attr_i(n, "transB", 0) != 1)
        node_fail(n, "is not nn.Linear's form (alpha 1, beta 1, transB 1)");
      const std::string p = prefix(n, n.input(1));
      auto it = inits_.find(n.input(1));
      if (it == inits_.end() || it->second->dims_size() != 2) node_fail(n, "its weight is not a 2-D initializer");
      if (n.input_size() < 3 || n.input(2).empty()) node_fail(n, "has no bias (nn.Linear(bias=False) is not supported)");
      check_param(n, n.input(2), p + ".bias");
      out(call([&] { return b_.linear(tensor(n, 0), p, static_cast<int>(it->second->dims(0))); }));
      give(n, n.input(1));
      give(n, n.input(2));
    } else if (op == "Dropout") {
      double ratio = attr_f(n, "ratio", 0.5);
      if (n.input_size() > 1 && !n.input(1).empty()) {
        const Const* r = constant(n.input(1));
        if (!r) node_fail(n, "has a ratio that is not constant");
        ratio = scalar_of(n, *r);
      }
      if (n.input_size() > 2 && !n.input(2).empty()) {
        const Const* t = constant(n.input(2));
        if (t && scalar_of(n, *t) == 0) ratio = 0;  // exported in eval mode: the identity
      }
      if (n.output_size() > 1 && !n.output(1).empty() && !readers(n.output(1)).empty()) node_fail(n, "has its mask read");
      if (!(ratio >= 0 && ratio < 1)) node_fail(n, "has a drop ratio " + std::to_string(ratio) + " outside [0, 1)");
      out(ratio == 0 ? tensor(n, 0) : call([&] { return b_.dropout(tensor(n, 0), ratio); }));
    } else if (op == "Add") {
      if (constant(n.input(0)) || constant(n.input(1)))
        node_fail(n, std::string("adds a constant (only tensor + tensor of one shape); supported: ") + kSupported);
      out(call([&] { return b_.add(tensor(n, 0), tensor(n, 1)); }));
    } else if (op == "Mul" && ((constant(n.input(0)) && constant(n.input(0))->v.size() == 1 && !constant(n.input(1))) ||
                               (constant(n.input(1)) && constant(n.input(1))->v.size() == 1 && !constant(n.input(0))))) {
      // x times a scalar constant (CosmoFlow's output ×1.2)
      const bool first = constant(n.input(0)) != nullptr;
      const double f = constant(n.input(first ? 0 : 1))->v[0];
      if (!std::isfinite(f)) node_fail(n, "multiplies by a constant that is not a number");
      const int x = tensor(n, first ? 1 : 0);
      out(call([&] { return b_.act(x, Act::scale, static_cast<float>(f)); }));
    } else if (op == "Mul" && (inits_.count(n.input(0)) || inits_.count(n.input(1)))) {
      // x · γ with γ a C×1×1 parameter: ConvNeXt's layer scale
      const std::string g = inits_.count(n.input(0)) ? n.input(0) : n.input(1);
      const auto& t = *inits_[g];
      const int x = tensor(n, g == n.input(0) ? 1 : 0);
      if (t.dims_size() != 3 || t.dims(1) != 1 || t.dims(2) != 1 || t.dims(0) != b_.shape(x).c)
        node_fail(n, "multiplies by a parameter that is not C×1×1 (a layer scale)");
      out(call([&] { return b_.layer_scale(x, g, 0.0); }));
      give(n, g);
    } else if (op == "Mul") {
      if (constant(n.input(0)) || constant(n.input(1)))
        node_fail(n, std::string("multiplies by a constant (only x times an N x C x 1 x 1 tensor); supported: ") + kSupported);
      const int a = tensor(n, 0), c = tensor(n, 1);
      const Shape& sa = b_.shape(a);
      const Shape& sc = b_.shape(c);
      const bool a_scale = sa.h == 1 && sa.w == 1 && !sa.flat && (sc.h > 1 || sc.w > 1);
      out(call([&] { return a_scale ? b_.mul(c, a) : b_.mul(a, c); }));
    } else if (op == "Concat") {
      int64_t axis = attr_i(n, "axis", 1);
      if (axis != 1 && axis != -3) node_fail(n, "concatenates along axis " + std::to_string(axis) + " (channels only)");
      std::vector<int> xs;
      for (int i = 0; i < n.input_size(); ++i) xs.push_back(tensor(n, i));
      out(xs.size() == 1 ? xs[0] : call([&] { return b_.concat(xs); }));  // DenseNet's first layer: cat([x])
    } else {
      node_fail(n, "is not supported; cnnscale reads: " + std::string(kSupported));
    }
    if (op == "Relu" || op == "Clip" || op == "Sigmoid" || op == "HardSigmoid" || op == "HardSwish" || op == "Identity")
      view_like(n.input(0), n.output(0));
  }
  for (const auto& o : g_.output())
    if (nhwc_.count(o.name())) fail(file_, ": the output '", o.name(), "' is a permuted (channels-last) tensor");
  if (g_.output_size() != 1) fail(file_, ": the graph has ", g_.output_size(), " outputs; cnnscale trains one (the logits)");
  auto it = ids_.find(g_.output(0).name());
  if (it == ids_.end()) fail(file_, ": the output '", g_.output(0).name(), "' is not computed by the graph");
  const Shape& os = b_.shape(it->second);
  if (os.h == 1 && os.w == 1 && os.c != classes)
    fail(file_, ": the model has ", os.c, " outputs but the data set has ", classes, " classes; export it with ",
         classes, " outputs (scripts/export-onnx.py --classes ", classes, " for a torchvision model)");
  Graph graph;
  try {
    graph = b_.finish(it->second, classes);
  } catch (const UserError& e) {
    fail(file_, ": ", e.what());
  }
  std::string name = std::filesystem::path(file_).filename().string();
  std::string spec = std::filesystem::absolute(file_).lexically_normal().string();
  return {std::move(graph), name, spec};
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), d, &len, EVP_sha256(), nullptr) != 1)
    throw InternalError("SHA-256 failed in OpenSSL");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += hex[d[i] >> 4];
    s += hex[d[i] & 15];
  }
  return s;
}

}  // namespace

bool is_onnx_model(const std::string& s) { return s.size() > 5 && s.compare(s.size() - 5, 5, ".onnx") == 0; }

ModelGraph onnx_model_graph(const std::string& path, const SampleShape& input, int classes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail("--model ", path, ": no such file (an ONNX model: scripts/export-onnx.py writes one)");
  // The bytes are read once: the digest (the run's identity of the model) is of what is parsed.
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail("--model ", path, ": cannot be read (", std::strerror(errno), ")");
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) fail("--model ", path, ": cannot be read (", std::strerror(errno), ")");
    bytes = std::move(ss).str();
  }
  std::string identity = "onnx sha256:" + sha256_hex(bytes);
  onnx::ModelProto m;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) || !m.has_graph() ||
      m.graph().node_size() == 0 || m.ir_version() <= 0)
    fail("--model ", path, ": not an ONNX model, or a damaged one (protobuf could not read a graph from it); ",
         kExportHint);
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    std::string w = e.what();
    if (w.size() > 300) w = w.substr(0, 300) + "…";
    fail("--model ", path, ": not a valid ONNX model (onnx::checker: ", w, ")");
  }
  bytes.clear();
  bytes.shrink_to_fit();
  Importer imp(m, path, input);
  ModelGraph mg = imp.run(classes);
  mg.identity = std::move(identity);
  for (const auto& p : m.metadata_props())
    if (p.key() == "cnnscale.stochastic_depth_removed")
      log_info("note: " + path + " was exported with its " + p.value() +
               " stochastic-depth layers off (torch cannot export their draw; scripts/export-onnx.py): it trains "
               "without stochastic depth (the built-in efficientnet_*/convnext_* have it)");
  return mg;
}

}  // namespace cnnscale::nn
