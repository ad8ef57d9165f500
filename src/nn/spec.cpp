// spec.cpp — parser and printer of the one-line model spec (grammar in spec.hpp).
#include "nn/spec.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

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

  std::vector<LayerSpec> layers(bool nested) {
    std::vector<LayerSpec> out;
    for (;;) {
      skip_ws();
      if (i >= s.size()) {
        if (nested) error(s.size(), 1, "missing ')' closing res(");
        break;
      }
      if (s[i] == ')') {
        if (nested) break;
        error(i, 1, "unexpected ')'");
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
        L.body = layers(true);
        if (L.body.empty()) error(b, name.size(), "res body is empty");
        ++i;  // ')'
        out.push_back(std::move(L));
        continue;
      }
      std::vector<Arg> a;
      if (has_args) a = args();
      auto nargs = [&](size_t lo, size_t hi, const char* usage) {
        if (a.size() < lo || a.size() > hi) error(b, i - b, std::string("expected ") + usage);
      };
      if (name == "conv") {
        nargs(2, 5, "conv(out, kernel[, stride[, pad[, groups]]])");
        L.kind = LayerKind::conv;
        L.out = as_int(a[0], "out channels", 1);
        L.kernel = as_int(a[1], "kernel size", 1);
        if (a.size() > 2) L.stride = as_int(a[2], "stride", 1);
        if (a.size() > 3) L.pad = as_int(a[3], "padding", 0);
        if (a.size() > 4) L.groups = as_int(a[4], "groups", 1);
      } else if (name == "maxpool" || name == "avgpool") {
        nargs(1, 3, (name + "(kernel[, stride[, pad]])").c_str());
        L.kind = name == "maxpool" ? LayerKind::maxpool : LayerKind::avgpool;
        L.kernel = as_int(a[0], "kernel size", 1);
        L.stride = a.size() > 1 ? as_int(a[1], "stride", 1) : L.kernel;
        if (a.size() > 2) L.pad = as_int(a[2], "padding", 0);
      } else if (name == "dropout") {
        nargs(1, 1, "dropout(p) with 0 <= p < 1");
        L.kind = LayerKind::dropout;
        L.p = a[0].value;
        if (!(L.p >= 0 && L.p < 1)) error(a[0].pos, a[0].len, "dropout probability must be in [0, 1)");
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
      } else if (name == "relu6" || name == "sigmoid" || name == "silu" || name == "hardswish" || name == "gelu") {
        no_args(LayerKind::act);
        L.act = name;
      } else {
        error(b, name.size(),
              "unknown layer '" + name +
                  "' (layers: conv relu relu6 sigmoid silu hardswish gelu se maxpool avgpool gap dropout flatten linear bn res; "
                  "built-in models: mnist_cnn lenet5 resnet20 resnet18 resnet34 resnet50 resnet101 resnet152 mobilenet_v2)");
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
  auto out = p.layers(false);
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
        if (L.stride != L.kernel || L.pad != 0) os << ',' << L.stride;
        if (L.pad != 0) os << ',' << L.pad;
        os << ')';
        break;
      case LayerKind::dropout: os << "dropout(" << fmt_num(L.p) << ')'; break;
      case LayerKind::linear: os << "linear(" << L.out << ')'; break;
      case LayerKind::relu: os << "relu"; break;
      case LayerKind::act: os << L.act; break;
      case LayerKind::se: os << "se(" << L.out << ')'; break;
      case LayerKind::gap: os << "gap"; break;
      case LayerKind::flatten: os << "flatten"; break;
      case LayerKind::bn: os << "bn"; break;
      case LayerKind::res: os << "res(" << format_spec(L.body) << ')'; break;
    }
  }
  return os.str();
}

}  // namespace cnnscale::nn
