// h5util.hpp — small helpers around the HDF5 C API: an owning handle that closes
// itself, silencing HDF5's own error printing, and the innermost cause on HDF5's
// error stack (e.g. "Fletcher32 checksum error") for cnnscale's error messages.
// Callers hold hdf5_mutex() (util/hdf5_lock.hpp) around all of these.
#pragma once
#include <hdf5.h>

#include <string>
#include <utility>

#include "data/sample_type.hpp"
#include "util/sample_shape.hpp"

namespace cnnscale {

// Owns an hid_t and closes it with the matching H5*close.
class H5Id {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Id() = default;
  H5Id(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& o) noexcept : id_(std::exchange(o.id_, -1)), closer_(o.closer_) {}
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, -1);
      closer_ = o.closer_;
    }
    return *this;
  }
  ~H5Id() { reset(); }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = -1;
  }
  hid_t release() { return std::exchange(id_, -1); }  // gives up ownership
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

inline H5Id h5_file(hid_t id) { return H5Id(id, H5Fclose); }
inline H5Id h5_dataset(hid_t id) { return H5Id(id, H5Dclose); }
inline H5Id h5_space(hid_t id) { return H5Id(id, H5Sclose); }
inline H5Id h5_plist(hid_t id) { return H5Id(id, H5Pclose); }
inline H5Id h5_type(hid_t id) { return H5Id(id, H5Tclose); }
inline H5Id h5_attr(hid_t id) { return H5Id(id, H5Aclose); }

// Turns off HDF5's automatic error-stack printing for the calling thread (and, in a
// non-thread-safe build, for the process). Idempotent.
void h5_quiet();

// The most specific description on the current HDF5 error stack (empty if none),
// e.g. "Fletcher32 checksum error" or "truncated file: eof = ...". Clears the stack.
std::string h5_error_cause();

// Why libhdf5 must not be asked to read dataset `ds` (H5Dread), or "" when nothing is wrong
// with its layout. HDF5 1.10 unfilters a chunk into a buffer of the size the filters return
// and then copies a whole chunk's bytes out of it, so a file whose layout message claims a
// larger chunk than is stored made it read past that buffer (tests/fuzz/hdf5-crashes/).
// HDF5's writer never makes such a file; refused here: a chunk dimension of 0 or above a
// fixed dimension's maximum, a compact dataset whose stored bytes are not its elements',
// and (each_chunk) more than 2^20 chunks or a stored chunk of another size than
// h5_stored_chunk_bytes() — for /images and label maps, whose chunks may be many,
// shard_digest() checks that while it visits them anyway. Caller holds hdf5_mutex().
std::string h5_layout_problem(hid_t ds, bool each_chunk = true);

// The bytes a chunk of `ds` with filter mask `mask` has in the file, where they are known
// before it is unfiltered: its values' bytes, + 4 where Fletcher32 is the only filter and
// applied (every dataset prep writes but gzip'd /images). 0: not known (other filters, gzip:
// sized only when inflated; a layout that is not chunked).
hsize_t h5_stored_chunk_bytes(hid_t ds, unsigned mask);

// Opens an existing HDF5 file read-only (sec2 driver, serial), or returns an invalid
// handle; `cause` then says why.
H5Id h5_open_readonly(const std::string& path, std::string& cause);

// The little-endian HDF5 type of a sample type, as shards store it and as readers read it
// (memory and file alike: no conversion). float16: IEEE binary16 (HDF5 1.10 has no predefined
// one; h5py and numpy write this).
H5Id h5_sample_type(SampleType t);

// A shard's /images dims for n samples of `shape`: N×C×H×W (rank 4) or a volume's
// N×C×D×H×W (rank 5) into dims[0..rank); returns the rank.
inline int h5_image_dims(const SampleShape& shape, hsize_t n, hsize_t dims[5]) {
  dims[0] = n;
  dims[1] = static_cast<hsize_t>(shape.channels);
  int r = 2;
  if (shape.volume()) dims[r++] = static_cast<hsize_t>(shape.depth);
  dims[r++] = static_cast<hsize_t>(shape.height);
  dims[r++] = static_cast<hsize_t>(shape.width);
  return r;
}

// A shard's /labels dims for n label maps of samples of `shape` (segmentation): N×H×W (rank
// 3) or a volume's N×D×H×W (rank 4), a class per pixel (voxel), into dims[0..rank); returns
// the rank.
inline int h5_label_map_dims(const SampleShape& shape, hsize_t n, hsize_t dims[4]) {
  hsize_t img[5];
  const int r = h5_image_dims(shape, n, img);
  dims[0] = n;
  for (int i = 2; i < r; ++i) dims[i - 1] = img[i];
  return r - 1;
}

}  // namespace cnnscale
