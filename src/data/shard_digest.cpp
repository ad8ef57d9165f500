// shard_digest.cpp — shard_digest(): SHA-256 of a shard's count, labels, ragged layout and chunk checksums.
#include "data/shard_digest.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "data/h5util.hpp"
#include "util/error.hpp"

namespace cnnscale {

std::string shard_digest(const std::string& path, hid_t images, int64_t samples, const int32_t* labels,
                         const int64_t* offsets, const int32_t* shapes, const float* targets, int k,
                         hid_t label_maps) {
  const char* kFix = "copy it again or re-create the data set with `cnnscale prep`";
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!md || EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr) != 1)
    fail("SHA-256 is not available from OpenSSL (the shard digest of ", path, " cannot be computed)");
  auto add = [&](const void* p, size_t n) { EVP_DigestUpdate(md.get(), p, n); };
  static constexpr char kTag[] = "cnnscale shard digest 1";
  add(kTag, sizeof kTag);
  add(&samples, sizeof samples);
  if (label_maps >= 0) {  // segmentation: a tag; the maps' chunks follow the images'
    static constexpr char kMaps[] = "label maps";
    add(kMaps, sizeof kMaps);
  } else if (labels) {
    add(labels, static_cast<size_t>(samples) * sizeof(int32_t));
  } else {  // regression: a tag no label array begins with, K, the targets
    static constexpr char kTargets[] = "targets";
    add(kTargets, sizeof kTargets);
    add(&k, sizeof k);
    add(targets, static_cast<size_t>(samples) * static_cast<size_t>(k) * sizeof(float));
  }
  const uint8_t ragged = offsets != nullptr;
  add(&ragged, 1);
  if (ragged) {
    add(offsets, static_cast<size_t>(samples + 1) * sizeof(int64_t));
    add(shapes, static_cast<size_t>(samples) * 3 * sizeof(int32_t));
  }

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open shard ", path, ": ", std::strerror(errno), "; check permissions");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Per chunk of a dataset chunked along its first dimension (as prep writes /images and
  // label maps), in chunk order: its stored size, filter mask and last 4 stored bytes (its
  // Fletcher32).
  const auto add_chunks = [&](hid_t ds, const char* name) {
    H5Id space = h5_space(H5Dget_space(ds));
    H5Id dcpl(H5Dget_create_plist(ds), H5Pclose);
    hsize_t dims[8] = {0}, chunk[8] = {0};
    const int rank = space.valid() ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank < 1 || rank > 8 || !dcpl.valid() || H5Pget_layout(dcpl) != H5D_CHUNKED ||
        H5Pget_chunk(dcpl, rank, chunk) != rank)
      fail("shard ", path, ": ", name, " is not chunked as prep writes it (", h5_error_cause(), "); ", kFix);
    H5Sget_simple_extent_dims(space, dims, nullptr);
    for (int d = 1; d < rank; ++d)
      if (chunk[d] != dims[d]) fail("shard ", path, ": ", name, " is chunked along more than its first dimension; ", kFix);
    const int64_t n = chunk[0] ? static_cast<int64_t>((dims[0] + chunk[0] - 1) / chunk[0]) : 0;
    // The stored size each chunk must have, where it is known before HDF5 unfilters it
    // (h5util.hpp: a chunk stored shorter than its layout says made libhdf5 read past its buffer).
    const hsize_t want = h5_stored_chunk_bytes(ds, 0), want_unfiltered = h5_stored_chunk_bytes(ds, 1);
    for (int64_t c = 0; c < n; ++c) {
      hsize_t at[8] = {static_cast<hsize_t>(c) * chunk[0]};
      unsigned mask = 0;
      haddr_t addr = HADDR_UNDEF;
      hsize_t size = 0;
      uint8_t last[4] = {0, 0, 0, 0};
      if (H5Dget_chunk_info_by_coord(ds, at, &mask, &addr, &size) < 0)
        fail("shard ", path, ": HDF5 cannot find ", name, " chunk ", c, " (", h5_error_cause(),
             "): the file is damaged; ", kFix);
      if (addr != HADDR_UNDEF && size >= 4 && ::pread(fd, last, 4, static_cast<off_t>(addr + size - 4)) != 4)
        fail("shard ", path, ": reading ", name, " chunk ", c, " at offset ", addr, " failed (",
             errno ? std::strerror(errno) : "the file ends before it", "): the file is truncated or damaged; ", kFix);
      if (const hsize_t w = mask & 1u ? want_unfiltered : want; addr != HADDR_UNDEF && w != 0 && size != w)
        fail("shard ", path, ": ", name, " chunk ", c, " stores ", size, " bytes, not the ", w,
             " its chunk shape makes: the file is damaged; ", kFix);
      const uint64_t stored = addr == HADDR_UNDEF ? ~uint64_t{0} : static_cast<uint64_t>(size);
      add(&stored, sizeof stored);
      add(&mask, sizeof mask);
      add(last, 4);
    }
  };
  add_chunks(images, "/images");
  if (label_maps >= 0) add_chunks(label_maps, "/labels");
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_DigestFinal_ex(md.get(), out, &len) != 1) fail("SHA-256 failed in OpenSSL for shard ", path);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s = "sha256:";
  for (unsigned i = 0; i < len; ++i) {
    s += kHex[out[i] >> 4];
    s += kHex[out[i] & 15];
  }
  return s;
}

}  // namespace cnnscale
