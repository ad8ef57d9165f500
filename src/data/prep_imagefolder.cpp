// prep_imagefolder.cpp — see prep_imagefolder.hpp.
#include "data/prep_imagefolder.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "data/image_decode.hpp"
#include "data/sampler.hpp"
#include "util/error.hpp"
#include "util/memory.hpp"

namespace cnnscale {
namespace fs = std::filesystem;

namespace {

const char* kImgExtensions[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
const char* kDecoded[] = {".jpg", ".jpeg", ".png"};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The longer side capped to S (torchvision Resize's max_size rule: long → S, short →
// int(S·short/long), PIL bilinear).
RgbImage cap_side(const RgbImage& img, int S) {
  const int l = std::max(img.width, img.height), sh = std::min(img.width, img.height);
  if (l <= S) return img;
  const int new_short = std::max(1, static_cast<int>(static_cast<double>(int64_t{S} * sh) / l));
  return img.width >= img.height ? resize_bilinear(img, S, new_short) : resize_bilinear(img, new_short, S);
}

// A file's bytes (--store jpeg keeps them).
std::vector<uint8_t> read_bytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot open ", path, ": ", std::strerror(errno));
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + k);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) fail("reading ", path, " failed: ", std::strerror(errno));
  return out;
}

// An image after the prep transforms.
RgbImage load(const std::string& path, const ImageFolderOptions& o) {
  RgbImage img = decode_image(path, o.max_pixels);
  if (o.store_max > 0) return cap_side(img, o.store_max);
  if (o.resize > 0) img = resize_shorter(img, o.resize);
  if (o.center_crop > 0) img = center_crop(img, o.center_crop);
  return img;
}

class ImageFolderStream : public SampleStream {
 public:
  ImageFolderStream(std::vector<std::string> files, std::vector<int32_t> labels, std::vector<std::string> classes,
                    const ImageFolderOptions& o, const std::string& desc)
      : files_(std::move(files)), labels_(std::move(labels)), classes_(std::move(classes)), o_(o), desc_(desc) {
    if (o_.store_max > 0) shape_ = {3, o_.store_max, o_.store_max};
    else if (!files_.empty()) {
      const RgbImage first = load(files_[0], o_);
      shape_ = {3, first.height, first.width};
    }
  }
  std::string describe() const override { return desc_; }
  int64_t samples() const override { return static_cast<int64_t>(files_.size()); }
  SampleShape shape() const override { return shape_; }
  const std::vector<int32_t>& labels() const override { return labels_; }
  int format_classes() const override { return static_cast<int>(classes_.size()); }
  std::vector<std::string> class_names() const override { return classes_; }

  bool ragged() const override { return o_.store_max > 0; }

  void read_images(uint8_t* dst, int64_t n) override {
    const int64_t numel = shape_.numel();
    parallel(n, [&](int64_t i) { write_sample(pos_ + i, dst + i * numel); });
    pos_ += n;
  }

  bool encoded() const override { return o_.store_jpeg; }

  // --store jpeg: a JPEG whose longer side is at most S is kept byte for byte (decoded
  // once here to check it and to learn its size); anything else (larger, or a PNG) is
  // decoded, resized as --store original-max would, and encoded at quality 95.
  void read_encoded(int64_t n, std::vector<uint8_t>& bytes, std::vector<int64_t>& lengths,
                    std::vector<SampleShape>& shapes, std::vector<uint8_t>& pixels) override {
    std::vector<std::vector<uint8_t>> enc(static_cast<size_t>(n)), px(static_cast<size_t>(n));
    shapes.resize(static_cast<size_t>(n));
    parallel(n, [&](int64_t i) {
      const std::string& path = files_[static_cast<size_t>(pos_ + i)];
      const RgbImage img = decode_image(path, o_.max_pixels);
      std::vector<uint8_t> file = read_bytes(path);
      auto& out = enc[static_cast<size_t>(i)];
      auto& planes = px[static_cast<size_t>(i)];
      if (is_jpeg(file.data(), file.size()) && std::max(img.width, img.height) <= o_.store_max) {
        out = std::move(file);  // decodes to `img` (the same decoder): the statistics use it
        planes.resize(img.pixels.size());
        to_planes(img, planes.data());
        shapes[static_cast<size_t>(i)] = {3, img.height, img.width};
      } else {  // the statistics see what the reader will decode: the re-encoded JPEG
        out = encode_jpeg(cap_side(img, o_.store_max), 95);
        decode_jpeg_planes(out.data(), out.size(), 8, path, planes, &shapes[static_cast<size_t>(i)]);
      }
    });
    lengths.resize(static_cast<size_t>(n));
    size_t total = 0, total_px = 0;
    for (int64_t i = 0; i < n; ++i) {
      lengths[static_cast<size_t>(i)] = static_cast<int64_t>(enc[static_cast<size_t>(i)].size());
      total += enc[static_cast<size_t>(i)].size();
      total_px += px[static_cast<size_t>(i)].size();
    }
    bytes.clear();
    bytes.reserve(total);
    pixels.clear();
    pixels.reserve(total_px);
    for (int64_t i = 0; i < n; ++i) {
      bytes.insert(bytes.end(), enc[static_cast<size_t>(i)].begin(), enc[static_cast<size_t>(i)].end());
      pixels.insert(pixels.end(), px[static_cast<size_t>(i)].begin(), px[static_cast<size_t>(i)].end());
    }
    pos_ += n;
  }

  void read_ragged(int64_t n, std::vector<uint8_t>& bytes, std::vector<SampleShape>& shapes) override {
    std::vector<RgbImage> imgs(static_cast<size_t>(n));
    parallel(n, [&](int64_t i) { imgs[static_cast<size_t>(i)] = load(files_[static_cast<size_t>(pos_ + i)], o_); });
    shapes.resize(static_cast<size_t>(n));
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      shapes[i] = {3, imgs[i].height, imgs[i].width};
      total += shapes[i].numel();
    }
    bytes.resize(static_cast<size_t>(total));
    int64_t at = 0;
    for (int64_t i = 0; i < n; ++i) {
      to_planes(imgs[i], bytes.data() + at);
      at += shapes[i].numel();
    }
    pos_ += n;
  }

 private:
  // Runs f(0..n) on o_.threads threads; rethrows the lowest-numbered failing thread's error.
  template <typename F>
  void parallel(int64_t n, F f) {
    const int threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(o_.threads, n)));
    std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
    auto work = [&](int t) {
      try {
        for (int64_t i = t; i < n; i += threads) f(i);
      } catch (...) {
        errors[static_cast<size_t>(t)] = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& th : pool) th.join();
    for (auto& e : errors)  // the lowest-numbered failing thread's error (deterministic enough)
      if (e) std::rethrow_exception(e);
  }

  static void to_planes(const RgbImage& img, uint8_t* dst) {
    const int64_t plane = int64_t{img.height} * img.width;
    for (int64_t p = 0; p < plane; ++p)
      for (int c = 0; c < 3; ++c) dst[c * plane + p] = img.pixels[static_cast<size_t>(3 * p + c)];
  }

  void write_sample(int64_t index, uint8_t* dst) const {
    const std::string& path = files_[static_cast<size_t>(index)];
    const RgbImage img = load(path, o_);
    if (img.height != shape_.height || img.width != shape_.width)
      fail(path, " is ", img.width, "x", img.height, " after --resize/--center-crop but ", files_[0], " is ",
           shape_.width, "x", shape_.height, "; every sample needs one shape: pass --center-crop S (after --resize S ",
           "for photos of different sizes, or --store original-max S to keep each image's own size)");
    to_planes(img, dst);
  }

  std::vector<std::string> files_;
  std::vector<int32_t> labels_;
  std::vector<std::string> classes_;
  ImageFolderOptions o_;
  std::string desc_;
  SampleShape shape_{3, 1, 1};
  int64_t pos_ = 0;
};

}  // namespace

namespace {

// The listing proper; list_image_folder turns the file system's errors into user errors.
ImageFolderListing list_image_folder_(const std::string& dir);

}  // namespace

// A folder that cannot be listed (permissions), a symbolic link loop (ROOT/c0/loop -> ..)
// or a path that is too long stop prep with a message naming the path, not an internal
// error (issue 26 item 9).
ImageFolderListing list_image_folder(const std::string& dir) {
  try {
    return list_image_folder_(dir);
  } catch (const fs::filesystem_error& e) {
    const std::string path = e.path1().empty() ? dir : e.path1().string();
    const int code = e.code().value();
    fail("cannot list ", path, " (", e.code().message(), ")",
         code == ELOOP ? ": a symbolic link loop under " + dir + "; remove the link that points back up"
         : code == EACCES || code == EPERM ? ": no permission to read it; fix its permissions or move it out of " + dir
                                           : std::string(": fix or remove it"));
  }
}

namespace {

ImageFolderListing list_image_folder_(const std::string& dir) {
  ImageFolderListing l;
  if (!fs::is_directory(dir)) fail(dir, " is not a directory; --format imagefolder needs ROOT/<class>/<image>");
  for (const auto& e : fs::directory_iterator(dir))
    if (fs::is_directory(e.path())) l.classes.push_back(e.path().filename().string());
  std::sort(l.classes.begin(), l.classes.end());
  if (l.classes.empty())
    fail(dir, " has no class folders; --format imagefolder reads ROOT/<class>/<image> (or ROOT/train/<class>/…)");
  if (l.classes.size() == 1)
    fail(dir, " has one class folder ('", l.classes[0],
         "'): a classifier needs at least 2 classes, and "
         "--format imagefolder takes each folder of ",
         dir,
         " as one class (ROOT/<class>/<image>); give the folder that "
         "holds the class folders, or add the other classes");
  for (size_t c = 0; c < l.classes.size(); ++c) {
    std::vector<std::pair<std::string, std::string>> found;  // (directory, file name)
    const std::string top = dir + "/" + l.classes[c];
    for (auto it = fs::recursive_directory_iterator(top, fs::directory_options::follow_directory_symlink);
         it != fs::recursive_directory_iterator(); ++it) {
      if (fs::is_directory(it->path())) continue;
      const std::string name = it->path().filename().string(), low = lower(name);
      if (!std::any_of(std::begin(kImgExtensions), std::end(kImgExtensions),
                       [&](const char* x) { return ends_with(low, x); }))
        continue;
      if (!std::any_of(std::begin(kDecoded), std::end(kDecoded), [&](const char* x) { return ends_with(low, x); }))
        fail(it->path().string(),
             " is an image type torchvision's ImageFolder lists but cnnscale prep does not decode ",
             "(JPEG and PNG only); convert it to PNG or JPEG, or move it out of ", dir);
      // A FIFO, socket or device named *.jpg would block or mislead the decoder (a FIFO
      // held prep forever with no output: issue 26 item 10).
      if (!fs::is_regular_file(it->path()))
        fail(it->path().string(),
             " is not a regular file (a FIFO, socket, device or dangling link) though it is named ",
             "like an image; remove it or move it out of ", dir);
      found.emplace_back(it->path().parent_path().string(), name);
    }
    if (found.empty())
      fail("class folder ", top, " holds no .jpg, .jpeg or .png file; add images or remove the folder");
    std::sort(found.begin(), found.end());
    for (const auto& [d, f] : found) {
      l.files.push_back(d + "/" + f);
      l.labels.push_back(static_cast<int32_t>(c));
    }
  }
  return l;
}

}  // namespace

ImageFolderInput open_imagefolder_input(const std::string& root_in, const ImageFolderOptions& o) {
  std::string root = root_in;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (!fs::is_directory(root))
    fail("--input ", root, " is not a directory; --format imagefolder needs a folder of class folders");
  if (o.resize < 0 || o.center_crop < 0) fail("--resize and --center-crop take a positive size");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1)) fail("--val-fraction must lie in [0, 1)");
  if (o.threads < 1) fail("--threads must be at least 1");
  if (o.store_max < 0) fail("--store original-max takes a positive size");
  if (o.max_pixels < 0) fail("--max-image-pixels takes a pixel count (0: no limit)");
  if (o.store_max > 0 && (o.resize > 0 || o.center_crop > 0))
    fail("--store original-max keeps each image's own size (longer side capped); it does not combine with --resize ",
         "or --center-crop, which make every image one size — drop one of them");
  // Sizes that cannot fit, named before any decoding (they once ended in an out-of-memory
  // line naming neither option: issue 26 item 12). Each decoding thread holds at least one
  // such image; a sample after --center-crop C is 3·C·C bytes, an image after --resize R
  // at least 3·R·R (its shorter side is R).
  const uint64_t threads = static_cast<uint64_t>(std::max(o.threads, 1));
  auto check_side = [&](int side, const char* option, const char* doing) {
    if (side <= 0) return;
    const uint64_t bytes = 3 * static_cast<uint64_t>(side) * static_cast<uint64_t>(side) * threads;
    check_memory(std::string(doing) + " images to " + option + " " + std::to_string(side) + " (3x" +
                     std::to_string(side) + "x" + std::to_string(side) + " bytes per image, for each of the " +
                     std::to_string(threads) + " decoding thread(s))",
                 bytes, std::string("lower ") + option + " (or --threads), or run with more memory");
  };
  check_side(o.center_crop, "--center-crop", "cropping");
  if (o.center_crop <= 0 || o.resize > o.center_crop) check_side(o.resize, "--resize", "resizing");
  ImageFolderInput r;
  ImageFolderListing all;
  auto stream = [&](ImageFolderListing& l, const std::string& desc) {
    return std::make_unique<ImageFolderStream>(std::move(l.files), std::move(l.labels), l.classes, o, desc);
  };
  if (fs::is_directory(root + "/train")) {
    all = list_image_folder(root + "/train");
    if (fs::is_directory(root + "/val")) {
      if (o.val_fraction > 0)
        fail(root, " has its own val/ folder; drop --val-fraction (or move val/ away to carve the test split from "
                   "train/)");
      ImageFolderListing val = list_image_folder(root + "/val");
      if (val.classes != all.classes) {
        size_t i = 0;
        while (i < val.classes.size() && i < all.classes.size() && val.classes[i] == all.classes[i]) ++i;
        fail("the class folders of ", root, "/val (", val.classes.size(), ") differ from those of ", root, "/train (",
             all.classes.size(), "): class ", i, " is '", i < val.classes.size() ? val.classes[i] : "(none)",
             "' in val/ and '", i < all.classes.size() ? all.classes[i] : "(none)",
             "' in train/; the labels would not match — give both the same class folders");
      }
      r.layout = "train/val";
      r.train = stream(all, root + "/train");
      r.test = stream(val, root + "/val");
      return r;
    }
    root += "/train";
    r.layout = "train";
  } else {
    all = list_image_folder(root);
    r.layout = "all";
  }
  if (o.val_fraction == 0) {
    r.train = stream(all, root);
    return r;
  }
  const int64_t n = static_cast<int64_t>(all.files.size());
  const int64_t n_val = static_cast<int64_t>(std::floor(o.val_fraction * static_cast<double>(n) + 0.5));
  if (n_val < 1 || n_val >= n)
    fail("--val-fraction ", o.val_fraction, " of the ", n, " images of ", root, " leaves ", n_val,
         " for the test split and ", n - n_val, " for training; both need at least one");
  const std::vector<int64_t> perm = epoch_permutation(o.seed, 0, n);
  std::vector<char> is_val(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n_val; ++i) is_val[static_cast<size_t>(perm[i])] = 1;
  std::vector<std::string> tf, vf;
  std::vector<int32_t> tl, vl;
  for (int64_t i = 0; i < n; ++i) {
    (is_val[i] ? vf : tf).push_back(all.files[i]);
    (is_val[i] ? vl : tl).push_back(all.labels[i]);
  }
  r.layout = "split";
  r.train = std::make_unique<ImageFolderStream>(std::move(tf), std::move(tl), all.classes, o, root + " (train part)");
  r.test = std::make_unique<ImageFolderStream>(std::move(vf), std::move(vl), all.classes, o, root + " (val part)");
  return r;
}

}  // namespace cnnscale
