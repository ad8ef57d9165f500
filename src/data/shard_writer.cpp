// shard_writer.cpp — see shard_writer.hpp.
#include "data/shard_writer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <tuple>

#include "util/error.hpp"
#include "util/hdf5_lock.hpp"
#include "util/log.hpp"

namespace cnnscale {

ShardWriter::ShardWriter(const std::string& path, int64_t samples, SampleShape shape, const ShardWriteOptions& opts)
    : path_(path), samples_(samples), shape_(shape), ragged_(opts.ragged), gzip_level_(opts.gzip_level),
      dtype_(opts.dtype), targets_(opts.targets), label_maps_(opts.label_maps) {
  try {
    build(opts);
  } catch (...) {  // no destructor runs for a half-built writer
    discard();
    throw;
  }
}

ShardWriter::~ShardWriter() {
  if (!closed_) discard();
}

void ShardWriter::discard() noexcept {
  Hdf5Lock lock(hdf5_mutex());
  if (file_.valid()) {
    H5Id fapl(H5Fget_access_plist(file_), H5Pclose);
    void* handle = nullptr;
    if (fapl.valid() && H5Pget_driver(fapl) == H5FD_SEC2 && H5Fget_vfd_handle(file_, fapl, &handle) >= 0 && handle) {
      const int mem = ::memfd_create("cnnscale-discarded-shard", MFD_CLOEXEC);
      if (mem >= 0) {
        ::dup3(mem, *static_cast<int*>(handle), O_CLOEXEC);  // HDF5's descriptor now names the memory file
        ::close(mem);
      }
    }
  }
  labels_.reset();
  images_.reset();
  file_.reset();
  h5_error_cause();  // clears the stack
}

void ShardWriter::build(const ShardWriteOptions& opts) {
  const std::string& path = path_;
  const int64_t samples = samples_;
  const SampleShape shape = shape_;
  Hdf5Lock lock(hdf5_mutex());
  h5_quiet();
  file_ = h5_file(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
  if (!file_.valid()) fail("cannot create shard ", path, " (", h5_error_cause(), "); check the output directory");
  const hsize_t n = static_cast<hsize_t>(samples);
  hsize_t dims[5] = {0};
  const int irank = h5_image_dims(shape, n, dims);  // 5: a volume's N×C×D×H×W
  if (irank == 5 && ragged_) internal_error("a ragged shard of volumes");
  // Science samples (int16/float16/float32: volumes of MiBs each) get chunks of at most
  // 4 MiB or one sample, as a reader reads and checksums a chunk whole.
  int64_t rows = std::min(opts.chunk_samples, samples);
  if (opts.dtype != SampleType::u8)
    rows = std::min(rows, (int64_t{4} << 20) / std::max<int64_t>(1, shape.numel() * sample_type_bytes(opts.dtype)));
  hsize_t chunk[5] = {static_cast<hsize_t>(std::max<int64_t>(1, rows)), dims[1], dims[2], dims[3], dims[4]};
  H5Id dcpl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Id space;
  if (ragged_) {
    // One chunk = an eighth of the largest sample (C·S·S/8 bytes, within [16 KiB, 4 MiB]):
    // a sample read reads the chunks it touches whole (each is checksummed whole), so
    // it reads at most its bytes plus two partial chunks — ≤ 1.2× for a typical photo
    // (issue 27 item 3; one largest sample per chunk read 2.6×). The small chunks are
    // affordable because the shard records where they are (/chunk_addresses, below),
    // up to 16 384 chunks a shard: listing them costs time quadratic in their count
    // (0.2 s for 5 000), so a shard of more than ~2 000 largest samples gets larger chunks.
    // JPEG samples (--store jpeg) are ~1/6 of their pixels: chunks of a 64th.
    const int64_t stored = opts.encoded ? shape.numel() / 8 : shape.numel();
    const int64_t per_chunk = std::max(stored / 8, (samples * stored + 16383) / 16384);
    const hsize_t zero = 0, unlimited = H5S_UNLIMITED,
                  rchunk = static_cast<hsize_t>(std::clamp<int64_t>(per_chunk, 16 << 10, 4 << 20));
    space = h5_space(H5Screate_simple(1, &zero, &unlimited));
    H5Pset_chunk(dcpl, 1, &rchunk);
  } else {
    space = h5_space(H5Screate_simple(irank, dims, nullptr));
    H5Pset_chunk(dcpl, irank, chunk);
  }
  if (opts.gzip_level > 0) H5Pset_deflate(dcpl, static_cast<unsigned>(opts.gzip_level));
  H5Pset_fletcher32(dcpl);  // after deflate: the checksum covers the stored (compressed) bytes
  if (opts.dtype != SampleType::u8 && ragged_) internal_error("a ragged shard of ", sample_type_name(opts.dtype));
  H5Id itype = h5_sample_type(opts.dtype);
  images_ = h5_dataset(H5Dcreate2(file_, "/images", itype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  if (!images_.valid()) fail("cannot create /images in ", path, " (", h5_error_cause(), ")");
  // Per sample: its label (/labels int32 N), its label map (/labels int32 N×H×W or N×D×H×W:
  // segmentation) or its K targets (/targets float32 N×K: regression, multilabel), in chunks
  // of 16,384 rows (label maps: of at most 4 MiB, at least one map) with the fletcher32 checksum.
  if (opts.label_maps && (opts.targets > 0 || ragged_)) internal_error("label maps with targets or ragged samples");
  const bool targets = opts.targets > 0;
  const char* name = targets ? "/targets" : "/labels";
  const int64_t map = shape.plane();
  const int64_t lrows = opts.label_maps ? std::max<int64_t>(1, std::min<int64_t>(samples, (int64_t{1} << 20) / map))
                                        : std::min<int64_t>(16384, samples);
  hsize_t ldims[4] = {n, static_cast<hsize_t>(opts.targets), 0, 0};
  const int rank = opts.label_maps ? h5_label_map_dims(shape, n, ldims) : targets ? 2 : 1;  // maps: N×H×W, N×D×H×W
  hsize_t lchunk[4] = {static_cast<hsize_t>(std::max<int64_t>(1, lrows)), ldims[1], ldims[2], ldims[3]};
  H5Id lspace = h5_space(H5Screate_simple(rank, ldims, nullptr));
  H5Id lcpl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(lcpl, rank, lchunk);
  H5Pset_fletcher32(lcpl);
  labels_ = h5_dataset(H5Dcreate2(file_, name, targets ? H5T_IEEE_F32LE : H5T_STD_I32LE, lspace, H5P_DEFAULT, lcpl,
                                  H5P_DEFAULT));
  if (!labels_.valid()) fail("cannot create ", name, " in ", path, " (", h5_error_cause(), ")");
}

void ShardWriter::write_failed(const char* doing) const {
  fail(doing, " ", path_, " failed: ", h5_error_cause(),
       "; free space on that file system (is the disk full? `df` tells) or choose another --output");
}

void ShardWriter::append(const uint8_t* images, const int32_t* labels, int64_t n, const float* targets) {
  if (n <= 0) return;
  if (written_ + n > samples_) internal_error("shard ", path_, " overfilled");
  Hdf5Lock lock(hdf5_mutex());
  hsize_t start[5] = {static_cast<hsize_t>(written_), 0, 0, 0, 0};
  hsize_t count[5] = {0};
  const int rank = h5_image_dims(shape_, static_cast<hsize_t>(n), count);
  H5Id fs = h5_space(H5Dget_space(images_));
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
  H5Id ms = h5_space(H5Screate_simple(rank, count, nullptr));
  H5Id mtype = h5_sample_type(dtype_);
  if (H5Dwrite(images_, mtype, ms, fs, H5P_DEFAULT, images) < 0) write_failed("writing images to");
  if (targets_ > 0) write_targets(targets, n);
  else write_labels(labels, n);
}

void ShardWriter::write_targets(const float* targets, int64_t n) {
  hsize_t start[2] = {static_cast<hsize_t>(written_), 0}, count[2] = {static_cast<hsize_t>(n),
                                                                       static_cast<hsize_t>(targets_)};
  H5Id fs = h5_space(H5Dget_space(labels_));
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
  H5Id ms = h5_space(H5Screate_simple(2, count, nullptr));
  if (H5Dwrite(labels_, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, targets) < 0) write_failed("writing targets to");
  written_ += n;
}

void ShardWriter::append_ragged(const uint8_t* bytes, const SampleShape* shapes, const int32_t* labels, int64_t n,
                                const int64_t* lengths) {
  if (n <= 0) return;
  if (!ragged_) internal_error("append_ragged on the fixed-size shard ", path_);
  if (written_ + n > samples_) internal_error("shard ", path_, " overfilled");
  Hdf5Lock lock(hdf5_mutex());
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = lengths ? lengths[i] : shapes[i].numel();
    total += len;
    shapes_.insert(shapes_.end(), {shapes[i].channels, shapes[i].height, shapes[i].width});
    offsets_.push_back(offsets_.back() + len);
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
  hsize_t start[4] = {static_cast<hsize_t>(written_), 0, 0, 0}, count[4] = {static_cast<hsize_t>(n), 0, 0, 0};
  const int rank = label_maps_ ? h5_label_map_dims(shape_, static_cast<hsize_t>(n), count) : 1;
  H5Id lfs = h5_space(H5Dget_space(labels_));
  H5Sselect_hyperslab(lfs, H5S_SELECT_SET, start, nullptr, count, nullptr);
  H5Id lms = h5_space(H5Screate_simple(rank, count, nullptr));
  if (H5Dwrite(labels_, H5T_NATIVE_INT32, lms, lfs, H5P_DEFAULT, labels) < 0) write_failed("writing labels to");
  written_ += n;
}

void ShardWriter::write_chunk_addresses() {
  // Every /images chunk's file offset, in chunk order, for DirectChunkReader: HDF5 1.10
  // looks a chunk's address up in time that grows with the chunk count (h5py, a 200 MB
  // shard: 8.6 µs per lookup at 682 chunks, 87 µs at 12 800), too slow for every reader
  // of every shard; here it is paid once. The chunks are flushed first, so they have
  // their final places; nothing written after moves them.
  if (H5Dflush(images_) < 0) write_failed("flushing /images of");
  H5Id space = h5_space(H5Dget_space(images_));
  H5Id dcpl = h5_plist(H5Dget_create_plist(images_));
  const int rank = H5Sget_simple_extent_ndims(space);
  hsize_t dims[5] = {0}, chunk[5] = {0};  // rank 5: volumes
  H5Sget_simple_extent_dims(space, dims, nullptr);
  if (H5Pget_chunk(dcpl, rank, chunk) != rank || chunk[0] == 0) internal_error("/images of ", path_, " is not chunked");
  const hsize_t n = (dims[0] + chunk[0] - 1) / chunk[0];
  if (n == 0) return;
  // Row c: the chunk's file offset, its stored Fletcher32 (its last 4 bytes), so that a
  // reader can tell the chunk it finds there is chunk c (not another chunk of a rewritten
  // file), and c itself, so that a row is bound to its chunk wherever it stands (rows put
  // in another order, the list's own checksum made right, were read as good data: issue 39).
  std::vector<uint64_t> rows(static_cast<size_t>(3 * n));
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) write_failed("reopening");
  haddr_t end = 0;  // of the chunk before
  for (hsize_t c = 0; c < n; ++c) {
    hsize_t at[5] = {c * chunk[0], 0, 0, 0, 0};
    unsigned mask = 0;
    haddr_t a = HADDR_UNDEF;
    hsize_t size = 0;
    uint8_t sum[4] = {0};
    if (H5Dget_chunk_info_by_coord(images_, at, &mask, &a, &size) < 0 || a == HADDR_UNDEF || size < 4 ||
        ::pread(fd, sum, 4, static_cast<off_t>(a + size - 4)) != 4) {
      ::close(fd);
      write_failed("listing the chunks of");
    }
    rows[static_cast<size_t>(3 * c)] = a;
    rows[static_cast<size_t>(3 * c + 1)] =
        uint64_t{sum[0]} | uint64_t{sum[1]} << 8 | uint64_t{sum[2]} << 16 | uint64_t{sum[3]} << 24;
    rows[static_cast<size_t>(3 * c + 2)] = c;
    // Readers refuse a list whose chunks are not in file order (chunk_reader.hpp). HDF5
    // allocates the chunks of a file written once, sequentially, in write order (every
    // --store kind and input format checked); were it ever otherwise, no list is written
    // and readers look the chunks up (correct, slower to open).
    if (a < end) {
      ::close(fd);
      log_warn("shard " + path_ + ": its chunks are not in file order (chunk " + std::to_string(c) +
               "), so it gets no /chunk_addresses list: readers look each chunk up through HDF5, which is "
               "correct but slower to open (please report: prep expects HDF5 to place them in order)");
      return;
    }
    end = a + size;
  }
  ::close(fd);
  const hsize_t tdims[2] = {n, 3}, cchunk[2] = {std::min<hsize_t>(n, 8192), 3};
  H5Id sp = h5_space(H5Screate_simple(2, tdims, nullptr));
  H5Id pl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(pl, 2, cchunk);
  H5Pset_fletcher32(pl);
  H5Id d = h5_dataset(H5Dcreate2(file_, "/chunk_addresses", H5T_STD_U64LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT));
  if (!d.valid() || H5Dwrite(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0 || H5Dflush(d) < 0)
    write_failed("writing /chunk_addresses to");
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
      if (!d.valid() || H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0 || H5Dflush(d) < 0)
        write_failed("writing offsets to");
    }
  }
  // Every dataset flushed, and checked, before it is closed: H5Dclose's own flush fails
  // silently for its caller (a chunk lost on a full disk, the shard looking complete).
  if (H5Dflush(images_) < 0) write_failed("writing images to");
  if (H5Dflush(labels_) < 0) write_failed("writing labels to");
  if (gzip_level_ == 0) write_chunk_addresses();
  images_.reset();
  labels_.reset();
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0) write_failed("flushing");
  const hid_t f = file_.release();
  closed_ = true;
  if (H5Fclose(f) < 0) write_failed("closing");
}

}  // namespace cnnscale
