// dataset_verify.cpp — verify_dataset(): reads every image chunk of every shard so
// that HDF5 checks each chunk's fletcher32 checksum (`cnnscale prep --verify DIR`), and
// every byte once more through the shard's /chunk_addresses list where it has one.
#include <algorithm>
#include <vector>

#include "data/chunk_reader.hpp"
#include "data/dataset.hpp"
#include "data/h5util.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"

namespace cnnscale {
namespace {

// A shard's /chunk_addresses (prep's list for the direct reader, chunk_reader.hpp): every
// byte of /images read through it, so that each chunk is found where the list says and
// carries the checksum the list holds — a list left stale by a rewrite of the file is
// named here, not in the middle of a training run.
void verify_chunk_list(const std::string& path, hid_t f, hid_t images) {
  if (H5Lexists(f, "/chunk_addresses", H5P_DEFAULT) <= 0) return;
  const auto r = DirectChunkReader::open(path, images);
  if (!r) return;  // not the plain layout: HDF5's reads below check it
  H5Id space = h5_space(H5Dget_space(images));
  const int64_t total = static_cast<int64_t>(H5Sget_simple_extent_npoints(space));
  std::vector<uint8_t> piece, chunks;
  const int64_t step = std::max<int64_t>(r->chunk_bytes(), (8 << 20) / r->chunk_bytes() * r->chunk_bytes());
  for (int64_t at = 0; at < total; at += step) {
    const int64_t end = std::min(total, at + step);
    piece.resize(static_cast<size_t>(end - at));
    r->read(at, end, piece.data(), chunks);
  }
}

}  // namespace

void verify_dataset(const DatasetInfo& info, const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t total = info.train.samples + info.test.samples;
  const int64_t numel = info.shape.numel();
  int64_t done = 0;
  std::vector<uint8_t> buf;
  for (const SplitInfo* split : {&info.train, &info.test}) {
    for (const auto& sh : split->shards) {
      Hdf5Lock lock(hdf5_mutex());
      std::string cause;
      H5Id f = h5_open_readonly(sh.path, cause);
      if (!f.valid()) fail("shard ", sh.path, " cannot be opened as HDF5 (", cause, "); copy it again or re-run prep");
      H5Id d = h5_dataset(H5Dopen2(f, "/images", H5P_DEFAULT));
      H5Id dcpl = h5_plist(H5Dget_create_plist(d));
      hsize_t cdims[4] = {0};
      int64_t step = 256;
      if (H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 4, cdims) == 4)
        step = static_cast<int64_t>(cdims[0]);
      H5Id fspace = h5_space(H5Dget_space(d));
      if (info.ragged) {  // 1-D /images: read it chunk by chunk of bytes
        hsize_t bytes = 0, cb = 0;
        H5Sget_simple_extent_dims(fspace, &bytes, nullptr);
        if (H5Pget_layout(dcpl) != H5D_CHUNKED || H5Pget_chunk(dcpl, 1, &cb) != 1) cb = 1 << 20;
        for (hsize_t at = 0; at < bytes; at += cb) {
          hsize_t n = std::min(cb, bytes - at);
          H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &at, nullptr, &n, nullptr);
          H5Id mspace = h5_space(H5Screate_simple(1, &n, nullptr));
          buf.resize(static_cast<size_t>(n));
          if (H5Dread(d, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, buf.data()) < 0)
            fail("shard ", sh.path, " is damaged: reading image bytes ", at, "..", at + n - 1, " failed (",
                 h5_error_cause(), "); the data no longer match their checksum — copy the file again or re-run ",
                 "`cnnscale prep`");
        }
        verify_chunk_list(sh.path, f, d);  // after HDF5's own check: a failure here is the list's
        done += sh.samples;
        if (progress) progress(done, total);
        continue;
      }
      for (int64_t at = 0; at < sh.samples; at += step) {
        const int64_t n = std::min(step, sh.samples - at);
        hsize_t start[4] = {static_cast<hsize_t>(at), 0, 0, 0};
        hsize_t count[4] = {static_cast<hsize_t>(n), static_cast<hsize_t>(info.shape.channels),
                            static_cast<hsize_t>(info.shape.height), static_cast<hsize_t>(info.shape.width)};
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr);
        H5Id mspace = h5_space(H5Screate_simple(4, count, nullptr));
        buf.resize(static_cast<size_t>(n * numel));
        if (H5Dread(d, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, buf.data()) < 0)
          fail("shard ", sh.path, " is damaged: reading images ", at, "..", at + n - 1, " failed (", h5_error_cause(),
               "); the data no longer match their checksum — copy the file again or re-run `cnnscale prep`");
        done += n;
        if (progress) progress(done, total);
      }
      verify_chunk_list(sh.path, f, d);
    }
  }
}

}  // namespace cnnscale
