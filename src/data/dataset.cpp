// dataset.cpp — load_dataset(): dataset.json parsing and its check against the shards.
#include "data/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <map>
#include <tuple>

#include "data/h5util.hpp"
#include "data/shard_digest.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"
#include "util/json_bounded.hpp"
#include <iterator>

namespace cnnscale {
namespace fs = std::filesystem;
using nlohmann::json;

int SplitInfo::shard_of(int64_t index) const {
  auto it = std::upper_bound(shards.begin(), shards.end(), index,
                             [](int64_t i, const ShardInfo& s) { return i < s.first_index; });
  return static_cast<int>(it - shards.begin()) - 1;
}

std::string shard_file_name(const std::string& split, int index, int count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05d-of-%05d.h5", index, count);
  return split + buf;
}

namespace {

const char* kRerun = "re-create it with `cnnscale prep`";

template <typename T>
T get_field(const json& j, const char* key, const std::string& json_path) {
  if (!j.is_object() || !j.contains(key))
    fail(json_path, " has no field '", key, "'; it was not written by this version of cnnscale prep (", kRerun, ")");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    fail(json_path, ": field '", key, "' has the wrong type (", j.at(key).dump(), "); ", kRerun);
  }
}

// A dataset HDF5 would read past its buffers (h5util.hpp: h5_layout_problem) is refused
// before anything reads it.
void check_layout(const ShardInfo& sh, const char* name, hid_t ds, bool each_chunk = true) {
  if (const std::string p = h5_layout_problem(ds, each_chunk); !p.empty())
    fail("shard ", sh.path, ": ", name, " is damaged: ", p, "; copy the file again or ", kRerun);
}

// A ragged shard: /images is 1-D, /offsets (N+1) and /shapes (N×3) describe the samples
// back to back; appends them to split.offsets / split.shapes.
// Leaves the shard's own /offsets and /shapes in off / shp (for its digest).
void check_ragged_shard(const DatasetInfo& info, SplitInfo& split, const ShardInfo& sh, const std::string& json_path,
                        hid_t f, hid_t space, std::vector<int64_t>& off, std::vector<int32_t>& shp) {
  hsize_t dims[8] = {0};
  if (H5Sget_simple_extent_ndims(space) != 1)
    fail("shard ", sh.path, ": /images is not 1-D as a ragged data set's (", json_path, " says sample_layout ",
         "ragged); ", kRerun);
  H5Sget_simple_extent_dims(space, dims, nullptr);
  const int64_t bytes = static_cast<int64_t>(dims[0]);
  off.resize(static_cast<size_t>(sh.samples + 1));
  shp.resize(static_cast<size_t>(3 * sh.samples));
  for (auto [name, rank, want, buf, type] :
       {std::tuple{"/offsets", 1, sh.samples + 1, static_cast<void*>(off.data()), H5T_NATIVE_INT64},
        std::tuple{"/shapes", 2, sh.samples, static_cast<void*>(shp.data()), H5T_NATIVE_INT32}}) {
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) fail("shard ", sh.path, " has no ", name, " dataset (", h5_error_cause(), "); ", kRerun);
    H5Id ds = h5_dataset(d);
    H5Id sp = h5_space(H5Dget_space(ds));
    hsize_t dd[8] = {0};
    if (H5Sget_simple_extent_ndims(sp) != rank ||
        (H5Sget_simple_extent_dims(sp, dd, nullptr), static_cast<int64_t>(dd[0]) != want || (rank == 2 && dd[1] != 3)))
      fail("shard ", sh.path, ": ", name, " does not describe the ", sh.samples, " samples ", json_path, " lists; ",
           kRerun);
    check_layout(sh, name, ds);
    if (H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
      fail("shard ", sh.path, ": reading ", name, " failed (", h5_error_cause(), "): the file is damaged; ", kRerun);
  }
  for (int64_t i = 0; i < sh.samples; ++i) {
    const SampleShape s{shp[3 * i], shp[3 * i + 1], shp[3 * i + 2]};
    const int64_t len = off[i + 1] - off[i];
    if (s.channels != info.shape.channels || s.height < 1 || s.width < 1 || s.height > info.max_side ||
        s.width > info.max_side || off[i] < 0 || (info.jpeg ? len < 1 : len != s.numel()))
      fail("shard ", sh.path, ": sample ", i, " has shape ", s.channels, "x", s.height, "x", s.width, " and bytes [",
           off[i], ", ", off[i + 1], "), which do not fit ", info.shape.channels, " channels, max side ", info.max_side,
           " and back-to-back storage; ", kRerun);
    split.offsets.push_back(off[i]);
    split.shapes.push_back(s);
    split.lengths.push_back(len);
  }
  if (off[0] != 0 || off[static_cast<size_t>(sh.samples)] != bytes)
    fail("shard ", sh.path, ": /offsets cover bytes [", off[0], ", ", off[static_cast<size_t>(sh.samples)],
         ") but /images holds ", bytes, "; ", kRerun);
}

// Opens /images and /labels of one shard and checks them against dataset.json;
// appends the labels to split.labels. Returns the shard's digest as found in the file.
std::string check_shard(const DatasetInfo& info, SplitInfo& split, const ShardInfo& sh, const std::string& json_path) {
  if (!fs::exists(sh.path))
    fail("shard ", sh.path, " listed in ", json_path, " does not exist; copy the whole directory again or ", kRerun);
  std::string cause;
  H5Id f = h5_open_readonly(sh.path, cause);
  if (!f.valid())
    fail("shard ", sh.path, " cannot be opened as HDF5 (", cause, "): the file is truncated or damaged; ",
         "copy it again or ", kRerun);
  hid_t d = H5Dopen2(f, "/images", H5P_DEFAULT);
  if (d < 0) fail("shard ", sh.path, " has no /images dataset (", h5_error_cause(), "); ", kRerun);
  H5Id images = h5_dataset(d);
  H5Id space = h5_space(H5Dget_space(images));
  hsize_t dims[8] = {0};
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<int64_t> off;
  std::vector<int32_t> shp;
  if (info.ragged) {
    check_ragged_shard(info, split, sh, json_path, f, space, off, shp);
  } else if (rank != (info.shape.volume() ? 5 : 4)) {
    fail("shard ", sh.path, ": /images has ", rank, " dimensions, expected ",
         info.shape.volume() ? "5 (N×C×D×H×W)" : "4 (N×C×H×W)", "; ", kRerun);
  }
  H5Sget_simple_extent_dims(space, dims, nullptr);
  if (!info.ragged && static_cast<int64_t>(dims[0]) != sh.samples)
    fail("shard ", sh.path, " holds ", dims[0], " images but ", json_path, " says ", sh.samples,
         "; the directory mixes files of different prep runs — ", kRerun);
  if (!info.ragged) {
    hsize_t want[5] = {0};
    h5_image_dims(info.shape, dims[0], want);
    std::string got = std::to_string(dims[1]);
    bool same = true;
    for (int i = 1; i < rank; ++i) {
      same = same && dims[i] == want[i];
      if (i > 1) got.append("x").append(std::to_string(dims[i]));
    }
    if (!same)
      fail("shard ", sh.path, ": /images samples are ", got, " but ", json_path, " says ", info.shape.text(), "; ",
           kRerun);
  }
  H5Id type = h5_type(H5Dget_type(images));
  const bool is_float = H5Tget_class(type) == H5T_FLOAT, is_int = H5Tget_class(type) == H5T_INTEGER;
  const size_t bytes = H5Tget_size(type);
  bool type_ok = false;
  switch (info.dtype) {
    case SampleType::u8: type_ok = is_int && bytes == 1 && H5Tget_sign(type) == H5T_SGN_NONE; break;
    case SampleType::i16: type_ok = is_int && bytes == 2 && H5Tget_sign(type) == H5T_SGN_2; break;
    case SampleType::f16: type_ok = is_float && bytes == 2; break;
    case SampleType::f32: type_ok = is_float && bytes == 4; break;
  }
  if (!type_ok || H5Tget_order(type) != H5T_ORDER_LE)
    fail("shard ", sh.path, ": /images is not ", sample_type_name(info.dtype), " as ", json_path, " says; ", kRerun);
  check_layout(sh, "/images", images, /*each_chunk=*/false);  // shard_digest() sizes each chunk

  if (info.task == TaskKind::regression || info.task == TaskKind::multilabel) {
    d = H5Dopen2(f, "/targets", H5P_DEFAULT);
    if (d < 0) fail("shard ", sh.path, " has no /targets dataset (", h5_error_cause(), "); ", kRerun);
    H5Id targets = h5_dataset(d);
    H5Id tspace = h5_space(H5Dget_space(targets));
    hsize_t tdims[8] = {0};
    if (H5Sget_simple_extent_ndims(tspace) != 2) fail("shard ", sh.path, ": /targets is not N×K; ", kRerun);
    H5Sget_simple_extent_dims(tspace, tdims, nullptr);
    if (static_cast<int64_t>(tdims[0]) != sh.samples || static_cast<int>(tdims[1]) != info.targets)
      fail("shard ", sh.path, " holds ", tdims[0], "x", tdims[1], " targets but ", json_path, " says ", sh.samples,
           " samples of ", info.targets, "; ", kRerun);
    check_layout(sh, "/targets", targets);
    const size_t at = split.targets.size(), count = static_cast<size_t>(sh.samples) * static_cast<size_t>(info.targets);
    split.targets.resize(at + count);
    if (count > 0 &&
        H5Dread(targets, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, split.targets.data() + at) < 0)
      fail("shard ", sh.path, ": reading /targets failed (", h5_error_cause(), "): the file is damaged; copy it again ",
           "or ", kRerun);
    for (size_t i = 0; i < count; ++i) {
      const float t = split.targets[at + i];
      if (!std::isfinite(t) || (info.task == TaskKind::multilabel && t != 0.f && t != 1.f))
        fail("shard ", sh.path, ": target ", i % static_cast<size_t>(info.targets), " of sample ",
             i / static_cast<size_t>(info.targets), " is ", t, ", not ",
             info.task == TaskKind::multilabel ? "0 or 1 as a multilabel data set's" : "finite",
             "; fix the source data and ", kRerun);
    }
    return shard_digest(sh.path, images, sh.samples, nullptr, nullptr, nullptr, split.targets.data() + at,
                        info.targets);
  }

  d = H5Dopen2(f, "/labels", H5P_DEFAULT);
  if (d < 0) fail("shard ", sh.path, " has no /labels dataset (", h5_error_cause(), "); ", kRerun);
  H5Id labels = h5_dataset(d);
  H5Id lspace = h5_space(H5Dget_space(labels));
  hsize_t ldims[8] = {0}, want[4] = {0};
  // Segmentation: a label map of the samples' H×W (volumes: D×H×W) each (/labels N×H×W,
  // N×D×H×W).
  const bool maps = info.task == TaskKind::segmentation;
  const int lrank = maps ? h5_label_map_dims(info.shape, 0, want) : 1;
  const char* map_dims = lrank == 4 ? "N×D×H×W" : "N×H×W";
  if (H5Sget_simple_extent_ndims(lspace) != lrank)
    fail("shard ", sh.path, ": /labels is not ",
         maps ? std::string(map_dims) + " (label maps, as " + json_path + " says)" : std::string("one-dimensional"), "; ",
         kRerun);
  H5Sget_simple_extent_dims(lspace, ldims, nullptr);
  if (static_cast<int64_t>(ldims[0]) != sh.samples)
    fail("shard ", sh.path, " holds ", ldims[0], " labels but ", json_path, " says ", sh.samples, " samples; ", kRerun);
  if (maps && !std::equal(want + 1, want + lrank, ldims + 1)) {
    std::string got;
    for (int i = 1; i < lrank; ++i) got.append(i > 1 ? "x" : "").append(std::to_string(ldims[i]));
    fail("shard ", sh.path, ": its label maps are ", got, " but ", json_path, " says samples of ", info.shape.text(),
         "; ", kRerun);
  }
  H5Id ltype = h5_type(H5Dget_type(labels));
  if (H5Tget_class(ltype) != H5T_INTEGER) fail("shard ", sh.path, ": /labels is not an integer dataset; ", kRerun);
  // Label maps stay in the shard (the readers read each batch's, and check their range); the
  // digest covers them by their chunks' checksums, as the images.
  check_layout(sh, "/labels", labels, /*each_chunk=*/!maps);  // maps: shard_digest() sizes each chunk
  if (maps) return shard_digest(sh.path, images, sh.samples, nullptr, nullptr, nullptr, nullptr, 0, labels);
  const size_t at = split.labels.size(), count = static_cast<size_t>(sh.samples);
  split.labels.resize(at + count);
  if (sh.samples > 0 && H5Dread(labels, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, split.labels.data() + at) < 0)
    fail("shard ", sh.path, ": reading /labels failed (", h5_error_cause(), "): the file is damaged; copy it again or ",
         kRerun);
  for (int64_t i = 0; i < sh.samples; ++i) {
    const int32_t l = split.labels[at + i];
    if (l < 0 || l >= info.classes)
      fail("shard ", sh.path, ": label ", l, " of sample ", i, " (global index ", sh.first_index + i,
           ") is outside [0, ", info.classes, ") declared by ", json_path,
           "; fix the labels of the source data (or its classes) and ", kRerun);
  }
  return shard_digest(sh.path, images, sh.samples, split.labels.data() + at, info.ragged ? off.data() : nullptr,
                      info.ragged ? shp.data() : nullptr);
}

SplitInfo parse_split(const DatasetInfo& info, const json& splits, const std::string& name,
                      const std::string& json_path, bool required) {
  SplitInfo s;
  s.name = name;
  if (!splits.contains(name)) {
    if (required) fail(json_path, " has no '", name, "' split; ", kRerun);
    return s;
  }
  const std::string where = json_path + " splits." + name;
  const json& js = splits.at(name);
  s.samples = get_field<int64_t>(js, "samples", where);
  const json shards = get_field<json>(js, "shards", where);
  if (!shards.is_array()) fail(where, ".shards is not a list; ", kRerun);
  int64_t next = 0;
  for (const auto& jsh : shards) {
    ShardInfo sh;
    sh.file = get_field<std::string>(jsh, "file", where + ".shards[]");
    if (sh.file.empty() || sh.file.find('/') != std::string::npos)
      fail(where, ": shard file name '", sh.file, "' is not a plain file name; ", kRerun);
    sh.path = info.dir + "/" + sh.file;
    sh.samples = get_field<int64_t>(jsh, "samples", where + ".shards[]");
    sh.first_index = jsh.contains("first_index") ? get_field<int64_t>(jsh, "first_index", where) : next;
    if (jsh.contains("digest")) {
      sh.digest = get_field<std::string>(jsh, "digest", where + ".shards[]");
      if (sh.digest.rfind("sha256:", 0) != 0 || sh.digest.size() != 7 + 64)
        fail(where, ": shard ", sh.file, " has digest '", sh.digest.substr(0, 80),
             "', which is not \"sha256:\" and 64 hex digits as prep writes it; ", kRerun);
    }
    if (sh.samples < 0 || sh.first_index != next)
      fail(where, ": shard ", sh.file, " has samples ", sh.samples, " and first_index ", sh.first_index,
           ", which do not follow the previous shards (expected first_index ", next, "); ", kRerun);
    next += sh.samples;
    s.shards.push_back(sh);
  }
  if (next != s.samples)
    fail(json_path, ": split '", name, "' says ", s.samples, " samples but its shards add up to ", next, "; ", kRerun);
  if (required && s.samples == 0)
    fail("split '", name, "' of ", info.dir, " is empty (", json_path, " lists 0 samples); nothing to train on — ",
         kRerun, " from a non-empty input");
  return s;
}

}  // namespace

DatasetInfo load_dataset(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) fail("no data directory given (--data DIR); make one with `cnnscale prep`");
  if (!fs::exists(dir))
    fail("data directory ", dir, " does not exist; make it with `cnnscale prep --output ", dir, "`");
  if (!fs::is_directory(dir)) fail("data path ", dir, " is not a directory; pass the directory `cnnscale prep` wrote");
  const std::string json_path = dir + "/dataset.json";
  std::ifstream in(json_path);
  if (!in)
    fail(json_path, " does not exist: ", dir, " is not a finished `cnnscale prep` output (an interrupted prep ",
         "leaves only a .tmp directory); run `cnnscale prep --output ", dir, "`");
  json j;
  try {
    j = parse_json(std::string(std::istreambuf_iterator<char>(in), {}));
  } catch (const json::exception& e) {
    fail(json_path, " is not valid JSON (", e.what(), "); ", kRerun);
  }
  DatasetInfo info;
  info.dir = dir;
  if (get_field<std::string>(j, "format", json_path) != kDatasetFormat)
    fail(json_path, ": 'format' is not \"", kDatasetFormat, "\"; ", kRerun);
  const int version = get_field<int>(j, "version", json_path);
  if (version != kDatasetVersion)
    fail(json_path, " has version ", version, "; this cnnscale reads version ", kDatasetVersion, "; ", kRerun);
  const auto shape = get_field<std::vector<int>>(j, "sample_shape", json_path);
  if ((shape.size() != 3 && shape.size() != 4) || *std::min_element(shape.begin(), shape.end()) < 1)
    fail(json_path, ": sample_shape must be [C, H, W] or a volume's [C, D, H, W] with positive sizes; ", kRerun);
  info.shape = shape.size() == 3 ? SampleShape{shape[0], shape[1], shape[2]}
                                 : SampleShape{shape[0], shape[2], shape[3], shape[1]};
  if (info.shape.numel() > (int64_t{1} << 34))
    fail(json_path, ": sample_shape ", info.shape.text(), " is more than 2^34 values per sample; ", kRerun);
  const std::string dtype = get_field<std::string>(j, "dtype", json_path);
  if (!parse_sample_type(dtype, &info.dtype))
    fail(json_path, ": dtype '", dtype, "' is not one cnnscale reads (uint8, int16, float16, float32); ", kRerun);
  const std::string task = j.value("task", std::string("classification"));
  if (!parse_task(task, &info.task))
    fail(json_path, ": task '", task, "' is not one cnnscale reads (classification, regression, multilabel, ",
         "segmentation); ", kRerun);
  info.transform = j.value("transform", std::string("none"));
  if (info.transform != "none" && info.transform != "log1p")
    fail(json_path, ": transform '", info.transform, "' is not none or log1p; ", kRerun);
  if (info.task == TaskKind::segmentation && ((j.contains("sample_layout") && j["sample_layout"] != "fixed") || j.contains("targets")))
    fail(json_path, ": a segmentation data set has fixed-size samples and label maps, not ",
         j.contains("targets") ? "targets" : "a ragged layout", "; ", kRerun);
  if (info.task == TaskKind::regression || info.task == TaskKind::multilabel) {
    info.targets = get_field<int>(j, "targets", json_path);
    if (info.targets < 1) fail(json_path, ": targets must be at least 1; ", kRerun);
  } else {
    info.classes = get_field<int>(j, "classes", json_path);
    if (info.classes < 1) fail(json_path, ": classes must be at least 1; ", kRerun);
  }
  if (info.dtype != SampleType::u8 && j.contains("sample_layout") && j["sample_layout"] != "fixed")
    fail(json_path, ": a ", dtype, " data set has a fixed sample layout only; ", kRerun);
  if (j.contains("class_names")) {
    info.class_names = get_field<std::vector<std::string>>(j, "class_names", json_path);
    if (static_cast<int>(info.class_names.size()) != info.classes)
      fail(json_path, ": class_names lists ", info.class_names.size(), " names but classes is ", info.classes, "; ",
           kRerun);
  }
  const json norm = get_field<json>(j, "normalization", json_path);
  info.mean = get_field<std::vector<double>>(norm, "mean", json_path + " normalization");
  info.std = get_field<std::vector<double>>(norm, "std", json_path + " normalization");
  if (info.mean.size() != static_cast<size_t>(info.shape.channels) || info.std.size() != info.mean.size())
    fail(json_path, ": normalization mean/std need one value per channel (", info.shape.channels, "); ", kRerun);
  // Pixels are normalised as (x/255 − mean) / std: a mean outside [0, 1] or a std outside
  // [0.001, 1] (values beyond ±1000) is no data set's, and used to reach training as a
  // NaN loss that blamed --lr (issue 48 item 12).
  for (size_t c = 0; c < info.mean.size(); ++c) {
    const double m = info.mean[c], s = info.std[c];
    if (info.dtype != SampleType::u8) {  // the values' own units: finite, a positive std
      if (!std::isfinite(m) || !std::isfinite(s) || !(s > 0))
        fail(json_path, ": normalization.mean/std[", c, "] are ", m, " and ", s, "; a finite mean and a positive, ",
             "finite std are needed; ", kRerun);
      continue;
    }
    if (!(m >= 0 && m <= 1))
      fail(json_path, ": normalization.mean[", c, "] is ", m, ", but pixels are normalised as x/255 in [0, 1], so a ",
           "mean must be in [0, 1]; ", kRerun);
    if (!(s > 0)) fail(json_path, ": normalization std must be positive (constant images?); ", kRerun);
    if (!(s >= 1e-3 && s <= 1))
      fail(json_path, ": normalization.std[", c, "] is ", s, ", but a std of pixels x/255 in [0, 1] must be in ",
           "[0.001, 1] (outside it the normalised values pass ±1000 or mean nothing); ", kRerun);
  }
  const std::string layout = j.value("sample_layout", std::string("fixed"));
  if (layout == "ragged" || layout == "jpeg") {
    info.ragged = true;
    info.jpeg = layout == "jpeg";
    info.max_side = get_field<int>(j, "max_side", json_path);
    if (info.max_side < 1 || info.shape.height != info.max_side || info.shape.width != info.max_side)
      fail(json_path, ": a ragged data set needs max_side >= 1 and sample_shape [C, max_side, max_side]; ", kRerun);
  } else if (layout != "fixed") {
    fail(json_path, ": sample_layout '", layout, "' is not fixed, ragged or jpeg; ", kRerun);
  }
  if (info.shape.volume() && info.ragged)
    fail(json_path, ": a volume data set (sample_shape ", info.shape.text(), ") has fixed-size samples; ", kRerun);

  info.chunk_samples = j.value("chunk_samples", int64_t{0});
  info.compression = j.value("compression", std::string("none"));
  const json splits = get_field<json>(j, "splits", json_path);
  info.train = parse_split(info, splits, "train", json_path, true);
  info.test = parse_split(info, splits, "test", json_path, false);

  // One file listed twice (by name, or through a link or a hard link to another listed
  // file) would be read as two shards' samples: refused by name (issue 48 item 6).
  std::map<std::pair<dev_t, ino_t>, std::string> seen;
  for (const auto* split : {&info.train, &info.test})
    for (const auto& sh : split->shards) {
      struct stat st{};
      if (::stat(sh.path.c_str(), &st) != 0) continue;  // check_shard names a missing shard
      const std::string where = split->name + " shard " + sh.file;
      const auto [it, fresh] = seen.emplace(std::pair{st.st_dev, st.st_ino}, where);
      if (!fresh)
        fail(json_path, " lists one file twice: ", it->second, " and ", where,
             it->second.substr(it->second.find(" shard ") + 7) == sh.file ? "" : " are the same file (a link)",
             "; every shard must be a file of its own — ", kRerun);
    }

  Hdf5Lock lock(hdf5_mutex());
  h5_quiet();
  for (auto* split : {&info.train, &info.test}) {
    if (info.task == TaskKind::classification) split->labels.reserve(static_cast<size_t>(split->samples));
    else split->targets.reserve(static_cast<size_t>(split->samples) * static_cast<size_t>(info.targets));
    for (auto& sh : split->shards) {
      const std::string found = check_shard(info, *split, sh, json_path);
      if (sh.digest.empty()) {
        ++info.unbound_shards;
        sh.digest = found;
      } else if (found != sh.digest) {
        std::string copy_of;  // the listed shard whose recorded digest it has, if any
        for (const auto* other : {&info.train, &info.test})
          for (const auto& o : other->shards)
            if (o.digest == found && copy_of.empty()) copy_of = other->name + " shard " + o.file;
        fail("shard ", sh.path, " is not the shard ", json_path, " lists: its digest is ", found.substr(0, 23),
             "… but dataset.json records ", sh.digest.substr(0, 23), "… (",
             copy_of.empty() ? "a file of another prep run or another data set was put in its place"
                             : "it is a copy of " + copy_of,
             "); copy the whole directory again from where it was made, or ", kRerun);
      }
    }
  }
  return info;
}

const char* sample_type_name(SampleType t) {
  switch (t) {
    case SampleType::u8: return "uint8";
    case SampleType::i16: return "int16";
    case SampleType::f16: return "float16";
    case SampleType::f32: return "float32";
  }
  return "?";
}

bool parse_sample_type(const std::string& s, SampleType* out) {
  for (SampleType t : {SampleType::u8, SampleType::i16, SampleType::f16, SampleType::f32})
    if (s == sample_type_name(t)) return *out = t, true;
  return false;
}

int sample_type_bytes(SampleType t) {
  switch (t) {
    case SampleType::u8: return 1;
    case SampleType::i16:
    case SampleType::f16: return 2;
    case SampleType::f32: return 4;
  }
  return 1;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant · 2^-24, exact in float
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  uint32_t bits = sign | (exp == 31 ? (0xffu << 23) | (mant << 13) : ((exp + 112u) << 23) | (mant << 13));
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::string unbound_warning(const DatasetInfo& info) {
  if (info.unbound_shards == 0) return "";
  return info.dir + "/dataset.json records no digest for " + std::to_string(info.unbound_shards) +
         " shard(s) (an older cnnscale prep's data set): a shard file swapped in goes undetected; re-run " +
         "`cnnscale prep` to bind the shards to their data set";
}

}  // namespace cnnscale
