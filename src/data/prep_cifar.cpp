// prep_cifar.cpp — CIFAR-10/100 binary files as a SampleStream (see prep_cifar.hpp).
#include "data/prep_cifar.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "util/error.hpp"

namespace cnnscale {
namespace fs = std::filesystem;

namespace {

const char* kCifar10Url = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";
const char* kCifar100Url = "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz";

struct Variant {
  std::string name;     // "CIFAR-10"
  std::string folder;   // "cifar-10-batches-bin"
  std::string py_folder;
  std::string url;
  int64_t record = 0;
  int label_offset = 0;  // byte of the label kept inside a record
  int classes = 0;
  std::string names_file;
  std::vector<std::string> train_files, test_files;
  std::string record_layout;  // for messages
};

Variant variant_of(const std::string& v, const std::string& labels) {
  Variant x;
  if (v == "cifar10") {
    if (!labels.empty() && labels != "fine")
      fail("--cifar100-labels belongs to --format cifar100; CIFAR-10 has one label per image");
    x.name = "CIFAR-10";
    x.folder = "cifar-10-batches-bin";
    x.py_folder = "cifar-10-batches-py";
    x.url = kCifar10Url;
    x.record = kCifar10Record;
    x.label_offset = 0;
    x.classes = 10;
    x.names_file = "batches.meta.txt";
    for (int i = 1; i <= 5; ++i) x.train_files.push_back("data_batch_" + std::to_string(i) + ".bin");
    x.test_files = {"test_batch.bin"};
    x.record_layout = "1 label byte + 3072 pixel bytes";
  } else {
    if (labels != "fine" && labels != "coarse")
      fail("--cifar100-labels ", labels, " is not supported; use fine (100 classes) or coarse (20 superclasses)");
    x.name = "CIFAR-100";
    x.folder = "cifar-100-binary";
    x.py_folder = "cifar-100-python";
    x.url = kCifar100Url;
    x.record = kCifar100Record;
    x.label_offset = labels == "coarse" ? 0 : 1;
    x.classes = labels == "coarse" ? 20 : 100;
    x.names_file = labels == "coarse" ? "coarse_label_names.txt" : "fine_label_names.txt";
    x.train_files = {"train.bin"};
    x.test_files = {"test.bin"};
    x.record_layout = "coarse label byte + fine label byte + 3072 pixel bytes";
  }
  return x;
}

// Refuses the python (pickle) distribution found at or under dir.
void refuse_python(const std::string& dir, const Variant& v) {
  const bool py_here = v.record == kCifar10Record
                           ? (fs::exists(dir + "/data_batch_1") || fs::exists(dir + "/batches.meta"))
                           : (fs::is_regular_file(dir + "/train") && fs::exists(dir + "/meta"));
  const bool py_below = fs::is_directory(dir + "/" + v.py_folder);
  if (py_here || py_below)
    fail("--input ", py_below ? dir + "/" + v.py_folder : dir, " holds the python (pickle) version of ", v.name,
         "; cnnscale prep reads the binary version: download ", v.url, ", unpack it and pass the ", v.folder,
         " folder (or its parent) with --input");
}

// The folder holding the binary files: input itself or input/<folder>.
std::string find_dir(const std::string& input, const Variant& v) {
  if (!fs::exists(input)) fail("--input ", input, " does not exist; pass the ", v.folder, " folder of ", v.url);
  if (!fs::is_directory(input))
    fail("--input ", input, " is not a directory; with --format ", v.record == kCifar10Record ? "cifar10" : "cifar100",
         " pass the ", v.folder, " folder (or its parent) unpacked from ", v.url);
  const std::string first = v.train_files.front();
  if (fs::exists(input + "/" + first)) return input;
  if (fs::exists(input + "/" + v.folder + "/" + first)) return input + "/" + v.folder;
  refuse_python(input, v);
  fail("--input ", input, " holds neither ", first, " nor ", v.folder, "/", first, "; pass the ", v.folder,
       " folder (or its parent) unpacked from ", v.url);
}

std::vector<std::string> read_names(const std::string& path) {
  std::vector<std::string> names;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    names.push_back(line.substr(b, line.find_last_not_of(" \t\r") - b + 1));
  }
  return names;
}

class CifarStream : public SampleStream {
 public:
  CifarStream(const std::string& dir, const std::vector<std::string>& files, const Variant& v,
              std::vector<std::string> names)
      : v_(v), names_(std::move(names)) {
    for (const auto& f : files) {
      const std::string p = dir + "/" + f;
      if (!fs::is_regular_file(p))
        fail(v.name, " file ", p, " is missing; the download is incomplete — unpack ", v.url, " again");
      const auto bytes = static_cast<int64_t>(fs::file_size(p));
      if (bytes == 0 || bytes % v.record != 0) {
        const int64_t other = v.record == kCifar10Record ? kCifar100Record : kCifar10Record;
        std::string hint;
        if (bytes > 0 && bytes % other == 0 && bytes % v.record != 0)
          hint = std::string(" (its size fits ") + std::to_string(other) + "-byte records: is it " +
                 (v.record == kCifar10Record ? "CIFAR-100? use --format cifar100)" : "CIFAR-10? use --format cifar10)");
        fail(p, " is ", bytes, " bytes, not a whole number of ", v.record, "-byte ", v.name, " records (",
             v.record_layout, ")", hint, "; the file is truncated or not ", v.name,
             " binary — unpack ", v.url, " again");
      }
      paths_.push_back(p);
      records_.push_back(bytes / v.record);
      n_ += bytes / v.record;
    }
    read_labels();
    desc_ = paths_.size() == 1 ? paths_[0] : dir + "/{" + files.front() + ".." + files.back() + "}";
  }
  ~CifarStream() override {
    if (f_) std::fclose(f_);
  }
  std::string describe() const override { return desc_; }
  int64_t samples() const override { return n_; }
  SampleShape shape() const override { return {3, 32, 32}; }
  const std::vector<int32_t>& labels() const override { return labels_; }
  int format_classes() const override { return v_.classes; }
  std::vector<std::string> class_names() const override { return names_; }

  void read_images(uint8_t* dst, int64_t n) override {
    while (n > 0) {
      if (!f_ || left_in_file_ == 0) open_next();
      const int64_t m = std::min({n, left_in_file_, kBlock});
      buf_.resize(static_cast<size_t>(m * v_.record));
      read_exact(f_, paths_[file_], buf_.data(), buf_.size());
      for (int64_t i = 0; i < m; ++i)
        std::memcpy(dst + i * kCifarPixels, buf_.data() + i * v_.record + (v_.record - kCifarPixels),
                    static_cast<size_t>(kCifarPixels));
      dst += m * kCifarPixels;
      n -= m;
      left_in_file_ -= m;
    }
  }

 private:
  static constexpr int64_t kBlock = 1024;  // records per read (~3 MiB)

  static void read_exact(std::FILE* f, const std::string& path, uint8_t* dst, size_t bytes) {
    if (std::fread(dst, 1, bytes, f) != bytes)
      fail("reading ", path, " failed (", std::ferror(f) ? std::strerror(errno) : "it ended early",
           "); the file changed while prep read it or the disk is failing");
  }

  void open_next() {
    if (f_) {
      std::fclose(f_);
      f_ = nullptr;
      ++file_;
    }
    if (file_ >= paths_.size()) internal_error("read past the last CIFAR file");
    f_ = std::fopen(paths_[file_].c_str(), "rb");
    if (!f_) fail("cannot open ", paths_[file_], ": ", std::strerror(errno));
    left_in_file_ = records_[file_];
  }

  void read_labels() {
    labels_.reserve(static_cast<size_t>(n_));
    for (size_t fi = 0; fi < paths_.size(); ++fi) {
      std::FILE* f = std::fopen(paths_[fi].c_str(), "rb");
      if (!f) fail("cannot open ", paths_[fi], ": ", std::strerror(errno));
      for (int64_t at = 0; at < records_[fi]; at += kBlock) {
        const int64_t m = std::min(kBlock, records_[fi] - at);
        buf_.resize(static_cast<size_t>(m * v_.record));
        try {
          read_exact(f, paths_[fi], buf_.data(), buf_.size());
        } catch (...) {
          std::fclose(f);
          throw;
        }
        for (int64_t i = 0; i < m; ++i) {
          const int l = buf_[static_cast<size_t>(i * v_.record + v_.label_offset)];
          if (l >= v_.classes) {
            std::fclose(f);
            fail(paths_[fi], ": record ", at + i, " has label ", l, " but ", v_.name,
                 v_.record == kCifar100Record ? (v_.label_offset == 0 ? " coarse" : " fine") : "", " labels are 0..",
                 v_.classes - 1, "; the file is damaged or not ", v_.name, " binary — unpack ", v_.url, " again");
          }
          labels_.push_back(l);
        }
      }
      std::fclose(f);
    }
  }

  Variant v_;
  std::vector<std::string> names_, paths_;
  std::vector<int64_t> records_;
  int64_t n_ = 0;
  std::vector<int32_t> labels_;
  std::string desc_;
  std::vector<uint8_t> buf_;
  std::FILE* f_ = nullptr;
  size_t file_ = 0;
  int64_t left_in_file_ = 0;
};

}  // namespace

CifarInput open_cifar_input(const std::string& input_in, const std::string& variant, const std::string& labels) {
  if (variant != "cifar10" && variant != "cifar100") internal_error("unknown CIFAR variant ", variant);
  std::string input = input_in;
  while (input.size() > 1 && input.back() == '/') input.pop_back();
  const Variant v = variant_of(variant, variant == "cifar100" && labels.empty() ? "fine" : labels);
  CifarInput r;
  r.dir = find_dir(input, v);
  std::vector<std::string> names;
  const std::string names_path = r.dir + "/" + v.names_file;
  if (fs::exists(names_path)) {
    names = read_names(names_path);
    if (static_cast<int>(names.size()) != v.classes)
      fail(names_path, " lists ", names.size(), " class names but ", v.name,
           v.record == kCifar100Record ? (v.label_offset == 0 ? " (coarse labels)" : " (fine labels)") : "", " has ",
           v.classes, " classes; restore the file from ", v.url, " or delete it (the classes then stay unnamed)");
  }
  r.train = std::make_unique<CifarStream>(r.dir, v.train_files, v, names);
  r.test = std::make_unique<CifarStream>(r.dir, v.test_files, v, names);
  return r;
}

}  // namespace cnnscale
