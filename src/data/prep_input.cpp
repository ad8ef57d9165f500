// prep_input.cpp — IDX and HDF5 sample streams for `cnnscale prep` (see prep_input.hpp).
#include "data/prep_input.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "data/h5util.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"

namespace cnnscale {

void SampleStream::read_ragged(int64_t, std::vector<uint8_t>&, std::vector<SampleShape>&) {
  internal_error(describe(), " is not a variable-size (ragged) input");
}
void SampleStream::read_encoded(int64_t, std::vector<uint8_t>&, std::vector<int64_t>&, std::vector<SampleShape>&,
                                std::vector<uint8_t>&) {
  internal_error(describe(), " is not an encoded (--store jpeg) input");
}
namespace fs = std::filesystem;

namespace {
bool same_content(const std::string& a, const std::string& b);
}

std::string find_idx_file(const std::string& dir, const std::string& split, const std::string& kind) {
  const std::string idx = kind == "images" ? "idx3" : "idx1";
  const std::string names[] = {split + "-" + kind + "-" + idx + "-ubyte", split + "-" + kind + "." + idx + "-ubyte"};
  for (const auto& n : names) {
    const std::string raw = dir + "/" + n, gz = raw + ".gz";
    const bool has_raw = fs::is_regular_file(raw), has_gz = fs::is_regular_file(gz);
    // Both (e.g. after `gunzip -k`): fine when they hold the same bytes, else ambiguous.
    if (has_raw && has_gz && !same_content(raw, gz))
      fail(dir, " holds both ", n, " and ", n, ".gz, and they differ; remove the one that should not be converted");
    if (has_raw) return raw;
    if (has_gz) return gz;
  }
  fail("no IDX ", kind, " file for the ", split, " split in ", dir, " (looked for ", names[0], "[.gz] and ", names[1],
       "[.gz]); pass the directory holding the MNIST-style files with --input");
}

namespace {

// A gzip or raw file read through zlib (gzread reads raw files transparently).
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) fail("cannot open ", path, ": ", std::strerror(errno));
    gzbuffer(f_, 1 << 17);
  }
  ~GzFile() {
    if (f_) gzclose(f_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  void read(void* dst, size_t bytes, const char* what) {
    auto* p = static_cast<char*>(dst);
    while (bytes > 0) {
      const unsigned want = static_cast<unsigned>(std::min<size_t>(bytes, 1u << 30));
      const int got = gzread(f_, p, want);
      if (got < 0) {
        int errnum = 0;
        const char* msg = gzerror(f_, &errnum);
        fail(path_, " is damaged (", msg, ") while reading ", what, "; download it again");
      }
      if (got == 0) fail(path_, " is truncated: it ends inside the ", what, "; download it again");
      p += got;
      bytes -= static_cast<size_t>(got);
    }
  }
  // After the last item the header declares: the file must end there, and a gzip file's
  // trailer (its CRC-32 and length) must be present and agree — zlib checks it only when
  // a read reaches the end (fuzz_prep_input: a gzip file cut inside its trailer, or with a
  // changed byte that still inflated, was read as good data).
  void expect_end(const char* what, int64_t items) {
    char extra;
    const int got = gzread(f_, &extra, 1);
    int errnum = Z_OK;
    const char* msg = gzerror(f_, &errnum);
    if (got < 0 || errnum != Z_OK)
      fail(path_, " is damaged (", msg, ") after its ", items, " ", what, "; download it again");
    if (got > 0)
      fail(path_, " is longer than its header declares (", items, " ", what,
           "): a damaged or wrong file; download it again");
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

// True when raw file a and gzip file b decompress to the same bytes.
bool same_content(const std::string& a, const std::string& b) {
  gzFile fa = gzopen(a.c_str(), "rb"), fb = gzopen(b.c_str(), "rb");
  bool same = fa && fb;
  std::vector<char> ba(1 << 20), bb(1 << 20);
  while (same) {
    const int na = gzread(fa, ba.data(), static_cast<unsigned>(ba.size()));
    const int nb = gzread(fb, bb.data(), static_cast<unsigned>(bb.size()));
    same = na == nb && na >= 0 && std::memcmp(ba.data(), bb.data(), static_cast<size_t>(std::max(na, 0))) == 0;
    if (na <= 0) break;
  }
  if (fa) gzclose(fa);
  if (fb) gzclose(fb);
  return same;
}

// Reads the IDX header: magic 0x00 0x00 <type> <ndims>, then ndims big-endian uint32.
std::vector<int64_t> read_idx_header(GzFile& f, int want_min_dims, int want_max_dims) {
  unsigned char magic[4];
  f.read(magic, 4, "IDX header");
  if (magic[0] != 0 || magic[1] != 0)
    fail(f.path(), " is not an IDX file (bad magic number); pass MNIST-style idx files");
  if (magic[2] != 0x08)
    fail(f.path(), ": IDX element type 0x", std::hex, int{magic[2]}, std::dec, " is not unsigned byte (0x08); ",
         "prep reads uint8 IDX files only");
  const int nd = magic[3];
  if (nd < want_min_dims || nd > want_max_dims)
    fail(f.path(), " has ", nd, " dimensions; expected ", want_min_dims,
         want_min_dims == want_max_dims ? "" : (" to " + std::to_string(want_max_dims)));
  std::vector<int64_t> dims(nd);
  for (int i = 0; i < nd; ++i) {
    unsigned char b[4];
    f.read(b, 4, "IDX header");
    dims[i] = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | int64_t{b[3]};
  }
  return dims;
}

// An uncompressed IDX file must be exactly as long as its header says: checked before
// anything of that size is allocated (a damaged header may claim 4 billion items).
void check_idx_size(const std::string& path, const std::vector<int64_t>& dims, const char* what) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) return;  // size unknown until read
  int64_t want = 4 + 4 * static_cast<int64_t>(dims.size()), items = 1;
  for (int64_t d : dims)  // four dimensions of up to 2^32 - 1 overflow int64 (fuzz_prep_input)
    if (__builtin_mul_overflow(items, d, &items))
      fail(path, " declares ", dims[0], " ", what, " of more than 2^63 bytes: a damaged or wrong file; download it again");
  want += items;
  std::error_code ec;
  const auto have = static_cast<int64_t>(fs::file_size(path, ec));
  if (!ec && have < want)
    fail(path, " is truncated: it ends inside the ", what, " (its header declares ", dims[0], " ", what, ", ", want,
         " bytes with the header, but the file is ", have, " bytes); download it again");
  if (!ec && have > want)
    fail(path, " is longer than its header declares (", dims[0], " ", what, ", ", want, " bytes with the header; the ",
         "file is ", have, " bytes): a damaged or wrong file; download it again");
}

class IdxStream : public SampleStream {
 public:
  IdxStream(const std::string& images, const std::string& labels) : images_(images) {
    auto d = read_idx_header(images_, 3, 4);
    // Each side and the channels fit an int (and a CNN input): a header's 32-bit sizes cast
    // to int turned negative, and two negatives made a positive sample size (fuzz_prep_input).
    for (size_t i = 1; i < d.size(); ++i)
      if (d[i] < 1 || d[i] > 65535)
        fail(images, " declares images of ", d[1], "x", d[2], d.size() == 4 ? "x" + std::to_string(d[3]) : "",
             ": a size of ", d[i], " is no image; a damaged or wrong file, download it again");
    n_ = d[0];
    shape_ = d.size() == 3 ? SampleShape{1, static_cast<int>(d[1]), static_cast<int>(d[2])}
                           : SampleShape{static_cast<int>(d[1]), static_cast<int>(d[2]), static_cast<int>(d[3])};
    if (shape_.numel() <= 0) fail(images, " declares empty images (", d[1], "x", d[2], ")");
    // prep reads at least one sample at a time: a header claiming a huge one (a gzip file's
    // real length shows only while reading) would be allocated first. IDX images are small.
    if (shape_.numel() > (int64_t{1} << 30))
      fail(images, " declares images of ", shape_.text(), " (", shape_.numel() >> 20,
           " MiB each); IDX holds small images: a damaged or wrong file, download it again");
    check_idx_size(images, d, "images");
    GzFile lf(labels);
    auto ld = read_idx_header(lf, 1, 1);
    check_idx_size(labels, ld, "labels");
    if (ld[0] != n_)
      fail(labels, " has ", ld[0], " labels but ", images, " has ", n_, " images; the files do not belong together");
    // In pieces: a gzip file's real length shows only while reading it, so a header
    // that claims more than the file holds fails at the real end, not in a huge allocation.
    std::vector<uint8_t> raw;
    for (int64_t done = 0; done < n_;) {
      const int64_t m = std::min<int64_t>(n_ - done, 16 << 20);
      raw.resize(static_cast<size_t>(done + m));
      try {
        lf.read(raw.data() + done, static_cast<size_t>(m), "labels");
      } catch (const UserError&) {
        fail(labels, " is truncated or damaged: its header declares ", n_, " labels but reading stopped within ",
             "labels ", done, "..", done + m - 1, "; download it again");
      }
      done += m;
    }
    lf.expect_end("labels", n_);
    labels_.assign(raw.begin(), raw.end());
    desc_ = images + " + " + labels;
  }
  std::string describe() const override { return desc_; }
  int64_t samples() const override { return n_; }
  SampleShape shape() const override { return shape_; }
  const std::vector<int32_t>& labels() const override { return labels_; }
  void read_images(uint8_t* dst, int64_t n) override {
    images_.read(dst, static_cast<size_t>(n * shape_.numel()), "images");
    read_ += n;
    if (read_ == n_) images_.expect_end("images", n_);
  }

 private:
  GzFile images_;
  int64_t n_ = 0, read_ = 0;
  SampleShape shape_;
  std::vector<int32_t> labels_;
  std::string desc_;
};

class Hdf5Stream : public SampleStream {
 public:
  Hdf5Stream(const std::string& file, const std::string& images, const std::string& labels, bool targets)
      : file_(file) {
    Hdf5Lock lock(hdf5_mutex());
    if (!fs::exists(file)) fail("--input ", file, " does not exist");
    std::string cause;
    f_ = h5_open_readonly(file, cause);
    if (!f_.valid()) fail("cannot open --input ", file, " as HDF5 (", cause, ")");
    hid_t d = H5Dopen2(f_, images.c_str(), H5P_DEFAULT);
    if (d < 0) fail(file, " has no dataset '", images, "' (--images); list its datasets with `h5ls -r ", file, "`");
    img_ = h5_dataset(d);
    H5Id type = h5_type(H5Dget_type(img_));
    // The values are kept as they are (no conversion to uint8 anywhere): uint8 images, or
    // int16 / float16 / float32 science data.
    const H5T_class_t cls = H5Tget_class(type);
    const size_t bytes = H5Tget_size(type);
    if (cls == H5T_INTEGER && bytes == 1 && H5Tget_sign(type) == H5T_SGN_NONE) dtype_ = SampleType::u8;
    else if (cls == H5T_INTEGER && bytes == 2 && H5Tget_sign(type) == H5T_SGN_2) dtype_ = SampleType::i16;
    else if (cls == H5T_FLOAT && bytes == 2) dtype_ = SampleType::f16;
    else if (cls == H5T_FLOAT && bytes == 4) dtype_ = SampleType::f32;
    else
      fail(file, ": dataset '", images, "' holds ", cls == H5T_FLOAT ? "float" : cls == H5T_INTEGER ? "integer" : "non-numeric",
           " values of ", bytes, " bytes; prep takes uint8, int16, float16 and float32 samples (convert it, e.g. ",
           "float64 to float32 with h5py: f.create_dataset(name, data=x.astype('float32')))");
    H5Id sp = h5_space(H5Dget_space(img_));
    nd_ = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[8] = {0};
    if (nd_ < 3 || nd_ > 5)
      fail(file, ": dataset '", images, "' has ", nd_, " dimensions; expected N×H×W, N×C×H×W or N×C×D×H×W (volumes)");
    H5Sget_simple_extent_dims(sp, dims, nullptr);
    for (int i = 0; i < nd_; ++i) {
      if (i > 0 && (dims[i] < 1 || dims[i] > 1000000))
        fail(file, ": dataset '", images, "' has a dimension of ", dims[i], "; each of a sample's must be 1 to 1000000");
      dims_[i] = dims[i];
    }
    n_ = static_cast<int64_t>(dims[0]);
    auto dim = [&](int i) { return static_cast<int>(dims[i]); };
    shape_ = nd_ == 3 ? SampleShape{1, dim(1), dim(2)} : SampleShape{dim(1), dim(2), dim(3)};
    if (nd_ == 5) shape_ = SampleShape{dim(1), dim(3), dim(4), dim(2)};  // C×D×H×W: a volume (the 3-D layers)
    if (targets) {
      read_targets(file, labels);
      desc_ = file + ":" + images + " + " + labels;
      return;
    }
    hid_t ld_id = H5Dopen2(f_, labels.c_str(), H5P_DEFAULT);
    if (ld_id < 0) fail(file, " has no dataset '", labels, "' (--labels); list its datasets with `h5ls -r ", file, "`");
    H5Id lab = h5_dataset(ld_id);
    H5Id ltype = h5_type(H5Dget_type(lab));
    if (H5Tget_class(ltype) != H5T_INTEGER) fail(file, ": dataset '", labels, "' is not an integer dataset");
    H5Id lsp = h5_space(H5Dget_space(lab));
    hsize_t ld[8] = {0};
    const int lnd = H5Sget_simple_extent_ndims(lsp);
    H5Sget_simple_extent_dims(lsp, ld, nullptr);
    // N×H×W: a label map per image (segmentation), one class per pixel of the image's H×W;
    // N×D×H×W: one per volume, a class per voxel (3-D segmentation).
    const int map_rank = shape_.volume() ? 4 : 3;
    const char* what = shape_.volume() ? "volume" : "image";
    if (lnd == map_rank && static_cast<int64_t>(ld[0]) == n_) {
      const bool same = static_cast<int>(ld[lnd - 2]) == shape_.height && static_cast<int>(ld[lnd - 1]) == shape_.width &&
                        (!shape_.volume() || static_cast<int>(ld[1]) == shape_.depth);
      std::string got;
      for (int i = 1; i < lnd; ++i) got.append(i > 1 ? "x" : "").append(std::to_string(ld[i]));
      const std::string want = shape_.volume() ? std::to_string(shape_.depth) + "x" + std::to_string(shape_.height) +
                                                     "x" + std::to_string(shape_.width)
                                               : std::to_string(shape_.height) + "x" + std::to_string(shape_.width);
      if (!same)
        fail(file, ": the label maps in '", labels, "' are ", got, " but the ", what, "s in '", images, "' are ", want,
             "; a label map holds one class per ", shape_.volume() ? "voxel" : "image pixel", ", so it must have the ",
             what, "'s ", shape_.volume() ? "depth, height and width" : "height and width",
             " (crop or resize both alike before prep)");
      pixels_ = shape_.plane();
    } else if (shape_.volume() && lnd == 3 && static_cast<int64_t>(ld[0]) == n_) {
      fail(file, ": dataset '", labels, "' holds a 2-D label map per sample (", ld[0], "x", ld[1], "x", ld[2],
           "), but the samples in '", images, "' are volumes (", shape_.text(), "); a volume's label map is D×H×W, ",
           "one class per voxel: give --labels an N×", shape_.depth, "x", shape_.height, "x", shape_.width, " dataset");
    } else if (lnd < 1 || lnd > 2 || (lnd == 2 && ld[1] != 1) || static_cast<int64_t>(ld[0]) != n_) {
      fail(file, ": dataset '", labels, "' must hold one integer label per ", what, " (", n_, ") or one label map of ",
           shape_.volume() ? std::to_string(shape_.depth) + "x" : std::string(), shape_.height, "x", shape_.width,
           " per ", what, " (", shape_.volume() ? "N×D×H×W" : "N×H×W", ": segmentation); it is ", lnd, "-D with ", ld[0],
           " rows");
    }
    // Read as int64 (every integer type fits, so a value beyond int32 is seen, not clipped)
    // in blocks of rows of at most 8 MiB, each checked and kept as int32: label maps of
    // volumes are 4 bytes a voxel here, not 12.
    labels_.resize(static_cast<size_t>(n_ * pixels_));
    const int64_t rows = std::max<int64_t>(1, (int64_t{1} << 20) / pixels_);
    std::vector<int64_t> raw;
    H5Id lfile_space = h5_space(H5Dget_space(lab));
    for (int64_t r0 = 0; r0 < n_; r0 += rows) {
      const int64_t nr = std::min(rows, n_ - r0);
      raw.resize(static_cast<size_t>(nr * pixels_));
      hsize_t start[4] = {static_cast<hsize_t>(r0), 0, 0, 0}, count[4] = {static_cast<hsize_t>(nr), 0, 0, 0};
      for (int i = 1; i < lnd; ++i) count[i] = ld[i];
      H5Sselect_hyperslab(lfile_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
      H5Id mem_space = h5_space(H5Screate_simple(lnd, count, nullptr));
      if (H5Dread(lab, H5T_NATIVE_INT64, mem_space, lfile_space, H5P_DEFAULT, raw.data()) < 0)
        fail(file, ": reading '", labels, "' failed (", h5_error_cause(), ")");
      for (size_t k = 0; k < raw.size(); ++k) {
        const size_t i = static_cast<size_t>(r0 * pixels_) + k;
        if (raw[k] < 0 || raw[k] > INT32_MAX)
          fail(file, ": label ", raw[k], " of sample ", i / static_cast<size_t>(pixels_),
               pixels_ > 1 ? " (pixel " + std::to_string(i % static_cast<size_t>(pixels_)) + ")" : std::string(),
               " in '", labels, "' is negative or too large; labels must be class numbers 0..classes-1");
        labels_[i] = static_cast<int32_t>(raw[k]);
      }
    }
    desc_ = file + ":" + images + " + " + labels;
  }
  std::string describe() const override { return desc_; }
  int64_t samples() const override { return n_; }
  SampleShape shape() const override { return shape_; }
  const std::vector<int32_t>& labels() const override { return labels_; }
  int64_t label_pixels() const override { return pixels_; }
  SampleType dtype() const override { return dtype_; }
  int target_count() const override { return k_; }
  const std::vector<float>& targets() const override { return targets_; }
  void read_images(uint8_t* dst, int64_t n) override {
    Hdf5Lock lock(hdf5_mutex());
    H5Id fs = h5_space(H5Dget_space(img_));
    hsize_t start[5] = {static_cast<hsize_t>(pos_), 0, 0, 0, 0};
    hsize_t count[5] = {static_cast<hsize_t>(n), dims_[1], dims_[2], dims_[3], dims_[4]};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    H5Id ms = h5_space(H5Screate_simple(nd_, count, nullptr));
    H5Id mtype = h5_sample_type(dtype_);  // as stored, little-endian (HDF5 swaps a big-endian file's)
    if (H5Dread(img_, mtype, ms, fs, H5P_DEFAULT, dst) < 0)
      fail(file_, ": reading images ", pos_, "..", pos_ + n - 1, " failed (", h5_error_cause(), ")");
    pos_ += n;
  }

 private:
  std::string file_, desc_;
  H5Id f_, img_;
  int nd_ = 0;
  hsize_t dims_[5] = {0, 0, 0, 0, 0};
  int64_t n_ = 0, pos_ = 0;
  SampleShape shape_;
  SampleType dtype_ = SampleType::u8;
  std::vector<int32_t> labels_;
  int64_t pixels_ = 1;  // labels per sample: 1, or H·W (label maps)
  int k_ = 0;
  std::vector<float> targets_;

  // --targets: N or N×K numbers (any integer or float type), read as float32, each finite.
  void read_targets(const std::string& file, const std::string& name) {
    hid_t d = H5Dopen2(f_, name.c_str(), H5P_DEFAULT);
    if (d < 0) fail(file, " has no dataset '", name, "' (--targets); list its datasets with `h5ls -r ", file, "`");
    H5Id t = h5_dataset(d);
    H5Id type = h5_type(H5Dget_type(t));
    if (H5Tget_class(type) != H5T_FLOAT && H5Tget_class(type) != H5T_INTEGER)
      fail(file, ": dataset '", name, "' (--targets) is not numeric");
    H5Id sp = h5_space(H5Dget_space(t));
    hsize_t td[8] = {0};
    const int tnd = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, td, nullptr);
    if (tnd < 1 || tnd > 2 || static_cast<int64_t>(td[0]) != n_)
      fail(file, ": dataset '", name, "' (--targets) must hold N or N×K targets for the ", n_, " samples; it is ", tnd,
           "-D with ", td[0], " rows", tnd == 3 ? " (per-pixel label maps are not supported yet)" : "");
    k_ = tnd == 2 ? static_cast<int>(td[1]) : 1;
    if (k_ < 1 || k_ > 65536) fail(file, ": dataset '", name, "' (--targets) has ", k_, " targets per sample");
    targets_.resize(static_cast<size_t>(n_) * static_cast<size_t>(k_));
    if (!targets_.empty() && H5Dread(t, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, targets_.data()) < 0)
      fail(file, ": reading '", name, "' failed (", h5_error_cause(), ")");
    for (size_t i = 0; i < targets_.size(); ++i)
      if (!std::isfinite(targets_[i]))
        fail(file, ": target ", i % static_cast<size_t>(k_), " of sample ", i / static_cast<size_t>(k_), " in '", name,
             "' is not finite (as float32); every target must be a number");
  }
};

}  // namespace

std::unique_ptr<SampleStream> open_idx_input(const std::string& images_path, const std::string& labels_path) {
  return std::make_unique<IdxStream>(images_path, labels_path);
}

std::unique_ptr<SampleStream> open_hdf5_input(const std::string& file, const std::string& images,
                                              const std::string& labels, bool targets) {
  return std::make_unique<Hdf5Stream>(file, images, labels, targets);
}

}  // namespace cnnscale
