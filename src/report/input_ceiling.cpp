// input_ceiling.cpp — see input_ceiling.hpp.
#include "report/input_ceiling.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "report/format.hpp"
#include "report/json_file.hpp"
#include "report/plausible.hpp"
#include "util/error.hpp"

namespace cnnscale::report {

DataBench load_data_bench(const std::string& path) {
  const char* expected = "; expected the output of `cnnscale data-bench --json FILE`";
  nlohmann::json j =
      read_json_file(path, "cannot read --data-bench file '" + path + "': no such file or not readable", expected);
  if (!j.is_object() || j.value("tool", "") != "cnnscale data-bench")
    fail(path, ": not a data-bench result (its 'tool' is not \"cnnscale data-bench\")", expected);
  DataBench b;
  b.file = path;
  for (auto [name, dst] : {std::pair{"images_per_s", &b.images_per_s}, {"images_per_cpu_s", &b.images_per_cpu_s}}) {
    if (!j.contains(name) || !j[name].is_number() || !(j[name].get<double>() > 0))
      fail(path, ": required field '", name, "' is missing or not a positive number", expected);
    *dst = j[name].get<double>();
    check_measured(path, name, *dst, kMaxImagesPerS, "images/s");
  }
  for (auto [name, dst] : {std::pair{"world_size", &b.world_size}, {"data_threads", &b.data_threads}}) {
    if (!j.contains(name) || !j[name].is_number_integer() || j[name].get<int64_t>() < 1 ||
        j[name].get<int64_t>() > 10'000'000)
      fail(path, ": required field '", name, "' is missing or not a positive integer (at most 10000000)", expected);
    *dst = j[name].get<int>();
  }
  // Optional fields; one of the wrong type is named (not a library's type error).
  auto count = [&](const char* name, int def) {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 10'000'000)
      fail(path, ": field '", name, "' must be a positive integer, got ", it->dump(), expected);
    return it->get<int>();
  };
  auto text = [&](const char* name, const std::string& def) {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_string()) fail(path, ": field '", name, "' must be a string, got ", it->dump(), expected);
    return it->get<std::string>();
  };
  b.nodes = count("nodes", 1);
  b.ranks_per_node = count("ranks_per_node", b.world_size);
  b.data = text("data", "");
  b.augment = text("augment", "none");
  b.cache = text("cache", "none");
  return b;
}

namespace {

// "" or the first run whose input differs from what data-bench measured, and how.
std::string input_mismatch(const DataBench& b, const std::vector<RunRecord>& runs) {
  auto same_path = [](const std::string& x, const std::string& y) {
    std::error_code e1, e2;
    const auto a = std::filesystem::weakly_canonical(x, e1), c = std::filesystem::weakly_canonical(y, e2);
    return e1 || e2 ? x == y : a == c;
  };
  for (const auto& r : runs) {
    std::string diff;
    if (!r.data.empty() && !same_path(r.data, b.data)) diff += " read " + r.data + " (data-bench: " + b.data + ")";
    if (!r.augment.empty() && r.augment != b.augment)
      diff +=
          std::string(diff.empty() ? "" : ",") + " used --augment " + r.augment + " (data-bench: " + b.augment + ")";
    if (r.data_threads && *r.data_threads != b.data_threads)
      diff += std::string(diff.empty() ? "" : ",") + " used --data-threads " + std::to_string(*r.data_threads) +
              " (data-bench: " + std::to_string(b.data_threads) + ")";
    if (!diff.empty()) return "The run in " + r.dir + diff + ": the reader's rate below is another configuration's. ";
  }
  return "";
}

}  // namespace

std::optional<std::string> input_ceiling_note(const DataBench& b, const std::vector<ScalingRow>& rows,
                                              const std::vector<Projection>& projections,
                                              const std::vector<RunRecord>& runs) {
  if (rows.empty()) return std::nullopt;
  const double ceiling = b.per_rank();
  const ScalingRow* top = &rows.front();  // the row consuming the most per rank
  for (const auto& r : rows)
    if (r.images_per_s / r.ranks > top->images_per_s / top->ranks) top = &r;
  const double need = top->images_per_s / top->ranks;
  std::string s = input_mismatch(b, runs) + "Input (" + b.file + ": `cnnscale data-bench` on " +
                  (b.data.empty() ? "?" : b.data) + ", --augment " + b.augment + ", --data-threads " +
                  std::to_string(b.data_threads) + ", --cache " + b.cache + ", " + std::to_string(b.ranks_per_node) +
                  " rank(s) per node): the reader delivers " + fmt_num(ceiling, 4) +
                  " images/s per rank. These runs consume up to " + fmt_num(need, 4) + " per rank (at " +
                  std::to_string(top->ranks) + " ranks): ";
  s += need <= ceiling ? fmt_num(ceiling / need, 3) + "× headroom."
                       : "more than data-bench measured — it ran another configuration, or the node was busier then.";
  std::string bound;
  for (const auto& p : projections) {
    if (!p.projected || !p.feasible || p.ranks < 1 || !(p.images_per_s / p.ranks > ceiling)) continue;
    bound += (bound.empty() ? "" : ", ") + std::to_string(p.ranks) + " (" + fmt_num(p.images_per_s / p.ranks, 4) + ")";
  }
  if (!bound.empty())
    s += " The projections at " + bound +
         " ranks (images/s per rank) need more than the reader delivers: there the input, not the network, sets "
         "the speed, so the projected throughput is out of reach until the reader is faster (more --data-threads: "
         "run data-bench with them; --cache memory; smaller stored images).";
  const double cores = need / b.images_per_cpu_s;
  s += " At data-bench's " + fmt_num(b.images_per_cpu_s, 4) + " images per CPU-second, " + fmt_num(need, 4) +
       " images/s per rank take " + fmt_num(cores, 3) + " core(s) per rank for input alone.";
  return s;
}

}  // namespace cnnscale::report
