// spec.cpp — parser and printer of the one-line model spec (grammar in spec.hpp).
#include "nn/spec.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "nn/model.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {

void spec_error(const std::string& text, size_t pos, size_t len, const std::string& what) {
  if (pos > text.size()) pos = text.size();
  if (len == 0) len = 1;
  fail("bad model spec at column ", pos + 1, ": ", what, "\n  ", text, "\n  ", std::string(pos, ' '),
       std::string(len, '^'));
}

namespace {

struct Parser {
  const std::string& s;
  size_t i = 0;

  void skip_ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  [[noreturn]] void error(size_t pos, size_t len, const std::string& what) { spec_error(s, pos, len, what); }

  std::string word() {
    size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    return s.substr(b, i - b);
  }

  struct Arg {
    double value;
    size_t pos, len;
  };

  std::vector<Arg> args() {  // after '(' ... ')'
    std::vector<Arg> out;
    ++i;  // '('
    skip_ws();
    if (i < s.size() && s[i] == ')') {
      ++i;
      return out;
    }
    for (;;) {
      skip_ws();
      size_t b = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == '-' ||
                              s[i] == '+'))
        ++i;
      std::string tok = s.substr(b, i - b);
      if (tok.empty()) error(b, 1, i < s.size() ? "expected a number" : "expected a number, found the end");
      char* end = nullptr;
      double v = std::strtod(tok.c_str(), &end);
      if (end != tok.c_str() + tok.size() || !std::isfinite(v)) error(b, tok.size(), "'" + tok + "' is not a number");
      out.push_back({v, b, tok.size()});
      skip_ws();
      if (i < s.size() && s[i] == ',') {
        ++i;
        continue;
      }
      if (i < s.size() && s[i] == ')') {
        ++i;
        return out;
      }
      error(i, 1, i < s.size() ? "expected ',' or ')'" : "missing ')'");
    }
  }

  // Every size is capped at 1e8 (layers hold sizes as int); the message states the cap.
  static constexpr double kMaxArg = 1e8;
  int as_int(const Arg& a, const char* what, int min) {
    if (a.value != std::floor(a.value) || a.value < min || a.value > kMaxArg)
      error(a.pos, a.len,
            std::string(what) + " must be an integer from " + std::to_string(min) + " to 100000000 (the spec's limit)");
    return static_cast<int>(a.value);
  }

  // `in`: the construct whose body this is ("" at the top, "res", "cat"): it ends at ')'
  // and, in a cat, at '|' (the next branch).
  std::vector<LayerSpec> layers(const std::string& in) {
    std::vector<LayerSpec> out;
    for (;;) {
      skip_ws();
      if (i >= s.size()) {
        if (!in.empty()) error(s.size(), 1, "missing ')' closing " + in + "(");
        break;
      }
      if (s[i] == ')') {
        if (!in.empty()) break;
        error(i, 1, "unexpected ')'");
      }
      if (s[i] == '|') {
        if (in == "cat") break;
        error(i, 1, "'|' separates the branches of cat( | ) only");
      }
      size_t b = i;
      std::string name = word();
      if (name.empty()) error(b, 1, std::string("unexpected character '") + s[i] + "'");
      LayerSpec L;
      L.pos = b;
      L.len = name.size();
      const bool has_args = i < s.size() && s[i] == '(';
      const size_t paren = i;
      auto no_args = [&](LayerKind k) {
        if (has_args) error(paren, i - paren, name + " takes no arguments");
        L.kind = k;
      };
      if (name == "res") {
        if (!has_args) error(b, name.size(), "res needs a body: res(layers...)");
        ++i;
        L.kind = LayerKind::res;
        L.body = layers("res");
        if (L.body.empty()) error(b, name.size(), "res body is empty");
        ++i;  // ')'
        out.push_back(std::move(L));
        continue;
      }
      if (name == "cat") {
        if (!has_args) error(b, name.size(), "cat needs branches: cat(layers... | layers...)");
        ++i;
        L.kind = LayerKind::cat;
        for (;;) {
          L.branches.push_back(layers("cat"));
          if (s[i] == ')') break;
          ++i;  // '|'
        }
        ++i;  // ')'
        L.len = i - b;
        if (L.branches.size() < 2)
          error(b, L.len, "cat needs at least two branches separated by '|' (an empty branch is the input itself)");
        int empty = 0;
        for (const auto& br : L.branches) empty += br.empty();
        if (empty > 1) error(b, L.len, "cat has more than one empty branch (the input would be concatenated with itself)");
        out.push_back(std::move(L));
        continue;
      }
      std::vector<Arg> a;
      if (has_args) a = args();
      auto nargs = [&](size_t lo, size_t hi, const char* usage) {
        if (a.size() < lo || a.size() > hi) error(b, i - b, std::string("expected ") + usage);
      };
      if (name == "conv" || name == "deconv") {  // deconv: the same arguments but groups
        if (name == "conv") nargs(2, 5, "conv(out, kernel[, stride[, pad[, groups]]])");
        else nargs(2, 4, "deconv(out, kernel[, stride[, pad]])");
        L.kind = name == "conv" ? LayerKind::conv : LayerKind::deconv;
        L.out = as_int(a[0], "out channels", 1);
        L.kernel = as_int(a[1], "kernel size", 1);
        if (a.size() > 2) L.stride = as_int(a[2], "stride", 1);
        if (a.size() > 3) L.pad = as_int(a[3], "padding", 0);
        if (a.size() > 4) L.groups = as_int(a[4], "groups", 1);
      } else if (name == "upsample" || name == "bilinear") {
        if (name == "upsample") nargs(1, 1, "upsample(scale): nearest");
        else nargs(1, 2, "bilinear(scale[, align_corners 0|1])");
        L.kind = LayerKind::upsample;
        L.act = name;
        L.stride = as_int(a[0], "scale factor", 1);
        if (a.size() > 1) {
          if (a[1].value != 0 && a[1].value != 1) error(a[1].pos, a[1].len, "align_corners must be 0 or 1");
          L.ceil_mode = a[1].value == 1;
        }
      } else if (name == "maxpool" || name == "avgpool") {
        if (name == "maxpool") nargs(1, 4, "maxpool(kernel[, stride[, pad[, ceil_mode 0|1]]])");
        else nargs(1, 3, "avgpool(kernel[, stride[, pad]])");
        L.kind = name == "maxpool" ? LayerKind::maxpool : LayerKind::avgpool;
        L.kernel = as_int(a[0], "kernel size", 1);
        L.stride = a.size() > 1 ? as_int(a[1], "stride", 1) : L.kernel;
        if (a.size() > 2) L.pad = as_int(a[2], "padding", 0);
        if (a.size() > 3) {
          if (a[3].value != 0 && a[3].value != 1) error(a[3].pos, a[3].len, "ceil_mode must be 0 or 1");
          L.ceil_mode = a[3].value == 1;
        }
      } else if (name == "dropout") {
        nargs(1, 1, "dropout(p) with 0 <= p < 1");
        L.kind = LayerKind::dropout;
        L.p = a[0].value;
        if (!(L.p >= 0 && L.p < 1)) error(a[0].pos, a[0].len, "dropout probability must be in [0, 1)");
      } else if (name == "slice") {
        nargs(2, 2, "slice(begin, end): the channels [begin, end)");
        L.kind = LayerKind::slice;
        L.kernel = as_int(a[0], "first channel", 0);
        L.out = as_int(a[1], "end channel", 1);
      } else if (name == "adaptivepool") {
        nargs(2, 2, "adaptivepool(out height, out width)");
        L.kind = LayerKind::adaptivepool;
        L.kernel = as_int(a[0], "out height", 1);
        L.out = as_int(a[1], "out width", 1);
      } else if (name == "shuffle") {
        nargs(1, 1, "shuffle(groups)");
        L.kind = LayerKind::shuffle;
        L.groups = as_int(a[0], "groups", 1);
      } else if (name == "stochastic_depth") {
        nargs(1, 1, "stochastic_depth(p) with 0 <= p <= 1");
        L.kind = LayerKind::sdepth;
        L.p = a[0].value;
        if (!(L.p >= 0 && L.p <= 1)) error(a[0].pos, a[0].len, "stochastic depth probability must be in [0, 1]");
      } else if (name == "se") {
        nargs(1, 1, "se(squeeze channels)");
        L.kind = LayerKind::se;
        L.out = as_int(a[0], "squeeze channels", 1);
      } else if (name == "linear") {
        nargs(1, 1, "linear(out)");
        L.kind = LayerKind::linear;
        L.out = as_int(a[0], "out features", 1);
      } else if (name == "relu") {
        no_args(LayerKind::relu);
      } else if (name == "gap") {
        no_args(LayerKind::gap);
      } else if (name == "flatten") {
        no_args(LayerKind::flatten);
      } else if (name == "bn") {
        no_args(LayerKind::bn);
      } else if (name == "layernorm") {
        no_args(LayerKind::layernorm);
      } else if (name == "layerscale") {
        nargs(1, 1, "layerscale(initial value)");
        L.kind = LayerKind::layerscale;
        L.p = a[0].value;
      } else if (name == "relu6" || name == "sigmoid" || name == "silu" || name == "hardswish" || name == "gelu" ||
                 name == "hardsigmoid" || name == "tanh") {
        no_args(LayerKind::act);
        L.act = name;
      } else if (name == "leaky_relu") {
        nargs(0, 1, "leaky_relu[(negative slope)]");
        L.kind = LayerKind::act;
        L.act = name;
        L.p = a.empty() ? 0.01 : a[0].value;
        if (!a.empty() && !std::isfinite(L.p)) error(a[0].pos, a[0].len, "the negative slope must be a number");
      } else if (name == "scale") {
        nargs(1, 1, "scale(factor): x times a constant");
        L.kind = LayerKind::act;
        L.act = name;
        L.p = a[0].value;
      } else {
        error(b, name.size(),
              "unknown layer '" + name +
                  "' (layers: conv deconv upsample bilinear relu relu6 sigmoid silu hardswish gelu hardsigmoid leaky_relu tanh scale se maxpool avgpool gap dropout "
                  "stochastic_depth flatten linear bn layernorm layerscale slice shuffle adaptivepool res cat; "
                  "built-in models: " + builtin_model_list(" ") + ")");
      }
      out.push_back(std::move(L));
    }
    return out;
  }
};

std::string fmt_num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

std::vector<LayerSpec> parse_spec(const std::string& text) {
  Parser p{text};
  auto out = p.layers("");
  if (out.empty()) spec_error(text, 0, 1, "empty model spec");
  return out;
}

std::string format_spec(const std::vector<LayerSpec>& layers) {
  std::ostringstream os;  // (ostream, not operator+: GCC 12 warns falsely on "lit" + string&&)
  bool first = true;
  for (const auto& L : layers) {
    if (!first) os << ' ';
    first = false;
    switch (L.kind) {
      case LayerKind::conv:
        os << "conv(" << L.out << ',' << L.kernel;
        if (L.stride != 1 || L.pad != 0 || L.groups != 1) os << ',' << L.stride;
        if (L.pad != 0 || L.groups != 1) os << ',' << L.pad;
        if (L.groups != 1) os << ',' << L.groups;
        os << ')';
        break;
      case LayerKind::maxpool:
      case LayerKind::avgpool:
        os << (L.kind == LayerKind::maxpool ? "maxpool(" : "avgpool(") << L.kernel;
        if (L.stride != L.kernel || L.pad != 0 || L.ceil_mode) os << ',' << L.stride;
        if (L.pad != 0 || L.ceil_mode) os << ',' << L.pad;
        if (L.ceil_mode) os << ",1";
        os << ')';
        break;
      case LayerKind::dropout: os << "dropout(" << fmt_num(L.p) << ')'; break;
      case LayerKind::sdepth: os << "stochastic_depth(" << fmt_num(L.p) << ')'; break;
      case LayerKind::linear: os << "linear(" << L.out << ')'; break;
      case LayerKind::upsample:
        os << L.act << '(' << L.stride << (L.ceil_mode ? ",1" : "") << ')';
        break;
      case LayerKind::deconv:
        os << "deconv(" << L.out << ',' << L.kernel;
        if (L.stride != 1 || L.pad != 0) os << ',' << L.stride;
        if (L.pad != 0) os << ',' << L.pad;
        os << ')';
        break;
      case LayerKind::relu: os << "relu"; break;
      case LayerKind::act:
        os << L.act;
        if (L.act == "leaky_relu" && L.p != 0.01) os << '(' << fmt_num(L.p) << ')';
        if (L.act == "scale") os << '(' << fmt_num(L.p) << ')';
        break;
      case LayerKind::se: os << "se(" << L.out << ')'; break;
      case LayerKind::gap: os << "gap"; break;
      case LayerKind::flatten: os << "flatten"; break;
      case LayerKind::bn: os << "bn"; break;
      case LayerKind::layernorm: os << "layernorm"; break;
      case LayerKind::slice: os << "slice(" << L.kernel << ',' << L.out << ')'; break;
      case LayerKind::shuffle: os << "shuffle(" << L.groups << ')'; break;
      case LayerKind::adaptivepool: os << "adaptivepool(" << L.kernel << ',' << L.out << ')'; break;
      case LayerKind::layerscale: os << "layerscale(" << fmt_num(L.p) << ')'; break;
      case LayerKind::res: os << "res(" << format_spec(L.body) << ')'; break;
      case LayerKind::cat:
        os << "cat(";
        for (size_t k = 0; k < L.branches.size(); ++k) {
          if (k) os << (L.branches[k - 1].empty() ? "| " : " | ");
          os << format_spec(L.branches[k]);
        }
        os << ')';
        break;
    }
  }
  return os.str();
}

}  // namespace cnnscale::nn
