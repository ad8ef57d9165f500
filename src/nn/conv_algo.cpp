// conv_algo.cpp — the CUDA-free half of the GPU model's convolution algorithm choice
// (conv_algo.hpp): the winner among cuDNN's candidates, the cache key, the tuning text.
#include "nn/conv_algo.hpp"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

const char* dir_token(ConvDir d) {
  switch (d) {
    case ConvDir::forward: return "fwd";
    case ConvDir::backward_data: return "bwd_data";
    case ConvDir::backward_filter: return "bwd_filter";
  }
  return "?";
}

[[noreturn]] void none_usable(size_t cap, const char* what) {
  fail("cuDNN offers no usable ", what, " algorithm for this convolution within the ", cap >> 20,
       " MiB workspace cap; lower --batch-size or change the layer's shape");
}

bool usable(const AlgoResult& r, size_t cap) { return r.ok && r.memory <= cap; }

// "name=<integer>" → the integer, or false.
bool field(const std::string& tok, const char* name, int64_t& v) {
  const std::string prefix = std::string(name) + "=";
  if (tok.compare(0, prefix.size(), prefix) != 0 || tok.size() == prefix.size()) return false;
  const std::string digits = tok.substr(prefix.size());
  for (char ch : digits)
    if (ch < '0' || ch > '9') return false;
  if (digits.size() > 12) return false;
  v = std::strtoll(digits.c_str(), nullptr, 10);
  return true;
}

const char* math_token(ConvMath m) {
  switch (m) {
    case ConvMath::fma: return "fma";
    case ConvMath::tf32: return "tf32";
    case ConvMath::bf16: return "bf16";
    case ConvMath::tf32_nhwc: return "tf32nhwc";
  }
  return "?";
}

}  // namespace

const char* conv_dir_name(ConvDir d) {
  switch (d) {
    case ConvDir::forward: return "forward";
    case ConvDir::backward_data: return "backward-data";
    case ConvDir::backward_filter: return "backward-filter";
  }
  return "?";
}

std::string ConvProblem::key() const {
  std::ostringstream os;
  os << dir_token(dir) << " n=" << n << " c=" << c << " h=" << h << " w=" << w << " k=" << k << " kernel=" << kernel
     << " pad=" << pad << " stride=" << stride << " math=" << math_token(math);
  return os.str();
}

ConvChoice pick_fastest(const std::vector<AlgoResult>& results, size_t cap, const char* what) {
  for (int pass = 0; pass < 2; ++pass) {
    const AlgoResult* best = nullptr;
    for (const AlgoResult& r : results) {
      if (!usable(r, cap) || (pass == 0 && !r.deterministic)) continue;
      if (!best || r.time_ms < best->time_ms ||
          (r.time_ms == best->time_ms &&
           (r.memory < best->memory ||
            (r.memory == best->memory &&
             (r.algo < best->algo || (r.algo == best->algo && r.math_type < best->math_type))))))
        best = &r;
    }
    if (best) return {best->algo, best->math_type};
  }
  none_usable(cap, what);
}

int choose_fastest(const std::vector<AlgoResult>& results, size_t cap, const char* what) {
  return pick_fastest(results, cap, what).algo;
}

ConvChoice pick_ranked(const std::vector<AlgoResult>& results, size_t cap, const char* what) {
  for (int pass = 0; pass < 2; ++pass)
    for (const AlgoResult& r : results)
      if (usable(r, cap) && (pass == 1 || r.deterministic)) return {r.algo, r.math_type};
  none_usable(cap, what);
}

int choose_ranked(const std::vector<AlgoResult>& results, size_t cap, const char* what) {
  return pick_ranked(results, cap, what).algo;
}

std::string format_tuning(const ConvTuning& t, const std::string& comment) {
  if (t.empty()) return {};
  std::string out;
  if (!comment.empty()) out += "# " + comment + "\n";
  for (const auto& [key, c] : t) {
    out += key + " algo=" + std::to_string(c.algo);
    if (c.math_type >= 0) out += " mathtype=" + std::to_string(c.math_type);
    out += "\n";
  }
  return out;
}

ConvTuning parse_tuning(const std::string& text) {
  ConvTuning t;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
    auto bad = [&](const std::string& why) {
      fail("convolution algorithm record, line ", number, " '", line, "': ", why,
           "; expected '<fwd|bwd_data|bwd_filter> n=N c=C h=H w=W k=K kernel=R pad=P stride=S math=<fma|tf32|tf32nhwc|bf16> "
           "algo=A [mathtype=M]' (the record comes from a checkpoint: the file is damaged or was not written by "
           "cnnscale)");
    };
    std::istringstream in(line);
    std::vector<std::string> tok;
    for (std::string s; in >> s;) tok.push_back(s);
    if (tok.size() != 11 && tok.size() != 12) bad(std::to_string(tok.size()) + " fields instead of 11 or 12");
    ConvProblem p;
    if (tok[0] == "fwd") p.dir = ConvDir::forward;
    else if (tok[0] == "bwd_data") p.dir = ConvDir::backward_data;
    else if (tok[0] == "bwd_filter") p.dir = ConvDir::backward_filter;
    else bad("unknown direction '" + tok[0] + "'");
    const char* names[] = {"n", "c", "h", "w", "k", "kernel", "pad", "stride"};
    int64_t* slots[] = {&p.n, &p.c, &p.h, &p.w, &p.k, &p.kernel, &p.pad, &p.stride};
    for (int i = 0; i < 8; ++i)
      if (!field(tok[1 + i], names[i], *slots[i])) bad("field " + std::to_string(2 + i) + " is not " + names[i] + "=<integer>");
    if (tok[9] == "math=fma") p.math = ConvMath::fma;
    else if (tok[9] == "math=tf32") p.math = ConvMath::tf32;
    else if (tok[9] == "math=bf16") p.math = ConvMath::bf16;
    else if (tok[9] == "math=tf32nhwc") p.math = ConvMath::tf32_nhwc;
    else bad("field 10 is not math=fma, math=tf32, math=tf32nhwc or math=bf16");
    int64_t algo = 0;
    if (!field(tok[10], "algo", algo) || algo > 1000) bad("field 11 is not algo=<id>");
    int64_t math_type = -1;
    if (tok.size() == 12 && (!field(tok[11], "mathtype", math_type) || math_type > 3))
      bad("field 12 is not mathtype=<0..3>");
    const std::string key = p.key();
    if (t.count(key)) bad("a second record of the same convolution");
    t[key] = ConvChoice(static_cast<int>(algo), static_cast<int>(math_type));
  }
  return t;
}

}  // namespace cnnscale::nn
