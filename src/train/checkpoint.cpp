// checkpoint.cpp — see checkpoint.hpp.
#include "train/checkpoint.hpp"
#include "train/run_dir.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "data/h5util.hpp"
#include "nn/conv_algo.hpp"
#include "nn/host_params.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/finite.hpp"
#include "util/hdf5_lock.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace cnnscale {
namespace {

constexpr int kFormat = 1;

// HDF5 prints its error stack by default; we report errors ourselves.
struct QuietHdf5 {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, func, data); }
};

// Closes an HDF5 handle of any kind when it goes out of scope.
struct H5Handle {
  hid_t id = -1;
  explicit H5Handle(hid_t i) : id(i) {}
  ~H5Handle() {
    if (id >= 0) H5Idec_ref(id);
  }
  operator hid_t() const { return id; }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
};

void write_attr_i64(hid_t obj, const char* name, int64_t v) {
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle a(H5Acreate2(obj, name, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT));
  if (a < 0 || H5Awrite(a, H5T_NATIVE_INT64, &v) < 0) throw std::runtime_error(std::string("attribute ") + name);
}

void write_attr_str(hid_t obj, const char* name, const std::string& v) {
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type, v.size() + 1);
  H5Handle a(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (a < 0 || H5Awrite(a, type, v.c_str()) < 0) throw std::runtime_error(std::string("attribute ") + name);
}

bool read_attr_i64(hid_t obj, const char* name, int64_t& v) {
  if (H5Aexists(obj, name) <= 0) return false;
  H5Handle a(H5Aopen(obj, name, H5P_DEFAULT));
  return a >= 0 && H5Aread(a, H5T_NATIVE_INT64, &v) >= 0;
}

bool read_attr_str(hid_t obj, const char* name, std::string& v) {
  if (H5Aexists(obj, name) <= 0) return false;
  H5Handle a(H5Aopen(obj, name, H5P_DEFAULT));
  H5Handle type(H5Aget_type(a));
  const size_t n = H5Tget_size(type);
  std::string buf(n, '\0');
  H5Handle mem(H5Tcopy(H5T_C_S1));
  H5Tset_size(mem, n);
  if (H5Aread(a, mem, buf.data()) < 0) return false;
  v = std::string(buf.c_str());
  return true;
}

void write_dataset(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, const float* data) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  if (dims.empty()) dims.push_back(1);
  H5Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(dcpl, static_cast<int>(dims.size()), dims.data());
  H5Pset_fletcher32(dcpl);
  H5Handle d(H5Dcreate2(parent, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  if (d < 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw std::runtime_error("dataset " + name);
}

// The model's flat parameters on the host: where they are for a host model (no copy),
// else copied into `host`.
const float* params_on_host(Model& model, std::vector<float>& host) {
  if (!model.on_device()) return model.param_data();
  host.resize(model.param_count());
  copy_params_to_host(model, host.data());
  return host.data();
}

// Empty when p[0..n) is finite, else "NAME: a NaN and b Inf of its n values (the
// first at element i)". One vectorised scan; counting only when something is found.
std::string describe_non_finite(const std::string& name, const float* p, size_t n) {
  if (all_finite_f32(p, n)) return {};
  size_t nans = 0, infs = 0, first = n;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(p[i])) continue;
    (std::isnan(p[i]) ? nans : infs) += 1;
    first = std::min(first, i);
  }
  return name + ": " + std::to_string(nans) + " NaN and " + std::to_string(infs) + " Inf of its " +
         std::to_string(n) + " values (the first at element " + std::to_string(first) + ")";
}

// The first non-finite tensor of a checkpoint image: params (host) and optimiser state.
std::string first_non_finite(const std::vector<ParamInfo>& infos, const float* params,
                             const std::vector<std::pair<std::string, const std::vector<float>*>>& state) {
  for (const auto& info : infos)
    if (auto w = describe_non_finite("/model/" + info.name, params + info.offset, info.numel); !w.empty()) return w;
  for (const auto& [sname, buf] : state)
    for (const auto& info : infos)
      if (info.trainable)
        if (auto w = describe_non_finite("/optimizer/" + sname + "/" + info.name, buf->data() + info.offset, info.numel);
            !w.empty())
          return w;
  return {};
}

// What is wrong with one dataset of a checkpoint: nothing (empty text), damage, a shape
// the configured model does not have, or a NaN/±Inf value.
struct DatasetProblem {
  std::string text;
  bool mismatch = false;
  bool non_finite = false;
};

// Reads a float dataset that must have exactly `shape`.
DatasetProblem read_dataset(hid_t parent, const std::string& name, const std::vector<int64_t>& shape, float* out) {
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) <= 0) return {"has no dataset '" + name + "'"};
  H5Handle d(H5Dopen2(parent, name.c_str(), H5P_DEFAULT));
  if (d < 0) return {"cannot open dataset '" + name + "'"};
  H5Handle space(H5Dget_space(d));
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::vector<int64_t> want = shape.empty() ? std::vector<int64_t>{1} : shape;
  bool same = dims.size() == want.size();
  for (size_t i = 0; same && i < dims.size(); ++i) same = static_cast<int64_t>(dims[i]) == want[i];
  if (!same) {
    std::string got, exp;
    auto join = [](std::string& out, long long x) {
      if (!out.empty()) out.push_back('x');
      out.append(std::to_string(x));
    };
    for (auto x : dims) join(got, static_cast<long long>(x));
    for (auto x : want) join(exp, static_cast<long long>(x));
    return {"parameter '" + name + "' has shape " + got + " but the configured model needs " + exp, true};
  }
  // A layout libhdf5 would read past its buffers for (data/h5util.hpp) is damage too.
  if (const std::string p = h5_layout_problem(d); !p.empty())
    return {"dataset '" + name + "' cannot be read (damaged file: " + p + ")"};
  if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    return {"dataset '" + name + "' fails its checksum or cannot be read (damaged file)"};
  size_t n = 1;
  for (auto x : want) n *= static_cast<size_t>(x);
  if (auto w = describe_non_finite(name, out, n); !w.empty()) return {w, false, true};
  return {};
}

// Throws what `p` says about dataset `where` of checkpoint `path`, if anything.
void throw_if(const DatasetProblem& p, const std::string& path, const std::string& where) {
  if (p.text.empty()) return;
  if (p.non_finite)
    throw CheckpointNonFinite("checkpoint '" + path + "' is not finite: " + where + "/" + p.text +
                              "; refusing to resume from it (nothing was loaded or changed). The run that wrote "
                              "it had diverged, or the file was edited: resume from an earlier checkpoint with "
                              "--resume PATH (and a lower --lr), or start over with --resume none");
  const std::string what = "checkpoint '" + path + "': " + where + " " + p.text;
  if (p.mismatch) throw CheckpointMismatch(what);
  throw UserError(what);
}

// "step-<digits>.h5" → its step.
bool parse_checkpoint_step(const std::string& name, int64_t& step) {
  if (name.size() < 9 || name.rfind("step-", 0) != 0 || name.substr(name.size() - 3) != ".h5") return false;
  const std::string digits = name.substr(5, name.size() - 8);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  step = std::stoll(digits);
  return true;
}

// The root attributes of an open checkpoint.
CheckpointMeta read_meta(hid_t f, const std::string& path) {
  CheckpointMeta m;
  int64_t format = 0, epoch = 0, world = 0, seed = 0;
  if (!read_attr_i64(f, "format", format) || !read_attr_i64(f, "step", m.step) || !read_attr_i64(f, "epoch", epoch) ||
      !read_attr_i64(f, "step_in_epoch", m.step_in_epoch) || !read_attr_i64(f, "world_size", world) ||
      !read_attr_i64(f, "global_batch", m.global_batch) || !read_attr_i64(f, "seed", seed) ||
      !read_attr_i64(f, "optimizer_steps", m.optimizer_steps) || !read_attr_str(f, "model", m.model) ||
      !read_attr_str(f, "model_spec", m.model_spec) || !read_attr_str(f, "optimizer", m.optimizer))
    fail("checkpoint '", path, "' lacks its attributes (not a cnnscale checkpoint, or damaged)");
  read_attr_str(f, "config_digest", m.config_digest);
  read_attr_str(f, "config", m.config);
  read_attr_i64(f, "input_channels", m.input_channels);  // optional (export)
  read_attr_i64(f, "input_height", m.input_height);
  read_attr_i64(f, "input_width", m.input_width);
  read_attr_i64(f, "input_depth", m.input_depth);
  read_attr_i64(f, "classes", m.classes);
  if (read_attr_str(f, "tuning", m.tuning)) {  // optional; a malformed one is damage
    try {
      nn::parse_tuning(m.tuning);
    } catch (const UserError& e) {
      fail("checkpoint '", path, "' has a damaged 'tuning' attribute: ", e.what());
    }
  }
  if (format != kFormat) fail("checkpoint '", path, "' has format ", format, "; this cnnscale reads format ", kFormat);
  // The position, each against the others (issue 48 item 13: a step of -3 gave a NaN
  // message that blamed divergence, 2^62 "nothing to train", a world size of 0 resumed).
  // A run writes 0 <= optimizer_steps <= step, 0 <= step_in_epoch <= step, 0 <= epoch <=
  // step + 1, world_size >= 1, global_batch >= 0 (0: a checkpoint written outside training,
  // as tests' init ones); the bounds above those are far beyond
  // any run (10^12 steps, 2^24 ranks, 2^40 samples a step).
  const auto check = [&](const char* name, int64_t v, int64_t lo, int64_t hi, const std::string& why) {
    if (v < lo || v > hi)
      fail("checkpoint '", path, "' has attribute ", name, " = ", v, ", which no run writes (", why,
           "): the file was edited or damaged; resume from another checkpoint with --resume PATH, or start over "
           "with --resume none");
  };
  constexpr int64_t kMaxSteps = 1'000'000'000'000;
  check("step", m.step, 0, kMaxSteps, "0 to 10^12");
  check("optimizer_steps", m.optimizer_steps, 0, m.step, "0 to step, " + std::to_string(m.step));
  check("step_in_epoch", m.step_in_epoch, 0, m.step, "0 to step, " + std::to_string(m.step));
  check("epoch", epoch, 0, m.step + 1, "0 to step + 1, " + std::to_string(m.step + 1));
  check("world_size", world, 1, int64_t{1} << 24, "1 to 2^24");
  check("global_batch", m.global_batch, 0, int64_t{1} << 40, "0 (not recorded) to 2^40");
  m.epoch = static_cast<int>(epoch);
  m.world_size = static_cast<int>(world);
  m.seed = static_cast<uint64_t>(seed);
  return m;
}

}  // namespace

std::string non_finite_tensor(Model& model, Optimizer& opt) {
  std::vector<float> host;
  return first_non_finite(model.params(), params_on_host(model, host), opt.state_view());
}

std::string checkpoint_file_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld.h5", static_cast<long long>(step));
  return buf;
}

std::string digest_of(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string write_checkpoint(const std::string& dir, Model& model, Optimizer& opt, const CheckpointMeta& meta,
                             int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create checkpoint directory '", dir, "': ", ec.message(), "; choose a writable --run-dir");
  const std::string name = checkpoint_file_name(meta.step);
  const std::string final_path = dir + "/" + name;
  // The file is built in memory (HDF5 core driver, no backing store) and written with
  // our own tmp + fsync + rename: a full disk or an unwritable directory is then a
  // plain write error, never a half-closed HDF5 file.
  // A device model's parameters come to the host first; a host model's are written
  // from where they are (no copy: the checkpoint's peak memory is the file image).
  std::vector<float> host;
  const float* params = params_on_host(model, host);
  // A NaN or ±Inf is never checkpointed (issue 39 item 1): one scan of what is written,
  // a few ms for ResNet-50's 25.6M parameters and their momentum (docs/performance.md).
  const auto state = opt.state_view();
  if (const std::string where = first_non_finite(model.params(), params, state); !where.empty())
    throw CheckpointNonFinite("not writing checkpoint '" + final_path + "': " + where + " after step " +
                              std::to_string(meta.step) +
                              "; the previous checkpoint is untouched. The run diverged: resume from the last "
                              "checkpoint with a lower --lr");
  std::vector<char> image;
  {
    Hdf5Lock lock(hdf5_mutex());  // the data reader thread uses HDF5 concurrently
    QuietHdf5 quiet;
    H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
    H5Pset_fapl_core(fapl, 4 << 20, /*backing_store=*/0);
    H5Handle f(H5Fcreate(final_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
    if (f < 0) fail("cannot build checkpoint '", final_path, "' in memory (HDF5 core driver)");
    try {
      H5Handle g(H5Gcreate2(f, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      for (const auto& info : model.params()) write_dataset(g, info.name, info.shape, params + info.offset);
      H5Handle og(H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      for (const auto& [sname, buf] : state) {
        H5Handle sg(H5Gcreate2(og, sname.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        for (const auto& info : model.params())
          if (info.trainable) write_dataset(sg, info.name, info.shape, buf->data() + info.offset);
      }
      write_attr_i64(f, "format", kFormat);
      write_attr_i64(f, "step", meta.step);
      write_attr_i64(f, "epoch", meta.epoch);
      write_attr_i64(f, "step_in_epoch", meta.step_in_epoch);
      write_attr_i64(f, "world_size", meta.world_size);
      write_attr_i64(f, "global_batch", meta.global_batch);
      write_attr_i64(f, "seed", static_cast<int64_t>(meta.seed));
      write_attr_i64(f, "optimizer_steps", meta.optimizer_steps);
      write_attr_str(f, "model", meta.model);
      write_attr_str(f, "model_spec", meta.model_spec);
      write_attr_str(f, "optimizer", meta.optimizer);
      write_attr_str(f, "config_digest", meta.config_digest);
      if (!meta.config.empty()) write_attr_str(f, "config", meta.config);
      if (!meta.tuning.empty()) write_attr_str(f, "tuning", meta.tuning);
      if (meta.classes > 0) {
        write_attr_i64(f, "input_channels", meta.input_channels);
        write_attr_i64(f, "input_height", meta.input_height);
        write_attr_i64(f, "input_width", meta.input_width);
        if (meta.input_depth > 0) write_attr_i64(f, "input_depth", meta.input_depth);
        write_attr_i64(f, "classes", meta.classes);
      }
      if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) throw std::runtime_error("flush");
      const ssize_t size = H5Fget_file_image(f, nullptr, 0);
      if (size <= 0) throw std::runtime_error("file image");
      image.resize(static_cast<size_t>(size));
      if (H5Fget_file_image(f, image.data(), image.size()) != size) throw std::runtime_error("file image");
    } catch (const std::exception& e) {
      fail("cannot build checkpoint '", final_path, "' in memory (", e.what(), ")");
    }
  }
  try {
    write_file_atomic(final_path, image.data(), image.size());
  } catch (const UserError& e) {
    fail(e.what(), "; the disk is full or the directory is not writable, and the previous checkpoint is untouched");
  }
  write_file_atomic(dir + "/latest", name + "\n");
  // Keep the newest `keep` by step (parsed: names sort wrongly past 8 digits) among the
  // files up to this step; this one is the newest of those, so it is always kept.
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    int64_t s = -1;
    if (parse_checkpoint_step(n, s) && s <= meta.step) steps.emplace_back(s, n);
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < steps.size(); ++i)
    if (steps[i].first != meta.step) fs::remove(dir + "/" + steps[i].second, ec);
  return final_path;
}

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  Hdf5Lock lock(hdf5_mutex());
  QuietHdf5 quiet;
  if (!fs::exists(path)) fail("checkpoint '", path, "' does not exist");
  H5Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (f < 0) fail("checkpoint '", path, "' is not a readable HDF5 file (truncated or damaged)");
  return read_meta(f, path);
}

CheckpointMeta read_checkpoint(const std::string& path, Model& model, Optimizer& opt) {
  Hdf5Lock lock(hdf5_mutex());
  QuietHdf5 quiet;
  if (!fs::exists(path)) fail("checkpoint '", path, "' does not exist");
  H5Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (f < 0) fail("checkpoint '", path, "' is not a readable HDF5 file (truncated or damaged)");
  CheckpointMeta m = read_meta(f, path);
  // An ONNX model is the same by content (its identity, recorded in the config), wherever
  // the file now lies; the others by spec.
  const RunConfig recorded = RunConfig::parse(m.config);
  const std::string* recorded_identity = recorded.get("model");
  if (model.identity() != model.spec() && recorded_identity && recorded_identity->rfind("onnx ", 0) == 0) {
    if (*recorded_identity != model.identity())
      throw CheckpointMismatch("checkpoint '" + path + "' was trained from another version of " + model.name() +
                               ": the run's file had " + recorded_identity->substr(5) + ", " + model.spec() +
                               " has " + model.identity().substr(5) + " (its content changed since " + m.model_spec +
                               " was read); give --model the run's file, or --resume none to start over");
  } else if (m.model_spec != model.spec())
    throw CheckpointMismatch("checkpoint '" + path + "' holds model '" + m.model + "' (" + m.model_spec +
                             ") but the configured model is '" + model.name() + "' (" + model.spec() +
                             "); use the same --model, or --resume none to start over");
  if (m.optimizer != opt.kind())
    throw CheckpointMismatch("checkpoint '" + path + "' was written with --optimizer " + m.optimizer +
                             " but this run uses " + opt.kind() +
                             "; use the same --optimizer, or --resume none to start over");
  // Read into scratch first: a damaged file must not leave the model half-loaded.
  std::vector<float> params(model.param_count());
  H5Handle g(H5Gopen2(f, "model", H5P_DEFAULT));
  if (g < 0) fail("checkpoint '", path, "' has no /model group");
  for (const auto& info : model.params())
    throw_if(read_dataset(g, info.name, info.shape, params.data() + info.offset), path, "/model");
  // A variance is never negative: one that is came from an edited or damaged file, and
  // would be carried into every later checkpoint (issue 48 item 8).
  for (const auto& info : model.params()) {
    const std::string suffix = "running_var";
    if (info.name.size() < suffix.size() || info.name.compare(info.name.size() - suffix.size(), suffix.size(), suffix))
      continue;
    const float* v = params.data() + info.offset;
    for (size_t i = 0; i < info.numel; ++i)
      if (v[i] < 0.f) {
        std::ostringstream msg;
        msg << "checkpoint '" << path << "' holds a negative batch-norm running variance: /model/" << info.name
            << "[" << i << "] is " << v[i]
            << " (the file was edited or damaged); refusing to resume from it (nothing was loaded or changed): "
               "resume from an earlier checkpoint with --resume PATH, or start over with --resume none";
        throw CheckpointNonFinite(msg.str());  // refused as a NaN is: not damage to fall back past
      }
  }
  auto state = opt.state();
  std::vector<std::vector<float>> states(state.size(), std::vector<float>(model.param_count(), 0.f));
  for (size_t s = 0; s < state.size(); ++s) {
    const std::string group = "optimizer/" + state[s].first;
    if (H5Lexists(f, "optimizer", H5P_DEFAULT) <= 0 || H5Lexists(f, group.c_str(), H5P_DEFAULT) <= 0)
      fail("checkpoint '", path, "' has no /", group, " (written by another optimizer?)");
    H5Handle sg(H5Gopen2(f, group.c_str(), H5P_DEFAULT));
    for (const auto& info : model.params()) {
      if (!info.trainable) continue;
      throw_if(read_dataset(sg, info.name, info.shape, states[s].data() + info.offset), path, "/" + group);
    }
  }
  copy_params_from_host(model, params.data());
  for (size_t s = 0; s < state.size(); ++s) *state[s].second = std::move(states[s]);
  opt.set_steps_taken(m.optimizer_steps);
  return m;
}

std::vector<std::string> checkpoint_candidates(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  // `latest` holds one short line, "step-N.h5". At most 64 bytes are read (a huge file
  // costs nothing), and anything but a step-N.h5 name is ignored with a warning: the
  // step-N.h5 files below decide then (issue 48 item 9: a 300-byte name ended the run with
  // an internal error, a 64 MiB file was read whole).
  if (std::ifstream latest(dir + "/latest", std::ios::binary); latest) {
    char buf[65] = {};
    latest.read(buf, 64);
    const std::string text(buf, static_cast<size_t>(latest.gcount()));
    const std::string name = text.substr(0, text.find('\n'));
    int64_t step = -1;
    if (parse_checkpoint_step(name, step) && (text.size() < 64 || text.find('\n') != std::string::npos)) {
      if (fs::exists(dir + "/" + name, ec)) out.push_back(dir + "/" + name);
    } else if (!text.empty()) {
      log_warn(dir + "/latest does not hold a checkpoint name (step-N.h5); ignoring it "
               "and resuming from the newest step-N.h5 in that folder");
    }
  }
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    int64_t s = -1;
    if (parse_checkpoint_step(n, s)) steps.emplace_back(s, n);
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [s, n] : steps)
    if (std::find(out.begin(), out.end(), dir + "/" + n) == out.end()) out.push_back(dir + "/" + n);
  return out;
}

}  // namespace cnnscale
