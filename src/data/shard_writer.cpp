// shard_writer.cpp — see shard_writer.hpp.
#include "data/shard_writer.hpp"

#include <algorithm>
#include <tuple>

#include "util/error.hpp"
#include "util/hdf5_lock.hpp"

namespace cnnscale {

ShardWriter::ShardWriter(const std::string& path, int64_t samples, SampleShape shape, const ShardWriteOptions& opts)
    : path_(path), samples_(samples), shape_(shape), ragged_(opts.ragged) {
  Hdf5Lock lock(hdf5_mutex());
  h5_quiet();
  file_ = h5_file(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
  if (!file_.valid()) fail("cannot create shard ", path, " (", h5_error_cause(), "); check the output directory");
  const hsize_t n = static_cast<hsize_t>(samples);
  const hsize_t dims[4] = {n, static_cast<hsize_t>(shape.channels), static_cast<hsize_t>(shape.height),
                           static_cast<hsize_t>(shape.width)};
  hsize_t chunk[4] = {static_cast<hsize_t>(std::max<int64_t>(1, std::min(opts.chunk_samples, samples))), dims[1],
                      dims[2], dims[3]};
  H5Id dcpl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Id space;
  if (ragged_) {
    // One chunk ≈ one largest sample (C·S·S bytes, within [64 KiB, 4 MiB]): a random
    // sample read touches one or two chunks, each checksummed whole.
    const hsize_t zero = 0, unlimited = H5S_UNLIMITED,
                  rchunk = static_cast<hsize_t>(std::clamp<int64_t>(shape.numel(), 64 << 10, 4 << 20));
    space = h5_space(H5Screate_simple(1, &zero, &unlimited));
    H5Pset_chunk(dcpl, 1, &rchunk);
  } else {
    space = h5_space(H5Screate_simple(4, dims, nullptr));
    H5Pset_chunk(dcpl, 4, chunk);
  }
  if (opts.gzip_level > 0) H5Pset_deflate(dcpl, static_cast<unsigned>(opts.gzip_level));
  H5Pset_fletcher32(dcpl);  // after deflate: the checksum covers the stored (compressed) bytes
  images_ = h5_dataset(H5Dcreate2(file_, "/images", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  if (!images_.valid()) fail("cannot create /images in ", path, " (", h5_error_cause(), ")");

  const hsize_t ldims[1] = {n};
  hsize_t lchunk[1] = {static_cast<hsize_t>(std::max<int64_t>(1, std::min<int64_t>(16384, samples)))};
  H5Id lspace = h5_space(H5Screate_simple(1, ldims, nullptr));
  H5Id lcpl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(lcpl, 1, lchunk);
  H5Pset_fletcher32(lcpl);
  labels_ = h5_dataset(H5Dcreate2(file_, "/labels", H5T_STD_I32LE, lspace, H5P_DEFAULT, lcpl, H5P_DEFAULT));
  if (!labels_.valid()) fail("cannot create /labels in ", path, " (", h5_error_cause(), ")");
}

void ShardWriter::write_failed(const char* doing) const {
  fail(doing, " ", path_, " failed: ", h5_error_cause(),
       "; free space on that file system (is the disk full? `df` tells) or choose another --output");
}

void ShardWriter::append(const uint8_t* images, const int32_t* labels, int64_t n) {
  if (n <= 0) return;
  if (written_ + n > samples_) internal_error("shard ", path_, " overfilled");
  Hdf5Lock lock(hdf5_mutex());
  hsize_t start[4] = {static_cast<hsize_t>(written_), 0, 0, 0};
  hsize_t count[4] = {static_cast<hsize_t>(n), static_cast<hsize_t>(shape_.channels),
                      static_cast<hsize_t>(shape_.height), static_cast<hsize_t>(shape_.width)};
  H5Id fs = h5_space(H5Dget_space(images_));
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
  H5Id ms = h5_space(H5Screate_simple(4, count, nullptr));
  if (H5Dwrite(images_, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, images) < 0)
    write_failed("writing images to");
  write_labels(labels, n);
}

void ShardWriter::append_ragged(const uint8_t* bytes, const SampleShape* shapes, const int32_t* labels, int64_t n) {
  if (n <= 0) return;
  if (!ragged_) internal_error("append_ragged on the fixed-size shard ", path_);
  if (written_ + n > samples_) internal_error("shard ", path_, " overfilled");
  Hdf5Lock lock(hdf5_mutex());
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    total += shapes[i].numel();
    shapes_.insert(shapes_.end(), {shapes[i].channels, shapes[i].height, shapes[i].width});
    offsets_.push_back(offsets_.back() + shapes[i].numel());
  }
  hsize_t start = static_cast<hsize_t>(offsets_.back() - total), count = static_cast<hsize_t>(total),
          size = static_cast<hsize_t>(offsets_.back());
  if (H5Dset_extent(images_, &size) < 0) write_failed("extending /images of");
  H5Id fs = h5_space(H5Dget_space(images_));
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  H5Id ms = h5_space(H5Screate_simple(1, &count, nullptr));
  if (total > 0 && H5Dwrite(images_, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, bytes) < 0)
    write_failed("writing images to");
  write_labels(labels, n);
}

void ShardWriter::write_labels(const int32_t* labels, int64_t n) {
  hsize_t start[1] = {static_cast<hsize_t>(written_)}, count[1] = {static_cast<hsize_t>(n)};
  H5Id lfs = h5_space(H5Dget_space(labels_));
  H5Sselect_hyperslab(lfs, H5S_SELECT_SET, start, nullptr, count, nullptr);
  H5Id lms = h5_space(H5Screate_simple(1, count, nullptr));
  if (H5Dwrite(labels_, H5T_NATIVE_INT32, lms, lfs, H5P_DEFAULT, labels) < 0)
    write_failed("writing labels to");
  written_ += n;
}

void ShardWriter::close() {
  if (written_ != samples_) internal_error("shard ", path_, " got ", written_, " of ", samples_, " samples");
  Hdf5Lock lock(hdf5_mutex());
  if (ragged_) {  // /offsets and /shapes, checksummed like the rest
    for (auto [name, rank, data, mem, file] :
         {std::tuple{"/offsets", 1, static_cast<const void*>(offsets_.data()), H5T_NATIVE_INT64, H5T_STD_I64LE},
          std::tuple{"/shapes", 2, static_cast<const void*>(shapes_.data()), H5T_NATIVE_INT32, H5T_STD_I32LE}}) {
      const hsize_t dims[2] = {static_cast<hsize_t>(rank == 1 ? samples_ + 1 : samples_), 3};
      hsize_t chunk[2] = {std::max<hsize_t>(1, std::min<hsize_t>(dims[0], 16384)), 3};
      H5Id sp = h5_space(H5Screate_simple(rank, dims, nullptr));
      H5Id pl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
      H5Pset_chunk(pl, rank, chunk);
      H5Pset_fletcher32(pl);
      H5Id d = h5_dataset(H5Dcreate2(file_, name, file, sp, H5P_DEFAULT, pl, H5P_DEFAULT));
      if (!d.valid() || H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) write_failed("writing offsets to");
    }
  }
  images_.reset();
  labels_.reset();
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0) write_failed("flushing");
  const hid_t f = file_.release();
  if (H5Fclose(f) < 0) write_failed("closing");
}

}  // namespace cnnscale
