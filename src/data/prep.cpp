// prep.cpp — run_prep(): opens the input (IDX, HDF5, CIFAR binary, image folder), shards the train (and test) split,
// computes the per-channel mean/std of the train split and writes dataset.json, all in a temporary directory that is
// renamed onto the output at the end.
#include "data/prep.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "data/dataset.hpp"
#include "data/prep_cifar.hpp"
#include "data/prep_imagefolder.hpp"
#include "data/prep_input.hpp"
#include "data/shard_writer.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/process.hpp"
#include "util/stop_signal.hpp"
#include "util/utf8.hpp"

namespace cnnscale {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void fsync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

struct ChannelStats {
  std::vector<uint64_t> sum, sumsq;  // uint8 pixels, exactly
  std::vector<double> fsum, fsumsq;  // other types: of the (transformed) values, per sample in double
  uint64_t per_channel = 0;          // pixels per channel seen
};

// Sample i's values (int16/float16/float32 as bytes, `numel` of them) as float32, through the
// transform: what the reader's Normalizer computes before (x − mean) / std.
void science_values(const uint8_t* src, SampleType t, int64_t numel, bool log1p, std::vector<float>& out) {
  out.resize(static_cast<size_t>(numel));
  for (int64_t k = 0; k < numel; ++k) {
    float v;
    if (t == SampleType::i16) {
      int16_t x;
      std::memcpy(&x, src + 2 * k, 2);
      v = x;
    } else if (t == SampleType::f16) {
      uint16_t x;
      std::memcpy(&x, src + 2 * k, 2);
      v = half_to_float(x);
    } else {
      std::memcpy(&v, src + 4 * k, 4);
    }
    out[static_cast<size_t>(k)] = log1p ? std::log1p(v) : v;
  }
}

// stop(doing): throws PrepStopped (run_prep's); called when a stop signal has arrived.
using StopFn = std::function<void(const std::string&)>;

// Writes one split as `shards` shard files into dir; returns the split's json entry.
json write_split(SampleStream& in, const std::string& split, int shards, const std::string& dir,
                 const ShardWriteOptions& wopts, int classes, ChannelStats* stats, const PrepOptions& o,
                 const StopFn& stop) {
  const int64_t n = in.samples();
  const SampleShape shape = in.shape();
  if (n == 0) fail("the ", split, " input ", in.describe(), " holds no samples; nothing to convert");
  if (shards < 1) fail("--", split == "train" ? "shards" : "test-shards", " must be at least 1");
  if (shards > n)
    fail("--", split == "train" ? "shards" : "test-shards", " ", shards, " is more than the ", n, " ", split,
         " samples; use at most ", n, " shards");
  const auto& labels = in.labels();
  const int K = in.target_count();
  const SampleType dtype = in.dtype();
  const bool log1p = o.transform == "log1p";
  const int64_t per = in.label_pixels();  // labels per sample: 1, or H·W (label maps)
  for (int64_t i = 0; i < static_cast<int64_t>(labels.size()); ++i)
    if (labels[i] >= classes)
      fail(in.describe(), ": label ", labels[i], " of ", split, " sample ", i / per,
           per > 1 ? " (pixel " + std::to_string(i % per) + ")" : std::string(), " is not below --classes ", classes,
           "; raise --classes or fix the labels");
  const int64_t px = shape.numel();
  if (stats) {
    stats->sum.assign(shape.channels, 0);
    stats->sumsq.assign(shape.channels, 0);
    stats->fsum.assign(shape.channels, 0.0);
    stats->fsumsq.assign(shape.channels, 0.0);
  }
  const int64_t sample_bytes = px * sample_type_bytes(dtype);
  std::vector<float> values;
  json list = json::array();
  const int64_t block = std::max<int64_t>(1, (8 << 20) / sample_bytes);  // ~8 MiB per read (ragged: at most)
  std::vector<uint8_t> buf, pixels;
  std::vector<SampleShape> shapes;
  std::vector<int64_t> lengths;
  const bool ragged = in.ragged(), encoded = in.encoded();
  int64_t done = 0, next_report = n / 10;
  const bool chatty = n >= 10000;
  for (int s = 0; s < shards; ++s) {
    const int64_t first = n * s / shards, last = n * (s + 1) / shards, count = last - first;
    const std::string file = shard_file_name(split, s, shards);
    ShardWriteOptions so = wopts;
    so.ragged = ragged;
    so.encoded = encoded;
    so.dtype = dtype;
    so.targets = K;
    so.label_maps = per > 1;
    ShardWriter w(dir + "/" + file, count, shape, so);
    for (int64_t at = first; at < last; at += block) {
      if (stop_signal_received())
        stop("while writing " + split + " shard " + std::to_string(s + 1) + " of " + std::to_string(shards) + " (" +
             std::to_string(done) + " of " + std::to_string(n) + " " + split + " samples written)");
      const int64_t m = std::min(block, last - at);
      if (encoded) {
        in.read_encoded(m, buf, lengths, shapes, pixels);
      } else if (ragged) {
        in.read_ragged(m, buf, shapes);
      } else {
        buf.resize(static_cast<size_t>(m * sample_bytes));
        in.read_images(buf.data(), m);
        shapes.assign(static_cast<size_t>(m), shape);
      }
      if (dtype != SampleType::u8) {  // every value finite after the transform; the train split's statistics
        const int64_t plane = shape.plane();  // H·W, or D·H·W of a volume
        for (int64_t i = 0; i < m; ++i) {
          science_values(buf.data() + i * sample_bytes, dtype, px, log1p, values);
          for (int c = 0; c < shape.channels; ++c) {
            double s1 = 0, s2 = 0;
            for (int64_t k = 0; k < plane; ++k) {
              const double v = values[static_cast<size_t>(c * plane + k)];
              if (!std::isfinite(v))
                fail(in.describe(), ": ", split, " sample ", at + i, " channel ", c, " holds ",
                     log1p ? "a value ≤ -1 (log1p of it is not finite) or one" : "a value", " that is not finite; ",
                     "fix the input", log1p ? " or leave out --transform log1p" : "");
              s1 += v;
              s2 += v * v;
            }
            if (stats) stats->fsum[static_cast<size_t>(c)] += s1, stats->fsumsq[static_cast<size_t>(c)] += s2;
          }
          if (stats) stats->per_channel += static_cast<uint64_t>(plane);
        }
      } else if (stats) {  // over all pixels (ragged: each image weighs its pixel count)
        const uint8_t* img = encoded ? pixels.data() : buf.data();
        for (int64_t i = 0; i < m; ++i) {
          const int64_t pl = int64_t{shapes[i].height} * shapes[i].width;
          for (int c = 0; c < shape.channels; ++c) {
            const uint8_t* p = img + c * pl;
            uint64_t s1 = 0, s2 = 0;
            for (int64_t k = 0; k < pl; ++k) {
              s1 += p[k];
              s2 += uint64_t{p[k]} * p[k];
            }
            stats->sum[c] += s1;
            stats->sumsq[c] += s2;
          }
          stats->per_channel += static_cast<uint64_t>(pl);
          img += shapes[i].numel();
        }
      }
      if (ragged) w.append_ragged(buf.data(), shapes.data(), labels.data() + at, m, encoded ? lengths.data() : nullptr);
      else if (K > 0) w.append(buf.data(), nullptr, m, in.targets().data() + at * K);
      else w.append(buf.data(), labels.data() + at * per, m);
      done += m;
      if (chatty && o.log && done >= next_report && done < n) {
        o.log("prep: " + split + " " + std::to_string(done) + "/" + std::to_string(n) + " samples (" +
              std::to_string(100 * done / n) + "%)");
        next_report += n / 10;
      }
    }
    w.close();
    fsync_file(dir + "/" + file);
    list.push_back({{"file", file}, {"samples", count}, {"first_index", first}});
  }
  if (o.log) o.log("prep: " + split + " " + std::to_string(n) + " samples in " + std::to_string(shards) + " shard(s)");
  return {{"samples", n}, {"shards", list}};
}

void rename_or_fail(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) fail("cannot rename ", from, " to ", to, ": ", ec.message());
}

// The lock that makes one prep at a time write an output (issue 48 item 11: two preps of
// one --output both printed "wrote" and the first to start silently replaced the second's
// data set). "<out>.prep-lock" beside the output holds the holder's "pid host"; it is
// flock()ed for the whole prep and removed at its end. A killed prep's file is unlocked
// and taken over. The inode is checked after locking: a file a finishing prep removed
// while this one waited on it is no lock.
class OutputLock {
 public:
  explicit OutputLock(const std::string& out) : path_(out + ".prep-lock") {
    for (int attempt = 0; attempt < 100; ++attempt) {
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd_ < 0)
        fail("cannot create the lock ", path_, " beside --output: ", std::strerror(errno),
             " (a link or another user's file there is refused); check the folder's permissions");
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        char buf[128] = {};
        const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
        std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
        ::close(fd_);
        fd_ = -1;
        fail("another `cnnscale prep` is writing --output ", out,
             holder.empty() ? std::string() : " (pid and host: " + holder + ")",
             "; wait for it to finish, or choose another --output");
      }
      struct stat a {}, b {};
      if (::fstat(fd_, &a) == 0 && ::stat(path_.c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
        const std::string me = std::to_string(::getpid()) + " " + this_host() + "\n";
        if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
          // The lock holds without the text; the text only names the holder to others.
        }
        return;
      }
      ::close(fd_);  // removed by the prep that held it: lock a new one
      fd_ = -1;
    }
    fail("cannot take the lock ", path_, " beside --output: it keeps being replaced");
  }
  ~OutputLock() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());  // while still holding it: a waiter then sees another inode
    ::close(fd_);
  }
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

std::string strip_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// What earlier preps of `out` left beside it: "<out>.tmp-<pid>" (a prep killed while
// writing) and "<out>.old-<pid>" (a --force killed while swapping), when no process <pid>
// runs on this host. Named, not removed: the writer may be a prep on another node.
void name_leftovers(const std::string& out) try {
  const fs::path abs = fs::absolute(out);
  const std::string base = abs.filename().string();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(abs.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    for (const std::string kind : {".tmp-", ".old-"}) {
      if (name.size() <= base.size() + kind.size() || name.compare(0, base.size() + kind.size(), base + kind) != 0)
        continue;
      const std::string digits = name.substr(base.size() + kind.size());
      if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
      const long pid = std::stol(digits);
      if (pid == ::getpid() || !process_gone(this_host(), pid)) continue;  // running (or not ours to ask)
      const std::string left = out + kind + digits, who = " (no process " + digits + " runs on this host)";
      if (kind == ".tmp-")
        log_warn(left + " is the partial output of a prep that did not finish" + who +
                 ": it is not a data set; remove it (rm -r " + left + "), unless a prep on another node is writing it");
      else
        log_warn(left + " holds the data set that a `prep --force` which did not finish" + who + " was replacing: if " +
                 out + " is complete (`cnnscale prep --verify " + out + "`), remove it (rm -r " + left + "); if " +
                 out + " is missing, rename it back (mv " + left + " " + out + ")");
    }
  }
} catch (const fs::filesystem_error&) {  // a folder that cannot be listed: nothing to name (prep itself goes on)
}

}  // namespace

PrepResult run_prep(const PrepOptions& o) {
  if (o.input.empty())
    fail("prep needs --input (an IDX directory, an HDF5 file with --format hdf5, or the CIFAR folder with ",
         "--format cifar10|cifar100)");
  if (o.output.empty()) fail("prep needs --output DIR (the dataset directory to create)");
  if (o.chunk < 1) fail("--chunk must be at least 1 sample");
  const ImageFolderOptions& im = o.image;
  if (o.format != "imagefolder" && (im.resize || im.center_crop || im.val_fraction > 0 || im.store_max))
    fail("--resize, --center-crop, --val-fraction and --store belong to --format imagefolder");
  if (o.format != "imagefolder" && im.max_pixels != kDefaultMaxImagePixels)
    fail("--max-image-pixels belongs to --format imagefolder (it guards JPEG/PNG decoding)");
  if (!o.cifar100_labels.empty() && o.format != "cifar100")
    fail("--cifar100-labels belongs to --format cifar100 (it picks the fine or coarse label of CIFAR-100)");
  if (o.classes < 0 || o.classes == 1) fail("--classes must be at least 2 (or 0 to count them from the labels)");
  ShardWriteOptions wopts;
  wopts.chunk_samples = o.chunk;
  if (o.compress == "gzip") wopts.gzip_level = 4;
  else if (o.compress != "none") fail("--compress ", o.compress, " is not supported; use gzip or none");

  // Open the inputs first: a bad input fails before anything is written.
  std::unique_ptr<SampleStream> train, test;
  json source;
  if (o.format == "idx") {
    if (!fs::is_directory(o.input))
      fail("--input ", o.input, " is not a directory; with --format idx pass the directory holding the IDX files");
    train = open_idx_input(find_idx_file(o.input, "train", "images"), find_idx_file(o.input, "train", "labels"));
    test = open_idx_input(find_idx_file(o.input, "t10k", "images"), find_idx_file(o.input, "t10k", "labels"));
    source = {{"format", "idx"}, {"input", fs::absolute(o.input).string()}};
  } else if (o.format == "hdf5") {
    const bool regression = !o.targets.empty();
    if (o.images.empty() || o.labels.empty() == o.targets.empty())
      fail("--format hdf5 needs --images NAME and either --labels NAME (class indices) or --targets NAME (float ",
           "targets, regression): datasets inside --input");
    if (!o.test_labels.empty() && regression)
      fail("--test-labels goes with --labels; with --targets give --test-targets");
    if (!o.test_targets.empty() && !regression) fail("--test-targets goes with --targets; with --labels give --test-labels");
    const std::string& test_y = regression ? o.test_targets : o.test_labels;
    if (o.test_images.empty() != test_y.empty())
      fail("--test-images and ", regression ? "--test-targets" : "--test-labels", " go together; give both or neither");
    train = open_hdf5_input(o.input, o.images, regression ? o.targets : o.labels, regression);
    if (!o.test_images.empty()) test = open_hdf5_input(o.input, o.test_images, test_y, regression);
    source = {{"format", "hdf5"}, {"input", fs::absolute(o.input).string()}, {"images", o.images}};
    source[regression ? "targets" : "labels"] = regression ? o.targets : o.labels;
  } else if (o.format == "cifar10" || o.format == "cifar100") {
    CifarInput ci = open_cifar_input(o.input, o.format, o.cifar100_labels);
    train = std::move(ci.train);
    test = std::move(ci.test);
    source = {{"format", o.format}, {"input", fs::absolute(ci.dir).string()}};
    if (o.format == "cifar100") source["labels"] = o.cifar100_labels.empty() ? "fine" : o.cifar100_labels;
  } else if (o.format == "imagefolder") {
    ImageFolderInput in = open_imagefolder_input(o.input, o.image);
    train = std::move(in.train);
    test = std::move(in.test);
    source = {{"format", "imagefolder"},
              {"input", fs::absolute(o.input).string()},
              {"layout", in.layout},
              {"resize", o.image.resize},
              {"center_crop", o.image.center_crop}};
    if (o.image.store_max > 0)
      source["store"] = (o.image.store_jpeg ? "jpeg " : "original-max ") + std::to_string(o.image.store_max);
    if (in.layout == "split") {
      source["val_fraction"] = o.image.val_fraction;
      source["seed"] = o.image.seed;
    }
  } else {
    fail("--format ", o.format, " is not supported; use idx, hdf5, cifar10, cifar100 or imagefolder");
  }
  for (auto* s : {train.get(), test.get()})
    if (s && s->samples() == 0)
      fail("the ", s == train.get() ? "train" : "test", " input ", s->describe(),
           " holds no samples; nothing to convert");
  // dataset.json holds the class names and the input's path, and JSON holds UTF-8 only:
  // refuse other bytes now, before any decoding (the JSON writer once failed at the end
  // with an internal error: issue 26 item 8).
  for (const std::string& name : train->class_names())
    if (const size_t at = first_invalid_utf8(name); at != std::string::npos)
      fail("the class name '", escape_non_ascii(name), "' of ", escape_non_ascii(train->describe()),
           " is not UTF-8 text (byte ", at,
           "); dataset.json can hold UTF-8 names only: rename the class folder "
           "(or fix the names file) in UTF-8");
  if (const std::string in = fs::absolute(o.input).string(); first_invalid_utf8(in) != std::string::npos)
    fail("--input ", escape_non_ascii(in),
         " is not UTF-8 text; dataset.json records it: rename the folder in UTF-8 or "
         "give it through a UTF-8 path (a symbolic link)");
  if (o.format != "hdf5" && (!o.targets.empty() || !o.test_targets.empty()))
    fail("--targets and --test-targets belong to --format hdf5");
  if (o.transform != "none" && o.transform != "log1p")
    fail("--transform ", o.transform, " is not supported; use log1p or none");
  if (o.transform == "log1p" && train->dtype() == SampleType::u8)
    fail("--transform log1p applies to int16, float16 and float32 samples; ", train->describe(),
         " holds uint8 images, which are normalised as x/255");
  if (test && (test->dtype() != train->dtype() || test->target_count() != train->target_count()))
    fail("the test samples (", test->describe(), ") are ", sample_type_name(test->dtype()), " with ",
         test->target_count(), " targets each, the train samples ", sample_type_name(train->dtype()), " with ",
         train->target_count(), "; prep both splits from data of one kind");
  const bool regression = train->target_count() > 0;
  const bool segmentation = train->label_pixels() > 1;
  if (test && (test->label_pixels() > 1) != segmentation)
    fail("the ", segmentation ? "train" : "test", " labels are label maps (N×H×W, or N×D×H×W) but the ",
         segmentation ? "test" : "train", " labels are one class per sample; prep both splits with labels of one kind");
  if (o.multilabel && !regression) fail("--task multilabel goes with --targets (K labels of 0 or 1 per sample)");
  if (o.multilabel)
    for (auto* s : {train.get(), test.get()})
      if (s)
        for (size_t i = 0; i < s->targets().size(); ++i)
          if (s->targets()[i] != 0.f && s->targets()[i] != 1.f)
            fail(s->describe(), ": target ", i % static_cast<size_t>(s->target_count()), " of sample ",
                 i / static_cast<size_t>(s->target_count()), " is ", s->targets()[i],
                 "; a multilabel data set's targets are 0 or 1 (for other values leave out --task multilabel)");
  const SampleShape shape = train->shape();
  if (test && (test->shape().channels != shape.channels || test->shape().height != shape.height ||
               test->shape().width != shape.width || test->shape().depth != shape.depth))
    fail("the test samples (", test->describe(), ", ", test->shape().text(), ") do not have the train samples' shape ",
         shape.text());
  if (regression && o.classes != 0) fail("--classes goes with class labels; --targets data sets have none");
  int classes = o.classes;
  if (classes == 0) classes = train->format_classes();
  if (classes == 0 && !regression) {
    int32_t mx = 0;
    for (auto* s : {train.get(), test.get()})
      if (s)
        for (int32_t l : s->labels()) mx = std::max(mx, l);
    classes = mx + 1;
    if (classes < 2) fail("the labels of ", train->describe(), " hold a single class; nothing to learn");
  }

  // Output: one prep at a time; refuse to overwrite a non-empty directory unless --force.
  const std::string out = strip_slashes(o.output);
  const fs::path parent = fs::absolute(out).parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);  // the lock lives beside the output
  if (ec) fail("cannot create the parent directory ", parent.string(), " of --output: ", ec.message());
  const OutputLock output_lock(out);
  if (fs::exists(out)) {
    if (!fs::is_directory(out)) fail("--output ", out, " exists and is not a directory; choose another --output");
    if (!fs::is_empty(out) && !o.force)
      fail("--output ", out, " exists and is not empty; pass --force to replace it or choose another --output");
  }
  name_leftovers(out);
  const std::string tmp = out + ".tmp-" + std::to_string(::getpid());
  // From here a stop signal is read between blocks of samples (prep.hpp): the partial
  // output is removed and the stop said, instead of the default death that left it; a
  // second signal before that block ends prep at once.
  if (o.stop_on_signals) install_stop_signal_handlers(StopSignals::prep);
  const StopFn stop = [&](const std::string& doing) {
    const int sig = stop_signal_received();
    throw PrepStopped(std::string("prep stopped by ") + stop_signal_name(sig) + " " + doing +
                          ": nothing was written to " + out + " (the partial " + tmp +
                          " was removed); run the same prep again to make it",
                      sig);
  };
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec)
    fail("cannot create ", tmp, " next to --output: ", ec ? ec.message() : "it exists", "; check permissions");

  PrepResult result;
  try {
    ChannelStats stats;
    json splits;
    splits["train"] = write_split(*train, "train", o.shards, tmp, wopts, classes, &stats, o, stop);
    if (test) splits["test"] = write_split(*test, "test", o.test_shards, tmp, wopts, classes, nullptr, o, stop);
    std::vector<double> mean(shape.channels), stdev(shape.channels);
    const bool pixels = train->dtype() == SampleType::u8;
    for (int c = 0; c < shape.channels; ++c) {
      const double n = static_cast<double>(stats.per_channel);
      const double m = pixels ? static_cast<double>(stats.sum[c]) / (255.0 * n) : stats.fsum[c] / n;
      const double m2 = pixels ? static_cast<double>(stats.sumsq[c]) / (255.0 * 255.0 * n) : stats.fsumsq[c] / n;
      mean[c] = m;
      stdev[c] = std::sqrt(std::max(0.0, m2 - m * m));
      if (!(stdev[c] > 0))
        fail("channel ", c, " of the train images is constant (std 0): normalisation is impossible; check the input");
    }
    json j = {{"format", kDatasetFormat},
              {"version", kDatasetVersion},
              {"source", source},
              {"sample_shape", shape.volume() ? json{shape.channels, shape.depth, shape.height, shape.width}
                                              : json{shape.channels, shape.height, shape.width}},
              {"layout", shape.volume() ? "NCDHW" : "NCHW"},
              {"dtype", sample_type_name(train->dtype())},
              {"task", o.multilabel     ? "multilabel"
                       : regression     ? "regression"
                       : segmentation   ? "segmentation"
                                        : "classification"},
              {"normalization",
               {{"mean", mean},
                {"std", stdev},
                {"computed_on", "train"},
                {"pixel_scale", pixels ? "x / 255" : o.transform == "log1p" ? "log1p(x)" : "x"}}},
              {"chunk_samples", o.chunk},
              {"compression", o.compress},
              {"checksum", "fletcher32"},
              {"splits", splits}};
    if (regression) {
      j["targets"] = train->target_count();
      j["target_dtype"] = "float32";
    } else {
      j["label_dtype"] = "int32";
      j["classes"] = classes;
    }
    if (!pixels) j["transform"] = o.transform;
    if (train->ragged()) {
      j["sample_layout"] = train->encoded() ? "jpeg" : "ragged";
      j["max_side"] = shape.height;
    }
    const std::vector<std::string> names = train->class_names();
    if (!names.empty() && static_cast<int>(names.size()) == classes) j["class_names"] = names;
    write_file_atomic(tmp + "/dataset.json", j.dump(2) + "\n");
    // Each shard's digest, found by the readers' own check of what was just written
    // (load_dataset: counts, shapes, labels, then shard_digest), binds the shards to this
    // dataset.json (issue 48 item 6).
    const DatasetInfo made = load_dataset(tmp);
    for (const auto* split : {&made.train, &made.test})
      for (size_t i = 0; i < split->shards.size(); ++i)
        j["splits"][split->name]["shards"][i]["digest"] = split->shards[i].digest;
    write_file_atomic(tmp + "/dataset.json", j.dump(2) + "\n");
    if (stop_signal_received()) stop("after writing every shard, before moving " + tmp + " into place");
    // Into place: an existing (empty, or --force) output is moved aside first.
    if (fs::exists(out)) {
      const std::string old = out + ".old-" + std::to_string(::getpid());
      rename_or_fail(out, old);
      rename_or_fail(tmp, out);
      fs::remove_all(old, ec);
    } else {
      rename_or_fail(tmp, out);
    }
    fsync_directory(parent.string());
    result.output = out;
    result.train_samples = train->samples();
    result.test_samples = test ? test->samples() : 0;
    result.classes = regression ? train->target_count() : classes;
    result.regression = regression;
    result.segmentation = segmentation;
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return result;
}

}  // namespace cnnscale
